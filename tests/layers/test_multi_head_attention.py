import keras
import numpy as np
import pytest

from tests.harness import check_cached_decode, check_causal_leak, check_padding_leak, run_layer_test
from zoo.layers import MultiHeadAttention, scaled_dot_product_attention
from zoo.layers.attention.scaled_dot_product import attention_scores

RNG = np.random.default_rng(0)
B, T, S, D = 2, 5, 7, 16


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- harness runs
@pytest.mark.parametrize("score", ["scaled_dot", "dot", "cosine", "additive"])
def test_self_attention_layer(score):
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 4, "key_dim": 4, "score": score, "fused_qkv": True, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": np.array([[1] * T, [1] * 3 + [0] * 2], bool)},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_returns_weights():
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 8, "value_dim": 6, "output_dim": 10},
        {"query": _x(B, T, D), "value": _x(B, S, 12)},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, 10), (B, 2, T, S)],
        # Softmax is invariant to a per-query constant, so the key bias gets no gradient.
        allow_untrained_weights=("key/bias",),
    )


# ---------------------------------------------------------------- references
def test_equals_keras_multi_head_attention():
    reference = keras.layers.MultiHeadAttention(num_heads=4, key_dim=3, value_dim=5)
    query, value = _x(B, T, D), _x(B, S, 12)
    mask = RNG.random((B, T, S)) > 0.3
    want = reference(query, value, attention_mask=mask)
    ours = MultiHeadAttention(num_heads=4, key_dim=3, value_dim=5)
    ours(query, value)
    for mine, theirs in [
        (ours.query_dense, reference._query_dense),
        (ours.key_dense, reference._key_dense),
        (ours.value_dense, reference._value_dense),
    ]:
        mine.set_weights([w.numpy().reshape(mine.kernel.shape if w.ndim == 3 else -1)
                          for w in (theirs.kernel, theirs.bias)])
    out = reference._output_dense
    ours.output_dense.set_weights([out.kernel.numpy().reshape(-1, D), out.bias.numpy()])
    got = ours(query, value, attention_mask=mask)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_fused_qkv_equals_separate_projections():
    x = _x(B, T, D)
    separate = MultiHeadAttention(num_heads=4, key_dim=4)
    fused = MultiHeadAttention(num_heads=4, key_dim=4, fused_qkv=True)
    separate(x), fused(x)
    kernels = [separate.query_dense.kernel, separate.key_dense.kernel, separate.value_dense.kernel]
    biases = [separate.query_dense.bias, separate.key_dense.bias, separate.value_dense.bias]
    fused.qkv_dense.set_weights(
        [np.concatenate([k.numpy() for k in kernels], 1), np.concatenate([b.numpy() for b in biases])]
    )
    fused.output_dense.set_weights(separate.output_dense.get_weights())
    np.testing.assert_allclose(fused(x, use_causal_mask=True), separate(x, use_causal_mask=True), atol=1e-5)


def _naive_attention(q, k, v, mask, score, w=None):
    """Loop over batch, head and query: softmax(score) @ v, written out directly."""
    b_, t_, n_, h_ = q.shape
    out = np.zeros((b_, t_, n_, v.shape[-1]))
    for b in range(b_):
        for n in range(n_):
            for t in range(t_):
                qi, ks = q[b, t, n], k[b, :, n]
                if score == "scaled_dot":
                    s = ks @ qi / np.sqrt(h_)
                elif score == "dot":
                    s = ks @ qi
                elif score == "cosine":
                    s = ks @ qi / (np.linalg.norm(ks, axis=1) * np.linalg.norm(qi))
                else:
                    s = np.tanh(qi[None] + ks) @ w[n]
                s = np.where(mask[b, t], s, -1e9)
                p = np.exp(s - s.max())
                out[b, t, n] = (p / p.sum()) @ v[b, :, n]
    return out


@pytest.mark.parametrize("score", ["scaled_dot", "dot", "cosine", "additive"])
def test_core_equals_naive_loop(score):
    q, k, v = _x(B, T, 3, 4), _x(B, S, 3, 4), _x(B, S, 3, 6)
    mask = RNG.random((B, T, S)) > 0.4
    mask[:, :, 0] = True
    w = _x(3, 4)
    got = scaled_dot_product_attention(q, k, v, mask=mask, score=score, additive_weight=w)
    np.testing.assert_allclose(np.asarray(got), _naive_attention(q, k, v, mask, score, w), atol=1e-5)


def test_core_returns_weights_and_accepts_single_head():
    q, k, v = _x(B, T, 8), _x(B, S, 8), _x(B, S, 8)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.shape == (B, T, 8) and weights.shape == (B, 1, T, S)
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, atol=1e-5)


def test_unknown_score_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown score"):
        MultiHeadAttention(num_heads=2, key_dim=2, score="euclid")
    with pytest.raises(ValueError, match="additive_weight"):
        attention_scores(_x(1, 2, 1, 2), _x(1, 2, 1, 2), score="additive")


def test_fused_qkv_rejects_cross_attention():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, fused_qkv=True)
    with pytest.raises(ValueError, match="fused_qkv"):
        layer(_x(B, T, D), _x(B, S, D))


# ---------------------------------------------------------------- masks
def test_padding_never_leaks():
    layer = MultiHeadAttention(num_heads=2, key_dim=8, fused_qkv=True)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), mask)


def test_keras_implicit_mask_is_honoured():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    inputs = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(inputs)
    embed_model = keras.Model(inputs, embedded)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    x = np.asarray(embed_model(ids))
    with_implicit = layer(embed_model(ids))  # the embedding's output carries the mask
    explicit = layer(x, padding_mask=ids != 0, attention_mask=(ids != 0)[:, :, None] | np.zeros((1, 1, T), bool))
    keep = ids != 0
    np.testing.assert_allclose(np.asarray(with_implicit)[keep], np.asarray(explicit)[keep], atol=1e-5)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), x, keep)


def test_causal_never_leaks():
    layer = MultiHeadAttention(num_heads=2, key_dim=8, fused_qkv=True)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_attention_mask_blocks_exactly_what_it_says():
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    query, value = _x(B, T, D), _x(B, S, D)
    mask = np.ones((B, T, S), bool)
    mask[:, :, 4:] = False
    noisy = value.copy()
    noisy[:, 4:] += 5.0
    np.testing.assert_allclose(
        layer(query, value, attention_mask=mask), layer(query, noisy, attention_mask=mask), atol=1e-5
    )


# ---------------------------------------------------------------- the KV cache
@pytest.mark.parametrize("fused", [True, False])
def test_cached_self_attention_equals_full_causal_pass(fused):
    check_cached_decode(MultiHeadAttention(num_heads=2, key_dim=8, fused_qkv=fused), _x(B, T, D))


def test_cross_attention_cache_equals_recomputing_keys():
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    query, value = _x(B, T, D), _x(B, S, 12)
    padding = np.array([[1] * S, [1] * 4 + [0] * 3], bool)
    want = layer(query, value, padding_mask=padding)
    cache = layer.compute_cache(value)
    assert [tuple(c.shape) for c in cache] == [(B, S, 2, 8)] * 2  # keys, values
    got, same_cache = layer(query, cache=cache, padding_mask=padding)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
    np.testing.assert_array_equal(np.asarray(same_cache), np.asarray(cache))


def test_cache_needs_equal_key_and_value_sizes():
    with pytest.raises(ValueError, match="value_dim == key_dim"):
        MultiHeadAttention(num_heads=2, key_dim=4, value_dim=8).init_cache(1, 4)


def test_initializers_by_name_and_position_aware_query_position_is_checked():
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "kernel_initializer": "he_normal", "use_bias": False},
        _x(B, T, D),
        expected_output_shape=(B, T, D),
        run_mixed_precision=False,
    )
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match="query_position"):
        layer(_x(B, T, D), query_position=3)


def test_the_cache_write_sets_each_example_s_positions_and_nothing_else():
    from zoo.layers.attention.multi_head import write_cache

    rng = np.random.default_rng(0)
    cache = rng.normal(size=(3, 7, 2, 4)).astype("float32")
    new = rng.normal(size=(3, 2, 2, 4)).astype("float32")
    expected = cache.copy()
    expected[:, 4:6] = new  # what ops.slice_update at [0, 4, 0, 0] writes
    keys, values = write_cache((cache, cache + 1), 4, (new, new + 1))
    np.testing.assert_array_equal(np.asarray(keys), expected)
    np.testing.assert_array_equal(np.asarray(values), expected + 1)
