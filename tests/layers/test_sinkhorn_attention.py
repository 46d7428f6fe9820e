import doctest

import keras
import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test
from tests.layers.test_clustered_attention import assert_unsupported_inputs_raise
from tests.layers.test_local_attention import (
    _eager,
    assert_decoder_block_is_causal,
    assert_dropout_only_in_training,
    assert_dynamic_length_matches,
    assert_encoder_learns,
    tf_differentiate,
)
from zoo.layers import MultiHeadAttention, get_attention
from zoo.layers.attention import sinkhorn as sinkhorn_module
from zoo.layers.attention.sinkhorn import SinkhornAttention, sinkhorn, sorted_block_attention

RNG = np.random.default_rng(0)
B, T, D, BLOCK = 2, 10, 16, 3  # 4 blocks, the last one short
PADDING = np.array([[1] * T, [1] * 5 + [0] * 5], bool)  # the second row: 2 real blocks


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _dense(layer, x):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def _softmax(scores):
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def _reference(layer, x, real, causal, iterations):
    """Sparse Sinkhorn attention one (batch, head) at a time, Sinkhorn by plain divisions."""
    n_, h_, b = layer.num_heads, layer.key_dim, layer.block_size
    padded = -(-x.shape[1] // b) * b
    q, k, v = (
        np.zeros((x.shape[0], padded, n_, h_)) for _ in range(3)
    )
    q[:, : x.shape[1]] = _dense(layer.query_dense, x).reshape(x.shape[:2] + (n_, h_))
    k[:, : x.shape[1]] = _dense(layer.key_dense, x).reshape(x.shape[:2] + (n_, h_))
    v[:, : x.shape[1]] = _dense(layer.value_dense, x).reshape(x.shape[:2] + (n_, h_))
    real = np.pad(real, [(0, 0), (0, padded - x.shape[1])])
    k, v = k * real[..., None, None], v * real[..., None, None]
    blocks = padded // b
    w_q, w_k = np.asarray(layer.sort_query_kernel), np.asarray(layer.sort_key_kernel)
    z = np.zeros(q.shape)
    for batch in range(x.shape[0]):
        r = real[batch].reshape(blocks, b)
        for n in range(n_):
            qb, kb, vb = (a[batch, :, n].reshape(blocks, b, h_) for a in (q, k, v))
            q_mean = np.stack([qb[i][r[i]].mean(0) if r[i].any() else np.zeros(h_) for i in range(blocks)])
            k_mean = np.stack([kb[j][r[j]].mean(0) if r[j].any() else np.zeros(h_) for j in range(blocks)])
            if causal:  # rows: the mean query of the earlier blocks
                q_mean = np.stack([qb[:i][r[:i]].mean(0) if r[:i].any() else np.zeros(h_) for i in range(blocks)])
            logits = np.maximum(q_mean @ w_q[n], 0) @ np.maximum(k_mean @ w_k[n], 0).T
            logits = logits / np.sqrt(w_q.shape[-1]) / layer.temperature
            valid = r.any(1)[:, None] & r.any(1)[None, :]
            if causal:
                valid &= np.tri(blocks, k=-1, dtype=bool)
                s = np.where(valid, np.exp(logits), 0)
                s = s / np.maximum(s.sum(1, keepdims=True), 1e-30)
            else:
                s = np.where(valid, np.exp(logits), 0)
                for _ in range(iterations):
                    s = s / np.maximum(s.sum(1, keepdims=True), 1e-30)
                    s = s / np.maximum(s.sum(0, keepdims=True), 1e-30)
            for i in range(blocks):
                keys = np.concatenate([np.einsum("j,jph->ph", s[i], kb), kb[i]])  # (2b, H)
                values = np.concatenate([np.einsum("j,jph->ph", s[i], vb), vb[i]])
                sorted_real = (s[i] @ r) > 0
                for p in np.flatnonzero(r[i]):  # the real queries
                    local = r[i] & (np.arange(b) <= p if causal else True)
                    allowed = np.concatenate([sorted_real, local])
                    scores = np.where(allowed, keys @ qb[i, p] / np.sqrt(h_), -np.inf)
                    z[batch, i * b + p, n] = _softmax(scores) @ values
    z = z[:, : x.shape[1]].reshape(x.shape[:2] + (-1,))
    return _dense(layer.output_dense, z)


def _copy_to_full_attention(layer):
    full = MultiHeadAttention(num_heads=layer.num_heads, key_dim=layer.key_dim)
    full(np.zeros((1, 2, D), "float32"))
    full.set_weights([w.numpy() for w in layer.weights if "sort_" not in w.path])
    return full


# ---------------------------------------------------------------- harness runs
def test_causal_layer_with_padding():
    run_layer_test(
        SinkhornAttention,
        {"num_heads": 2, "key_dim": 4, "block_size": BLOCK, "fused_qkv": True, "dropout": 0.1,
         "temperature": 0.5, "sinkhorn_iterations": 4, "sort_dim": 6},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_layer_without_masks():
    run_layer_test(
        SinkhornAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10, "block_size": 4,
         "score": "dot", "gumbel_noise": False},
        _x(B, T, D),
        expected_output_shape=(B, T, 10),
    )


# ---------------------------------------------------------------- Sinkhorn normalization
def test_sinkhorn_gives_doubly_stochastic_matrices():
    matrix = np.asarray(sinkhorn(_x(3, 6, 6) * 2, iterations=40))
    np.testing.assert_allclose(matrix.sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(matrix.sum(-2), 1.0, atol=1e-5)
    assert (matrix > 0).all()


def test_sinkhorn_on_the_valid_square_only():
    real = np.array([1, 1, 0, 1, 0], bool)
    valid = real[:, None] & real[None, :]
    matrix = np.asarray(sinkhorn(_x(2, 5, 5), iterations=40, valid=valid))
    np.testing.assert_array_equal(matrix[:, ~valid], 0.0)
    np.testing.assert_allclose(matrix.sum(-1)[:, real], 1.0, atol=1e-4)
    np.testing.assert_allclose(matrix.sum(-2)[:, real], 1.0, atol=1e-5)


def test_low_temperature_gives_the_permutation():
    permutation = np.eye(5, dtype="float32")[[3, 0, 4, 1, 2]]
    logits = (permutation + 0.1 * _x(5, 5)) / 0.05
    np.testing.assert_allclose(np.asarray(sinkhorn(logits, iterations=20)), permutation, atol=1e-3)


def test_the_layer_sorting_matrix_is_doubly_stochastic_over_real_blocks():
    layer = SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK, sinkhorn_iterations=50)
    x = _x(B, 12, D)
    layer(x)
    real = np.ones((B, 12), bool)
    real[1, 7:] = False  # blocks 0-2 of the second row are real, block 3 is all padding
    q = np.asarray(layer.query_dense(x)).reshape(B, 12, 2, 4)
    k = np.asarray(layer.key_dense(x)).reshape(B, 12, 2, 4)
    matrix = np.asarray(layer.sorting_matrix(q, k, real))  # (B, N, 4, 4)
    np.testing.assert_allclose(matrix[0].sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(matrix[0].sum(-2), 1.0, atol=1e-5)
    np.testing.assert_allclose(matrix[1, :, :3].sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(matrix[1, :, :, :3].sum(-2), 1.0, atol=1e-5)
    np.testing.assert_array_equal(matrix[1, :, 3], 0.0)
    np.testing.assert_array_equal(matrix[1, :, :, 3], 0.0)
    causal = np.asarray(layer.sorting_matrix(q, k, real, causal=True))
    np.testing.assert_array_equal(np.triu(causal), 0.0)  # only earlier blocks
    np.testing.assert_allclose(causal[0, :, 1:].sum(-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------- the definition
@pytest.mark.parametrize("causal", [False, True])
def test_equals_the_slow_reference(causal):
    assert get_attention("sinkhorn") is SinkhornAttention
    assert_equals_the_slow_reference(causal)


def assert_equals_the_slow_reference(causal, call=_eager):
    """The layer equals :func:`_reference` at the real positions. ``call(layer, *inputs,
    **kwargs)`` runs it (the JAX checks pass ``harness.jit_call``)."""
    layer = SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK, sinkhorn_iterations=5)
    x = _x(B, T, D)
    got = np.asarray(call(layer, x, padding_mask=PADDING, use_causal_mask=causal))
    want = _reference(layer, x, PADDING, causal, iterations=5)
    np.testing.assert_allclose(got[PADDING], want[PADDING], atol=1e-5)


def dense_sorted_block_attention(q, k, v, sort, sorted_real, local_mask):
    """The sorted blocks made whole, then one softmax over them and the own blocks."""
    ops = keras.ops
    keys = ops.concatenate([ops.einsum("bnij,bnjph->bniph", sort, k), k], axis=3)
    values = ops.concatenate([ops.einsum("bnij,bnjph->bniph", sort, v), v], axis=3)
    scores = ops.einsum("bniph,bnirh->bnipr", q, keys)  # (B, N, n, b, 2b)
    shape = ops.shape(scores)[:-1] + (ops.shape(k)[3],)
    allowed = ops.concatenate([ops.broadcast_to(sorted_real[..., None, :], shape),
                               ops.broadcast_to(local_mask, shape)], axis=-1)  # fmt: skip
    scores = ops.where(allowed, scores, -1e9)
    lse = ops.logsumexp(scores, axis=-1)
    return ops.einsum("bnipr,bnirh->bniph", ops.exp(scores - lse[..., None]), values), lse


def sorted_block_inputs(causal):
    """q, k, v, S, the masks and loss weights: 5 blocks of 3, the second sentence's last two
    blocks padding; S has a row and a column of zeros (the first block sorts from nothing,
    as under the causal mask)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, 2, 5, 3, 4)).astype("float32") for _ in range(3))
    sort = rng.uniform(size=(2, 2, 5, 5)).astype("float32")
    sort[:, :, 0] = sort[:, :, :, 4] = 0.0
    real = np.ones((2, 5, 3), "float32")
    real[1, 3:] = 0.0
    sorted_real = np.einsum("bnij,bjp->bnip", sort, real) > 0
    local_mask = real[:, None, :, None, :] > 0  # (B, 1, n, 1, b)
    if causal:
        local_mask = local_mask & np.tril(np.ones((3, 3), bool))
    return q, k, v, sort, sorted_real, local_mask, rng.normal(size=(2, 2, 5, 3)).astype("float32")


def sorted_block_gradients(attend, inputs, differentiate):
    """``out``, ``lse`` and the gradients of ``sum(out cos(out)) + sum(lse w)`` for q, k, v
    and S, over the queries with a key to attend (the others are zeroed)."""
    q, k, v, sort, sorted_real, local_mask, weights = inputs

    def loss(q, k, v, sort):
        out, lse = attend(q, k, v, sort, sorted_real, local_mask)
        seen = lse > -1e8
        out = keras.ops.where(seen[..., None], out, 0.0)
        lse = keras.ops.where(seen, lse, 0.0)
        return keras.ops.sum(out * keras.ops.cos(out)) + keras.ops.sum(lse * weights), (out, lse)

    return differentiate(loss, (q, k, v, sort))


def assert_sorted_blocks_match(got, want):
    (got_out, got_lse), got_grads = got
    (want_out, want_lse), want_grads = want
    np.testing.assert_allclose(np.asarray(got_out), np.asarray(want_out), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_lse), np.asarray(want_lse), atol=1e-4, rtol=1e-5)
    for name, a, b in zip(["q", "k", "v", "S"], got_grads, want_grads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-4, rtol=1e-5,
                                   err_msg=f"d {name}")  # fmt: skip


# Steps of 6 queries: 2 blocks a step, a masked block added to make 3 steps; of 100: 1 step.
@pytest.mark.parametrize("causal, step_queries", [(False, 6), (True, 6), (True, 100)])
def test_the_recomputed_sorted_blocks_equal_the_whole_ones_in_values_and_gradients(
    causal, step_queries
):
    """The O(T) training path, which makes each step's sorted blocks inside the loop, against
    the sorted blocks made whole: outputs, log-normalisers and the gradients of q, k, v and S."""
    inputs = sorted_block_inputs(causal)

    def looped(*args):
        return sorted_block_attention(*args, step_queries=step_queries)

    assert_sorted_blocks_match(sorted_block_gradients(looped, inputs, tf_differentiate),
                               sorted_block_gradients(dense_sorted_block_attention, inputs,
                                                      tf_differentiate))  # fmt: skip


def test_identity_permutation_is_block_local_attention():
    layer = SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK)
    x = _x(B, T, D)
    layer(x)
    blocks = -(-T // BLOCK)
    layer.sorting_matrix = lambda q, k, real, causal=False, training=None: np.broadcast_to(
        np.eye(blocks, dtype="float32"), (B, 2, blocks, blocks)
    )
    block_of = np.arange(T) // BLOCK
    mask = (block_of[:, None] == block_of[None, :])[None] & PADDING[:, None, :]
    want = np.asarray(_copy_to_full_attention(layer)(x, attention_mask=mask))
    got = np.asarray(layer(x, padding_mask=PADDING))
    np.testing.assert_allclose(got[PADDING], want[PADDING], atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_one_block_is_full_attention(causal):
    layer = SinkhornAttention(num_heads=2, key_dim=4, block_size=16)
    x = _x(B, T, D)
    layer(x)
    want = np.asarray(_copy_to_full_attention(layer)(x, padding_mask=PADDING, use_causal_mask=causal))
    got = np.asarray(layer(x, padding_mask=PADDING, use_causal_mask=causal))
    np.testing.assert_allclose(got[PADDING], want[PADDING], atol=1e-5)


def test_gumbel_noise_only_in_training():
    layer = SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK)
    x = _x(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-4


def test_dropout_only_in_training():
    assert_dropout_only_in_training(SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK, gumbel_noise=False, dropout=0.5))


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("fused", [False, True])
def test_padding_and_causal_never_leak(fused):
    layer = SinkhornAttention(num_heads=2, key_dim=8, block_size=BLOCK, fused_qkv=fused)
    for causal in (False, True):
        check_padding_leak(
            lambda x, m: layer(x, padding_mask=m, use_causal_mask=causal), _x(B, T, D), PADDING
        )
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_clear_errors():
    assert_unsupported_inputs_raise(SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK))
    with pytest.raises(ValueError, match="uses dot-product scores; score='additive'"):
        SinkhornAttention(num_heads=2, key_dim=4, score="additive")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SinkhornAttention(num_heads=2, key_dim=4, temperature=0.0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SinkhornAttention(num_heads=2, key_dim=4, temperature=0.0)


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_learns():
    assert_encoder_learns("sinkhorn", {"block_size": 4})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("sinkhorn", {"block_size": BLOCK})


def test_unknown_length_in_a_graph():
    assert_dynamic_length_matches(SinkhornAttention(num_heads=2, key_dim=4, block_size=BLOCK), (5, 9))


def test_docstring_examples_run():
    result = doctest.testmod(sinkhorn_module)
    assert result.attempted > 0 and result.failed == 0
