import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import (
    check_cached_decode,
    check_causal_leak,
    check_padding_leak,
    run_layer_test,
)
from zoo.layers import (
    ALiBiAttention,
    ALiBiBias,
    LearnedPositionEmbedding,
    RotaryAttention,
    RotaryEmbedding,
    SinusoidalPositionEncoding,
    alibi_bias,
    alibi_slopes,
    get_attention,
)

RNG = np.random.default_rng(0)
# The weightless layers still go through the harness's fit step, which says so.
NO_WEIGHTS = pytest.mark.filterwarnings("ignore:The model does not have any trainable weights")
B, T, S, D = 2, 5, 7, 16
PADDING = np.array([[1] * T, [1] * 3 + [0] * 2], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- references (NumPy)
def _paper_sinusoid(positions, d, base=10000.0):
    """Vaswani et al. 2017, section 3.5, written out feature by feature."""
    pe = np.zeros((len(positions), d))
    for row, pos in enumerate(positions):
        for i in range((d + 1) // 2):
            pe[row, 2 * i] = math.sin(pos / base ** (2 * i / d))
            if 2 * i + 1 < d:
                pe[row, 2 * i + 1] = math.cos(pos / base ** (2 * i / d))
    return pe


def _paper_rotary(x, positions, base=10000.0):
    """RoFormer eq. (34): x * cos(m theta) + (-x2, x1, -x4, x3, ...) * sin(m theta), on axis 1."""
    d = x.shape[-1]
    theta = base ** (-2.0 * np.arange(d // 2) / d)  # theta_1 .. theta_{d/2}
    out = np.zeros(x.shape)
    for row, m in enumerate(positions):
        cos = np.repeat(np.cos(m * theta), 2)
        sin = np.repeat(np.sin(m * theta), 2)
        xm = x[:, row].astype("float64")
        swapped = np.stack([-xm[..., 1::2], xm[..., 0::2]], axis=-1).reshape(xm.shape)
        out[:, row] = xm * cos + swapped * sin
    return out


def _dense(layer, x):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def _naive_attention(layer, query, value, mask, transform=None, bias=None):
    """Loop over batch, head and query of softmax(q.k / sqrt(H) + bias) v, then the output dense.

    ``transform(x, positions)`` rotates the projected queries/keys along axis 1;
    ``bias[n, t, s]`` is added to the scores.
    """
    n_, h_ = layer.num_heads, layer.key_dim
    q = _dense(layer.query_dense, query).reshape(query.shape[:2] + (n_, h_))
    k = _dense(layer.key_dense, value).reshape(value.shape[:2] + (n_, h_))
    v = _dense(layer.value_dense, value).reshape(value.shape[:2] + (n_, -1))
    if transform is not None:
        q, k = transform(q, range(q.shape[1])), transform(k, range(k.shape[1]))
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    weights = np.zeros((q.shape[0], n_, q.shape[1], k.shape[1]))
    for b in range(q.shape[0]):
        for n in range(n_):
            for t in range(q.shape[1]):
                s = k[b, :, n] @ q[b, t, n] / np.sqrt(h_)
                if bias is not None:
                    s = s + bias[n, t]
                s = np.where(mask[b, t], s, -1e9)
                p = np.exp(s - s.max())
                weights[b, n, t] = p / p.sum()
                out[b, t, n] = weights[b, n, t] @ v[b, :, n]
    return _dense(layer.output_dense, out.reshape(out.shape[:2] + (-1,))), weights


# ---------------------------------------------------------------- sinusoidal
@NO_WEIGHTS
def test_sinusoidal_layer():
    run_layer_test(
        SinusoidalPositionEncoding,
        {"max_wavelength": 10000},
        _x(B, T, 6),
        call_kwargs={"start_index": 3},
        expected_output_shape=(B, T, 6),
    )


@pytest.mark.parametrize("d", [8, 7])
def test_sinusoidal_equals_the_paper_formula(d):
    got = np.asarray(SinusoidalPositionEncoding()(_x(B, 50, d)))
    want = _paper_sinusoid(range(50), d)
    np.testing.assert_allclose(got[0], want, atol=1e-4)
    np.testing.assert_array_equal(got[0], got[1])


def test_sinusoidal_start_index_shifts_positions_under_xla():
    layer = SinusoidalPositionEncoding(max_wavelength=100)
    full = np.asarray(layer(_x(1, 12, 8)))
    np.testing.assert_allclose(full[0], _paper_sinusoid(range(12), 8, base=100.0), atol=1e-5)
    step = tf.function(lambda x, i: layer(x, start_index=i), jit_compile=True)
    for start in (0, 4, 9):
        got = np.asarray(step(_x(1, 3, 8), tf.constant(start)))
        np.testing.assert_allclose(got[0], full[0, start : start + 3], atol=1e-5)


# ---------------------------------------------------------------- learned
def test_learned_layer():
    run_layer_test(
        LearnedPositionEmbedding,
        {"max_length": 9, "initializer": keras.initializers.RandomNormal(stddev=0.5)},
        _x(B, T, 6),
        call_kwargs={"start_index": 2},
        expected_output_shape=(B, T, 6),
    )


def test_learned_slices_the_table_at_start_index():
    layer = LearnedPositionEmbedding(max_length=10)
    full = np.asarray(layer(_x(B, 10, 4)))
    table = np.asarray(layer.embeddings)
    np.testing.assert_array_equal(full[1], table)
    step = tf.function(lambda x, i: layer(x, start_index=i), jit_compile=True)
    got = np.asarray(step(_x(B, 3, 4), tf.constant(6)))
    np.testing.assert_array_equal(got[0], table[6:9])


def test_learned_too_long_is_a_clear_error():
    layer = LearnedPositionEmbedding(max_length=8)
    with pytest.raises(ValueError, match="length 9.*max_length=8"):
        layer(_x(1, 9, 4))
    layer(_x(1, 8, 4))  # exactly max_length is fine
    with pytest.raises(ValueError, match="starting at position 6.*needs 9.*max_length=8"):
        layer(_x(1, 3, 4), start_index=6)


# ---------------------------------------------------------------- rotary
@NO_WEIGHTS
@pytest.mark.parametrize("shape", [(B, T, 3, 8), (B, T, 6)])
def test_rotary_layer(shape):
    run_layer_test(
        RotaryEmbedding,
        {"max_wavelength": 10000},
        _x(*shape),
        call_kwargs={"start_index": 1},
        expected_output_shape=shape,
    )


@pytest.mark.parametrize("shape", [(B, 9, 3, 8), (B, 9, 6)])
def test_rotary_equals_roformer_eq_34(shape):
    x = _x(*shape)
    got = np.asarray(RotaryEmbedding()(x, start_index=4))
    np.testing.assert_allclose(got, _paper_rotary(x, range(4, 13)), atol=1e-5)


def test_rotary_scores_depend_only_on_the_distance():
    q, k = _x(8), _x(8)
    rotary = RotaryEmbedding(max_wavelength=100)
    length = 12
    grams = []
    for start in (0, 7):
        q_rot = np.asarray(rotary(np.tile(q, (1, length, 1)), start_index=start))[0]  # (T, H)
        k_rot = np.asarray(rotary(np.tile(k, (1, length, 1)), start_index=start))[0]
        grams.append(q_rot @ k_rot.T)  # gram[m, n] = <R_m q, R_n k>
    gram = grams[0]
    for distance in range(-length + 1, length):
        diagonal = np.diagonal(gram, offset=distance)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-4, err_msg=f"distance {distance}")
    np.testing.assert_allclose(gram[0, 0], q @ k, atol=1e-5)  # distance 0: no rotation
    np.testing.assert_allclose(grams[1], gram, atol=1e-4)  # a shift of every position
    assert np.ptp(gram[0]) > 1e-2  # but the distance does matter


def test_rotary_odd_size_is_a_clear_error():
    with pytest.raises(ValueError, match="last dimension is 5"):
        RotaryEmbedding()(_x(1, 2, 5))
    with pytest.raises(ValueError, match="key_dim=3 is odd"):
        RotaryAttention(num_heads=2, key_dim=3)


def test_rotary_attention_layer():
    run_layer_test(
        RotaryAttention,
        {"num_heads": 2, "key_dim": 4, "max_wavelength": 500, "fused_qkv": True, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_rotary_attention_equals_its_definition():
    layer = RotaryAttention(num_heads=2, key_dim=4)
    assert get_attention("rotary") is RotaryAttention
    x = _x(B, T, D)
    mask = np.tril(np.ones((T, T), bool))[None] & PADDING[:, None, :]
    got, weights = layer(x, padding_mask=PADDING, use_causal_mask=True, return_attention_scores=True)
    want, want_weights = _naive_attention(layer, x, x, mask, transform=_paper_rotary)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_rotary_attention_padding_and_causal_never_leak():
    layer = RotaryAttention(num_heads=2, key_dim=8, fused_qkv=True)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), PADDING)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_rotary_attention_cached_decode_equals_full_causal_pass():
    check_cached_decode(RotaryAttention(num_heads=2, key_dim=8, fused_qkv=True), _x(B, T, D))


def test_rotary_cross_attention_cache_equals_recomputing_keys():
    layer = RotaryAttention(num_heads=2, key_dim=8)
    query, value = _x(B, T, D), _x(B, S, 12)
    want = layer(query, value)
    got, _ = layer(query, cache=layer.compute_cache(value))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


# ---------------------------------------------------------------- ALiBi
def test_alibi_slopes_follow_the_paper():
    np.testing.assert_allclose(alibi_slopes(8), [1 / 2**i for i in range(1, 9)], rtol=1e-12)
    np.testing.assert_allclose(alibi_slopes(1), [2**-8], rtol=1e-12)
    # Not a power of two: the 4-head slopes, then every other slope of 8 heads.
    np.testing.assert_allclose(alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])
    twelve = [2.0**-i for i in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    np.testing.assert_allclose(alibi_slopes(12), twelve, rtol=1e-12)


@NO_WEIGHTS
def test_alibi_bias_layer():
    run_layer_test(
        ALiBiBias,
        {"num_heads": 4},
        _x(B, 4, T, S),
        call_kwargs={"query_offset": 2},
        expected_output_shape=(B, 4, T, S),
    )


def test_alibi_bias_equals_a_loop_over_heads_and_positions():
    heads, offset = 6, 3
    scores = _x(B, heads, T, S)
    got = np.asarray(ALiBiBias(num_heads=heads)(scores, query_offset=offset))
    slopes = alibi_slopes(heads)
    want = scores.astype("float64").copy()
    for n in range(heads):
        for t in range(T):
            for s in range(S):
                want[:, n, t, s] -= slopes[n] * abs(t + offset - s)
    np.testing.assert_allclose(got, want, atol=1e-5)
    # Causal keys (s <= t) get the paper's -m (t - s) exactly.
    bias = np.asarray(alibi_bias(heads, T, T))
    for t in range(T):
        paper = -np.outer(slopes, t - np.arange(t + 1))  # (N, t + 1)
        np.testing.assert_allclose(bias[0, :, t, : t + 1], paper, atol=1e-6)


def test_alibi_bias_rejects_wrong_head_count():
    with pytest.raises(ValueError, match="num_heads=4.*3 heads"):
        ALiBiBias(num_heads=4)(_x(1, 3, 2, 2))


def test_alibi_attention_layer():
    run_layer_test(
        ALiBiAttention,
        {"num_heads": 4, "key_dim": 4, "fused_qkv": True, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_alibi_attention_equals_its_definition():
    layer = ALiBiAttention(num_heads=4, key_dim=4)
    assert get_attention("alibi") is ALiBiAttention
    x = _x(B, T, D)
    mask = np.tril(np.ones((T, T), bool))[None] & PADDING[:, None, :]
    got, weights = layer(x, padding_mask=PADDING, use_causal_mask=True, return_attention_scores=True)
    bias = -np.asarray(alibi_slopes(4))[:, None, None] * np.abs(np.subtract.outer(range(T), range(T)))
    want, want_weights = _naive_attention(layer, x, x, mask, bias=bias)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_alibi_attention_padding_and_causal_never_leak():
    layer = ALiBiAttention(num_heads=2, key_dim=8, fused_qkv=True)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), PADDING)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_alibi_attention_cached_decode_equals_full_causal_pass():
    check_cached_decode(ALiBiAttention(num_heads=2, key_dim=8, fused_qkv=True), _x(B, T, D))
