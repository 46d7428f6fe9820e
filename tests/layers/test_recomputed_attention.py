"""The recomputing attention loop of the blocked variants against dense softmax attention."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.layers.attention.recomputed import grouped_attention, scaled_for_dot_products

RNG = np.random.default_rng(0)


def dense_grouped_attention(q, k, v, mask):
    """The definition: each block's softmax over its keys, whole, with its log-normaliser."""
    def joined(x, axis):  # the parts' keys (axis -2) or masks (axis -1), joined
        return keras.ops.concatenate(list(x), axis=axis) if isinstance(x, tuple) else x

    k, v, mask = joined(k, -2), joined(v, -2), joined(mask, -1)
    scores = keras.ops.einsum("bngqh,bngkh->bngqk", q, k)
    scores = keras.ops.where(mask, scores, -1e9)
    lse = keras.ops.logsumexp(scores, axis=-1)
    weights = keras.ops.exp(scores - lse[..., None])
    return keras.ops.einsum("bngqk,bngkh->bngqh", weights, v), lse


def _inputs(blocks, parts):
    """q (2, 2, G, 3, 4) and the keys of each block in ``parts`` parts of 2 and 3 keys."""
    sizes = (2, 3)[:parts] if parts > 1 else (5,)
    q = RNG.normal(size=(2, 2, blocks, 3, 4)).astype("float32")
    k = tuple(RNG.normal(size=(2, 2, blocks, size, 4)).astype("float32") for size in sizes)
    v = tuple(RNG.normal(size=(2, 2, blocks, size, 6)).astype("float32") for size in sizes)
    mask = tuple(RNG.random((2, 1, blocks, 3, size)) > 0.3 for size in sizes)
    mask[0][0, 0, 0, 1] = True  # every query keeps a key: the rows with none are meaningless
    return q, k, v, mask


def _values_and_gradients(attend, q, k, v, mask, weights):
    arguments = [tf.convert_to_tensor(x) for x in (q, *k, *v)]
    with tf.GradientTape() as tape:
        tape.watch(arguments)
        parts = len(k)
        k_, v_ = tuple(arguments[1:1 + parts]), tuple(arguments[1 + parts:])
        if parts == 1:
            k_, v_, mask = k_[0], v_[0], mask[0]
        out, lse = attend(arguments[0], k_, v_, mask)
        loss = tf.reduce_sum(out * tf.cos(out)) + tf.reduce_sum(lse * weights)
    return [out, lse] + tape.gradient(loss, arguments)


# Steps of 3 queries: one block a step; of 6: two, the last step padded; of 100: all.
@pytest.mark.parametrize("parts, step_queries", [(1, 6), (2, 3), (2, 6), (1, 100)])
def test_grouped_attention_equals_the_dense_softmax_in_values_and_gradients(parts, step_queries):
    q, k, v, mask = _inputs(5, parts)
    mask = tuple(np.logical_or(m, np.eye(3, m.shape[-1], dtype=bool)) for m in mask)
    weights = RNG.normal(size=(2, 2, 5, 3)).astype("float32")
    got = _values_and_gradients(
        lambda *a: grouped_attention(*a, step_queries=step_queries), q, k, v, mask, weights)
    want = _values_and_gradients(dense_grouped_attention, q, k, v, mask, weights)
    names = ["out", "lse", "d q"] + [f"d k{i}" for i in range(parts)] + [
        f"d v{i}" for i in range(parts)]  # fmt: skip
    for name, a, b in zip(names, got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5,
                                   err_msg=name)  # fmt: skip


def test_under_xla_with_an_unknown_number_of_blocks():
    q, k, v, mask = _inputs(5, 1)
    mask = np.logical_or(mask[0], np.eye(3, 5, dtype=bool))

    def values_and_gradients(q, k, v, mask):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out, lse = grouped_attention(q, k, v, mask, step_queries=6)
            loss = tf.reduce_sum(out * tf.cos(out)) + tf.reduce_sum(lse)
        return [out, lse] + tape.gradient(loss, [q, k, v])

    spec = [tf.TensorSpec((2, 2, None, 3, 4)), tf.TensorSpec((2, 2, None, 5, 4)),
            tf.TensorSpec((2, 2, None, 5, 6)), tf.TensorSpec((2, 1, None, 3, 5), tf.bool)]
    compiled = tf.function(values_and_gradients, jit_compile=True, input_signature=spec)
    for blocks in (5, 2):
        args = [tf.constant(x[:, :, :blocks]) for x in (q, k[0], v[0], mask)]
        for got, want in zip(compiled(*args), values_and_gradients(*args)):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_the_scores_must_be_dot_products():
    x = np.ones((1, 2, 1, 4), "float32")
    q, _, _ = scaled_for_dot_products(x, x, x, "cosine", np.full((1, 1, 1), 3.0, "float32"))
    np.testing.assert_allclose(np.asarray(q), np.full((1, 2, 1, 4), 1.5), rtol=1e-6)
    with pytest.raises(ValueError, match="dot-product score"):
        scaled_for_dot_products(x, x, x, "additive")
