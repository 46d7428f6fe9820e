"""Chunked attention is full attention: the same values and gradients, in less memory."""

import doctest

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import check_cached_decode, run_layer_test
from tests.layers.test_local_attention import (
    assert_decoder_block_is_causal,
    assert_encoder_learns,
    assert_masks_never_leak,
    assert_xla_matches_eager_at_unknown_lengths,
    full_attention_twin,
)
from zoo.layers.attention import ChunkedAttention, get_attention
from zoo.layers.attention import chunked as chunked_module

RNG = np.random.default_rng(0)
B, T, S, D = 2, 7, 9, 16
PADDING = np.array([[1] * S, [0, 1, 1, 1, 1, 1, 1, 0, 0]], bool)  # keys padded at both ends
QUERIES = np.array([[1] * T, [1, 1, 1, 1, 1, 0, 0]], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _values_and_gradients(layer, inputs, **kwargs):
    """The output and the gradients of ``sum(y * g)`` for the inputs and every weight."""
    inputs = [tf.convert_to_tensor(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = layer(*inputs, **kwargs)
        loss = tf.reduce_sum(y * tf.cos(y))
    gradients = tape.gradient(loss, inputs + layer.trainable_weights)
    return [np.asarray(y)] + [np.asarray(g) for g in gradients]


def _assert_equals_full_attention(layer, inputs, keep=None, twin=None, **kwargs):
    """Values and gradients equal those of ``MultiHeadAttention`` with the same weights (its
    ``twin``, made here unless given); returns the twin."""
    if twin is None:
        layer(*inputs)  # builds it
        twin = full_attention_twin(layer, *inputs)
    got = _values_and_gradients(layer, inputs, **kwargs)
    want = _values_and_gradients(twin, inputs, **kwargs)
    names = ["output"] + [f"d input {i}" for i in range(len(inputs))] + [
        w.path for w in layer.trainable_weights]  # fmt: skip
    for name, a, b in zip(names, got, want):
        if name == "output" and keep is not None:
            a, b = a[keep], b[keep]
        # 1e-5 of the largest entry: a weight's gradient sums over every position, so its
        # rounding grows with its size.
        np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, np.abs(b).max()), rtol=1e-5,
                                   err_msg=name)
    return twin


# ---------------------------------------------------------------- harness runs
def test_causal_self_attention_layer():
    run_layer_test(
        ChunkedAttention,
        {"num_heads": 2, "key_dim": 4, "fused_qkv": True, "chunk_size": 3},
        {"query": _x(B, T, D), "padding_mask": QUERIES},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_over_a_longer_value():
    run_layer_test(
        ChunkedAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10, "chunk_size": 4},
        {"query": _x(B, T, D), "value": _x(B, S, 12), "padding_mask": PADDING},
        expected_output_shape=(B, T, 10),
        allow_untrained_weights=("key/bias",),  # softmax is invariant to a per-query constant
    )


def test_registered_as_chunked():
    assert get_attention("chunked") is ChunkedAttention


# ---------------------------------------------------------------- the definition
@pytest.mark.parametrize("chunk_size", [1, 4, S, S + 5])
@pytest.mark.parametrize("score", ["scaled_dot", "dot", "cosine"])
def test_values_and_gradients_equal_full_attention_with_every_mask(score, chunk_size):
    layer = ChunkedAttention(num_heads=2, key_dim=8, value_dim=5, score=score,
                             chunk_size=chunk_size)  # fmt: skip
    query, value = _x(B, T, D), _x(B, S, 12)
    pattern = RNG.random((B, T, S)) > 0.3
    pattern[0, 2] = False  # a query row with no key: full attention spreads it evenly
    twin = _assert_equals_full_attention(layer, [query, value], padding_mask=PADDING,
                                         attention_mask=pattern)  # fmt: skip
    _assert_equals_full_attention(layer, [query, value], twin=twin, padding_mask=PADDING)


@pytest.mark.parametrize("chunk_size", [2, 3, T])
def test_causal_self_attention_with_padded_queries_equals_full_attention(chunk_size):
    layer = ChunkedAttention(num_heads=2, key_dim=8, fused_qkv=True, chunk_size=chunk_size)
    x = keras.layers.Masking()(np.where(QUERIES[..., None], _x(B, T, D), 0.0))  # implicit mask
    _assert_equals_full_attention(layer, [np.asarray(x)], use_causal_mask=True,
                                  padding_mask=QUERIES)  # fmt: skip


def test_an_unknown_length_under_xla_gives_the_eager_values_and_gradients():
    # One chunk and a filled last chunk; three chunks and a filled one.
    assert_xla_matches_eager_at_unknown_lengths(
        ChunkedAttention(num_heads=2, key_dim=8, chunk_size=4), (5, 9), use_causal_mask=True
    )


def test_cached_decoding_equals_the_full_causal_pass():
    check_cached_decode(ChunkedAttention(num_heads=2, key_dim=8, chunk_size=3), _x(B, 6, D))


def test_padding_and_causal_never_leak():
    assert_masks_never_leak(ChunkedAttention(num_heads=2, key_dim=8, fused_qkv=True,
                                             chunk_size=3), padding=QUERIES)  # fmt: skip


def test_what_it_cannot_do_is_a_clear_error():
    with pytest.raises(ValueError, match="no attention dropout"):
        ChunkedAttention(num_heads=2, key_dim=4, dropout=0.1)
    with pytest.raises(ValueError, match="additive"):
        ChunkedAttention(num_heads=2, key_dim=4, score="additive")
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        ChunkedAttention(num_heads=2, key_dim=4, chunk_size=0)
    with pytest.raises(ValueError, match="cannot return them"):
        ChunkedAttention(num_heads=2, key_dim=4)(_x(B, T, D), return_attention_scores=True)


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_learns():
    assert_encoder_learns("chunked", {"chunk_size": 5})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("chunked", {"chunk_size": 4})


def test_docstring_examples_run():
    result = doctest.testmod(chunked_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
