import keras
import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, fit_built, run_layer_test
from zoo.layers import TransformerDecoderBlock, TransformerEncoderBlock
from zoo.layers.attention import LinearAttention, get_attention
from zoo.layers.attention.linear import kernel_attention

# Shared with the Performer and Linformer tests, as are the NumPy references below.
RNG = np.random.default_rng(0)
B, T, S, D = 2, 10, 7, 16
PADDING = np.array([[1] * T, [1] * 6 + [0] * 4], bool)
SOURCE_PADDING = np.array([[1] * S, [1] * 4 + [0] * 3], bool)
CAUSAL = np.tril(np.ones((T, T), bool))


def sample(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- NumPy references (float64)
def _dense(layer, x):
    return x @ np.asarray(layer.kernel, "float64") + np.asarray(layer.bias, "float64")


def project(layer, query, value=None):
    """The layer's queries (B, T, N, H) and keys, values (B, S, N, H), from its weights."""
    n, h = layer.num_heads, layer.key_dim
    if layer.fused_qkv:
        qkv = _dense(layer.qkv_dense, query)
        q, k, v = qkv[..., : n * h], qkv[..., n * h : 2 * n * h], qkv[..., 2 * n * h :]
    else:
        value = query if value is None else value
        q = _dense(layer.query_dense, query)
        k, v = _dense(layer.key_dense, value), _dense(layer.value_dense, value)
    return tuple(a.reshape(a.shape[:2] + (n, -1)) for a in (q, k, v))


def output(layer, z):
    """The output projection of the attended values z (B, T, N, H)."""
    return _dense(layer.output_dense, z.reshape(z.shape[:2] + (-1,)))


def quadratic_form(phi_q, phi_k, v, mask):
    """The definition of kernelized attention, with the T x S matrix written out:
    w_ts = phi(q_t) . phi(k_s) over the keys that mask (B, T, S) lets t see, normalized."""
    w = np.einsum("btnm,bsnm->bnts", phi_q, phi_k) * mask[:, None]
    w = w / w.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", w, v), w


def encoder_loss_goes_down(attention, attention_kwargs=None, steps=12):
    """A tiny encoder block with the variant, trained a few steps: the loss must fall."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 12, D)).astype("float32")
    y = np.repeat(x.mean(1, keepdims=True), 12, axis=1)  # needs attention across positions
    inputs = keras.Input((12, D))
    block = TransformerEncoderBlock(
        2, 32, attention=attention, attention_kwargs=attention_kwargs, normalize_first=True
    )
    model = keras.Model(inputs, keras.layers.Dense(D)(block(inputs)))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    losses = fit_built(model, x, y, batch_size=8, epochs=steps, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < 0.5 * losses[0], losses


def _phi(x):
    return np.where(x > 0, x + 1, np.exp(x))  # elu(x) + 1


# ---------------------------------------------------------------- harness runs
def test_causal_self_attention_layer():
    run_layer_test(
        LinearAttention,
        {"num_heads": 2, "key_dim": 8, "fused_qkv": True, "chunk_size": 4},
        {"query": sample(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_returns_weights():
    run_layer_test(
        LinearAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10},
        {"query": sample(B, T, D), "value": sample(B, S, 12), "padding_mask": SOURCE_PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, 10), (B, 2, T, S)],
    )


# ---------------------------------------------------------------- the definition
def test_non_causal_cross_attention_equals_the_quadratic_form():
    layer = LinearAttention(num_heads=2, key_dim=4, value_dim=5)
    assert get_attention("linear") is LinearAttention
    query, value = sample(B, T, D), sample(B, S, 12)
    got, weights = layer(
        query, value, padding_mask=SOURCE_PADDING, return_attention_scores=True
    )
    q, k, v = project(layer, query, value)
    mask = np.broadcast_to(SOURCE_PADDING[:, None, :], (B, T, S))
    z, want_weights = quadratic_form(_phi(q), _phi(k), v, mask)
    np.testing.assert_allclose(np.asarray(got), output(layer, z), atol=1e-5)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)


@pytest.mark.parametrize("chunk_size", [3, 64])  # four chunks (the last one padded); one chunk
def test_causal_equals_the_lower_triangular_quadratic_form(chunk_size):
    layer = LinearAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=chunk_size)
    x = sample(B, T, D)
    got, weights = layer(
        x, padding_mask=PADDING, use_causal_mask=True, return_attention_scores=True
    )
    q, k, v = project(layer, x)
    z, want_weights = quadratic_form(_phi(q), _phi(k), v, CAUSAL[None] & PADDING[:, None, :])
    np.testing.assert_allclose(np.asarray(got), output(layer, z), atol=1e-5)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_core_rescales_key_log_scales_without_overflow(causal):
    # Key features phi_k * exp(l) with |l| up to ~100: exp(l) alone overflows float32; the
    # core must still give the float64 definition, at every chunking.
    phi_q, phi_k = RNG.random((B, T, 2, 5)), RNG.random((B, T, 2, 5))
    v, log_scale = RNG.normal(size=(B, T, 2, 3)), RNG.normal(size=(B, T, 2)) * 40
    mask = (CAUSAL[None] if causal else True) & PADDING[:, None, :]
    z, _ = quadratic_form(phi_q, phi_k * np.exp(log_scale)[..., None], v, mask)
    for chunk_size in (1, 4, 64):
        got = kernel_attention(
            *(a.astype("float32") for a in (phi_q, phi_k, v)),
            key_mask=PADDING,
            causal=causal,
            key_log_scale=log_scale.astype("float32"),
            chunk_size=chunk_size,
        )
        np.testing.assert_allclose(np.asarray(got), z, atol=1e-5, err_msg=f"chunk {chunk_size}")


def test_dynamic_length_in_a_functional_model():
    layer = LinearAttention(num_heads=2, key_dim=8, chunk_size=4)
    inputs = keras.Input((None, D))
    model = keras.Model(inputs, layer(inputs, use_causal_mask=True))
    for length in (10, 3):
        x = sample(B, length, D)
        np.testing.assert_allclose(
            np.asarray(model.predict(x, verbose=0)),
            np.asarray(layer(x, use_causal_mask=True)),
            atol=1e-5,
        )


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("causal", [False, True])
def test_padding_never_leaks(causal):
    layer = LinearAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=3)
    check_padding_leak(
        lambda x, m: layer(x, padding_mask=m, use_causal_mask=causal), sample(B, T, D), PADDING
    )


def test_causal_never_leaks():
    layer = LinearAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=3)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), sample(B, T, D))


def test_unsupported_combinations_are_clear_errors():
    layer = LinearAttention(num_heads=2, key_dim=4)
    x = sample(B, T, D)
    with pytest.raises(ValueError, match="arbitrary .* `attention_mask`"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.init_cache(B, T)
    with pytest.raises(ValueError, match="has no KV cache"):
        layer(x, cache=np.zeros((B, 2, T, 2, 4), "float32"), cache_index=0)
    with pytest.raises(ValueError, match="as many queries as keys"):
        LinearAttention(num_heads=2, key_dim=4)(x, sample(B, S, D), use_causal_mask=True)
    with pytest.raises(ValueError, match="score='cosine' is not supported"):
        LinearAttention(num_heads=2, key_dim=4, score="cosine")
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        LinearAttention(num_heads=2, key_dim=4, chunk_size=0)


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_trains():
    encoder_loss_goes_down("linear", {"chunk_size": 4})


def test_decoder_block_with_causal_linear_self_attention():
    block = TransformerDecoderBlock(2, 32, attention="linear", attention_kwargs={"chunk_size": 3})
    x, memory = sample(B, T, D), sample(B, S, D)
    out = np.asarray(block(x, memory, encoder_padding_mask=SOURCE_PADDING))
    assert out.shape == (B, T, D) and np.all(np.isfinite(out))
    assert isinstance(block.self_attention_layer, LinearAttention)
    check_causal_leak(lambda y: block(y, memory, encoder_padding_mask=SOURCE_PADDING), x)
