import keras
import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test
from tests.layers.test_linear_attention import (
    B,
    CAUSAL,
    D,
    PADDING,
    S,
    SOURCE_PADDING,
    T,
    encoder_loss_goes_down,
    output,
    project,
)
from zoo.layers import TransformerDecoderBlock
from zoo.layers.attention import AFTAttention, get_attention


def sample(*shape, seed=0):
    """Its own generator, not a module RNG: the JAX check calls the helpers as they are."""
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def aft_reference(q, k, v, mask):
    """The paper's AFT-simple, one query at a time, in float64:
    Y_tf = sigmoid(Q_tf) * sum_s exp(K_sf) V_sf / sum_s exp(K_sf) over the keys s that
    ``mask`` (B, T, S) lets t see; zero where it sees none. q (B, T, F), k, v (B, S, F)."""
    out = np.zeros(q.shape)
    for b in range(q.shape[0]):
        for t in range(q.shape[1]):
            seen = mask[b, t]
            if seen.any():
                weights = np.exp(k[b, seen])  # (S', F)
                pooled = (weights * v[b, seen]).sum(0) / weights.sum(0)
                out[b, t] = pooled / (1.0 + np.exp(-q[b, t]))
    return out


def layer_reference(layer, query, value, mask):
    """The layer's output from its own weights through :func:`aft_reference`."""
    q, k, v = (a.reshape(a.shape[:2] + (-1,)) for a in project(layer, query, value))
    z = aft_reference(q, k, v, mask)
    return output(layer, z.reshape(z.shape[:2] + (layer.num_heads, -1)))


def assert_equals_the_paper_formula(causal, chunk_size=3, compile_fn=None):
    """Self-attention with padding (and the causal mask) against the float64 definition;
    the call wrapped in ``compile_fn`` (``jax.jit`` on JAX) when given."""
    layer = AFTAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=chunk_size)
    x = sample(B, T, D)
    layer.build(x.shape)  # the weights exist before any tracing

    def call(x):
        return layer(x, padding_mask=PADDING, use_causal_mask=causal)

    got = compile_fn(call)(x) if compile_fn else call(x)
    mask = (CAUSAL[None] if causal else True) & PADDING[:, None, :]
    want = layer_reference(layer, x, None, np.broadcast_to(mask, (B, T, T)))
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


# ---------------------------------------------------------------- harness runs
def test_causal_self_attention_layer():
    run_layer_test(
        AFTAttention,
        {"num_heads": 2, "key_dim": 8, "fused_qkv": True, "chunk_size": 4},
        {"query": sample(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer():
    run_layer_test(
        AFTAttention,
        {"num_heads": 2, "key_dim": 4, "output_dim": 10},
        {"query": sample(B, T, D), "value": sample(B, S, 12), "padding_mask": SOURCE_PADDING},
        expected_output_shape=(B, T, 10),
        allow_untrained_weights=("key/bias",),  # the softmax over positions absorbs it
    )


# ---------------------------------------------------------------- the definition
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_size", [3, 64])  # four chunks (the last one padded); one chunk
def test_equals_the_paper_formula(causal, chunk_size):
    assert get_attention("aft") is AFTAttention
    assert_equals_the_paper_formula(causal, chunk_size)


def test_non_causal_cross_attention_equals_the_paper_formula():
    layer = AFTAttention(num_heads=2, key_dim=4)
    query, value = sample(B, T, D), sample(B, S, 12, seed=1)
    got = layer(query, value, padding_mask=SOURCE_PADDING)
    mask = np.broadcast_to(SOURCE_PADDING[:, None, :], (B, T, S))
    want = layer_reference(layer, query, value, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_large_keys_do_not_overflow(causal):
    # Keys of a few hundred: exp(K) alone overflows float32; the output must stay the float64
    # definition.
    layer = AFTAttention(num_heads=2, key_dim=4, chunk_size=3)
    x = sample(B, T, D)
    layer(x)
    _, k, _ = project(layer, x)
    kernel = np.asarray(layer.key_dense.kernel)
    layer.key_dense.kernel.assign(kernel * 300 / np.abs(k).max())  # |K| up to 300
    got = np.asarray(layer(x, padding_mask=PADDING, use_causal_mask=causal))
    mask = (CAUSAL[None] if causal else True) & PADDING[:, None, :]
    want = layer_reference(layer, x, None, np.broadcast_to(mask, (B, T, T)))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_dynamic_length_in_a_functional_model():
    layer = AFTAttention(num_heads=2, key_dim=8, chunk_size=4)
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
    layer = AFTAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=3)
    check_padding_leak(
        lambda x, m: layer(x, padding_mask=m, use_causal_mask=causal), sample(B, T, D), PADDING
    )


def test_causal_never_leaks():
    layer = AFTAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=3)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), sample(B, T, D))


def test_keras_implicit_mask_is_the_padding_mask():
    ids = np.array([[3, 4, 5, 6, 7], [8, 9, 1, 0, 0]])
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(ids)
    layer = AFTAttention(num_heads=2, key_dim=8, chunk_size=2)
    for causal in (False, True):
        implicit = np.asarray(layer(embedded, use_causal_mask=causal))
        explicit = np.asarray(layer(embedded, padding_mask=ids != 0, use_causal_mask=causal))
        np.testing.assert_allclose(implicit[ids != 0], explicit[ids != 0], atol=1e-6)


def test_unsupported_combinations_are_clear_errors():
    layer = AFTAttention(num_heads=2, key_dim=4)
    x = sample(B, T, D)
    with pytest.raises(ValueError, match=r"AFTAttention .* arbitrary .* `attention_mask`"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="AFTAttention .* has no KV cache"):
        layer.init_cache(B, T)
    with pytest.raises(ValueError, match="AFTAttention .* has no KV cache"):
        layer(x, cache=np.zeros((B, 2, T, 2, 4), "float32"), cache_index=0)
    with pytest.raises(ValueError, match="AFTAttention .* one pooling weight per feature"):
        layer(x, return_attention_scores=True)
    with pytest.raises(ValueError, match="as many queries as keys"):
        layer(x, sample(B, S, D), use_causal_mask=True)
    with pytest.raises(ValueError, match="needs value_dim == key_dim"):
        AFTAttention(num_heads=2, key_dim=4, value_dim=6)
    with pytest.raises(ValueError, match="score='cosine' is not supported"):
        AFTAttention(num_heads=2, key_dim=4, score="cosine")


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_trains():
    encoder_loss_goes_down("aft", {"chunk_size": 4})


def test_decoder_block_with_causal_aft_self_attention():
    block = TransformerDecoderBlock(2, 32, attention="aft", attention_kwargs={"chunk_size": 3})
    x, memory = sample(B, T, D), sample(B, S, D, seed=1)
    out = np.asarray(block(x, memory, encoder_padding_mask=SOURCE_PADDING))
    assert out.shape == (B, T, D) and np.all(np.isfinite(out))
    assert isinstance(block.self_attention_layer, AFTAttention)
    check_causal_leak(lambda y: block(y, memory, encoder_padding_mask=SOURCE_PADDING), x)

    # One fit step moves the self-attention's weights (but the key bias, as above).
    target_in, memory_in = keras.Input((T, D)), keras.Input((S, D))
    model = keras.Model([target_in, memory_in], block(target_in, memory_in))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", run_eagerly=True)
    before = [np.array(w.value) for w in block.self_attention_layer.trainable_weights]
    loss = model.fit([x, memory], x, batch_size=B, epochs=1, verbose=0).history["loss"]
    assert np.isfinite(loss[0]), loss
    after = [np.asarray(w.value) for w in block.self_attention_layer.trainable_weights]
    assert all(not np.array_equal(b, a) for b, a in zip(before, after))
