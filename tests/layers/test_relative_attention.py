import numpy as np
import pytest

from tests.harness import check_cached_decode, check_causal_leak, check_padding_leak, run_layer_test
from zoo.layers import RelativePositionAttention, get_attention, relative_position_indices

RNG = np.random.default_rng(0)
B, T, S, D = 2, 5, 7, 16
PADDING = np.array([[1] * T, [1] * 3 + [0] * 2], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _dense(layer, x):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def _shaw_loop(layer, query, value, mask):
    """Shaw et al. 2018, eqs. (2)-(5), one head, one query and one key at a time.

    e_ij  = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z)       (4)
    a_ij  = softmax_j(e_ij)                                 (2)
    z_i   = sum_j a_ij (x_j W^V + a^V_ij)                   (3)
    a^K_ij = w^K_clip(j - i, k), a^V_ij = w^V_clip(j - i, k) (5)
    """
    n_, h_, k = layer.num_heads, layer.key_dim, layer.max_relative_position
    w_key = np.asarray(layer.relative_key_embeddings)  # (2k+1, H): w_-k .. w_k
    w_value = np.asarray(layer.relative_value_embeddings)
    q = _dense(layer.query_dense, query).reshape(query.shape[:2] + (n_, h_))
    keys = _dense(layer.key_dense, value).reshape(value.shape[:2] + (n_, h_))
    v = _dense(layer.value_dense, value).reshape(value.shape[:2] + (n_, -1))
    z = np.zeros(q.shape[:3] + (v.shape[-1],))
    weights = np.zeros((q.shape[0], n_, q.shape[1], keys.shape[1]))
    for b in range(q.shape[0]):
        for n in range(n_):
            for i in range(q.shape[1]):
                e = np.zeros(keys.shape[1])
                for j in range(keys.shape[1]):
                    a_key = w_key[max(-k, min(k, j - i)) + k]
                    e[j] = q[b, i, n] @ (keys[b, j, n] + a_key) / np.sqrt(h_)
                e = np.where(mask[b, i], e, -1e9)
                alpha = np.exp(e - e.max())
                alpha /= alpha.sum()
                weights[b, n, i] = alpha
                for j in range(keys.shape[1]):
                    a_value = w_value[max(-k, min(k, j - i)) + k]
                    z[b, i, n] += alpha[j] * (v[b, j, n] + a_value)
    return _dense(layer.output_dense, z.reshape(z.shape[:2] + (-1,))), weights


# ---------------------------------------------------------------- harness runs
def test_self_attention_layer():
    run_layer_test(
        RelativePositionAttention,
        {
            "num_heads": 2,
            "key_dim": 4,
            "max_relative_position": 2,
            "fused_qkv": True,
            "dropout": 0.1,
        },
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_returns_weights():
    run_layer_test(
        RelativePositionAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10, "max_relative_position": 3},
        {"query": _x(B, T, D), "value": _x(B, S, 12)},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, 10), (B, 2, T, S)],
        # Softmax is invariant to a per-query constant, so the key bias gets no gradient.
        allow_untrained_weights=("key/bias",),
    )


# ---------------------------------------------------------------- the definition
def test_indices_clip_the_distance():
    got = np.asarray(relative_position_indices(3, 6, 2, query_offset=1))
    want = [[min(2, max(-2, j - i)) + 2 for j in range(6)] for i in range(1, 4)]
    np.testing.assert_array_equal(got, want)


def test_self_attention_equals_the_paper_loop():
    layer = RelativePositionAttention(num_heads=2, key_dim=4, max_relative_position=2)
    assert get_attention("relative") is RelativePositionAttention
    x = _x(B, T, D)
    layer(x)
    # Random relative embeddings, so that every clipped distance matters.
    layer.relative_key_embeddings.assign(_x(5, 4))
    layer.relative_value_embeddings.assign(_x(5, 4))
    mask = np.tril(np.ones((T, T), bool))[None] & PADDING[:, None, :]
    got, weights = layer(x, padding_mask=PADDING, use_causal_mask=True, return_attention_scores=True)
    want, want_weights = _shaw_loop(layer, x, x, mask)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_cross_attention_with_mask_equals_the_paper_loop():
    layer = RelativePositionAttention(num_heads=3, key_dim=4, value_dim=5, max_relative_position=1)
    query, value = _x(B, T, D), _x(B, S, 12)
    layer(query, value)
    layer.relative_key_embeddings.assign(_x(3, 4))
    layer.relative_value_embeddings.assign(_x(3, 5))
    mask = RNG.random((B, T, S)) > 0.4
    mask[:, :, 0] = True
    got = layer(query, value, attention_mask=mask)
    want, _ = _shaw_loop(layer, query, value, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_unsupported_score_is_a_clear_error():
    with pytest.raises(ValueError, match="score='cosine' is not supported"):
        RelativePositionAttention(num_heads=2, key_dim=4, score="cosine")
    with pytest.raises(ValueError, match="max_relative_position must be >= 1"):
        RelativePositionAttention(num_heads=2, key_dim=4, max_relative_position=0)


def test_dropout_only_in_training():
    layer = RelativePositionAttention(num_heads=2, key_dim=4, max_relative_position=2, dropout=0.5)
    x = _x(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-3


def test_dropout_drops_the_same_weights_from_both_value_terms():
    # Every value is u and every a^V is w, so z_i = (sum_j d_ij) u + (sum_j d'_ij) w, where d
    # and d' are the dropped weights of the two terms of eq. (3). They must be the same.
    layer = RelativePositionAttention(num_heads=1, key_dim=4, max_relative_position=2, dropout=0.5)
    x = _x(1, 12, D)
    layer(x)
    u, w = _x(4), _x(4)
    layer.value_dense.kernel.assign(np.zeros((D, 4), "float32"))
    layer.value_dense.bias.assign(u)
    layer.relative_value_embeddings.assign(np.tile(w, (5, 1)))
    layer.output_dense.kernel.assign(np.eye(4, D, dtype="float32"))
    layer.output_dense.bias.assign(np.zeros(D, "float32"))
    z = np.asarray(layer(x, training=True))[0, :, :4]  # (T, H)
    coefficients = np.linalg.lstsq(np.stack([u, w], 1), z.T, rcond=None)[0]  # (2, T)
    np.testing.assert_allclose(coefficients[0], coefficients[1], atol=1e-4)
    assert np.abs(coefficients[0] - 1).max() > 1e-2  # dropout did drop something


# ---------------------------------------------------------------- masks and the cache
def test_padding_and_causal_never_leak():
    layer = RelativePositionAttention(num_heads=2, key_dim=8, max_relative_position=2, fused_qkv=True)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), PADDING)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_cached_decode_equals_full_causal_pass():
    layer = RelativePositionAttention(num_heads=2, key_dim=8, max_relative_position=2)
    check_cached_decode(layer, _x(B, T, D))