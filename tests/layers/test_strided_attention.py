import doctest

import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test, run_on_jax
from tests.layers.test_local_attention import (
    assert_decoder_block_is_causal,
    assert_dynamic_length_matches,
    assert_encoder_learns,
    assert_matches_pattern,
    full_attention_twin,
    local_pattern,
)
from zoo.layers.attention import StridedAttention, get_attention
from zoo.layers.attention import strided as strided_module

RNG = np.random.default_rng(1)
B, T, D = 2, 7, 16
PADDING = np.array([[1] * T, [0, 1, 1, 1, 1, 0, 0]], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def strided_pattern(length, stride, pattern):
    """The dense ``(T, T)`` pattern: ``(i - j) mod l == 0``, or that or ``|i - j| <= l``."""
    distance = np.arange(length)[:, None] - np.arange(length)[None]
    allowed = distance % stride == 0
    if pattern == "sparse":
        allowed |= local_pattern(length, stride)
    return allowed


# ---------------------------------------------------------------- harness runs
def test_causal_sparse_layer():
    run_layer_test(
        StridedAttention,
        {"num_heads": 2, "key_dim": 4, "stride": 2, "pattern": "sparse", "fused_qkv": True},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_strided_layer():
    run_layer_test(
        StridedAttention,
        {"num_heads": 2, "key_dim": 4, "output_dim": 10, "stride": 3, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        expected_output_shape=(B, T, 10),
        allow_untrained_weights=("key/bias",),  # softmax ignores a per-query constant
    )


# ---------------------------------------------------------------- the definition
def test_registered_as_strided():
    assert get_attention("strided") is StridedAttention


@pytest.mark.parametrize("pattern", ["strided", "sparse"])
@pytest.mark.parametrize("causal", [False, True])
def test_stride_one_is_full_attention(pattern, causal):
    layer = StridedAttention(num_heads=2, key_dim=8, stride=1, pattern=pattern)
    x = _x(B, T, D)
    got = layer(x, padding_mask=PADDING, use_causal_mask=causal)
    want = full_attention_twin(layer, x)(x, padding_mask=PADDING, use_causal_mask=causal)
    np.testing.assert_allclose(np.asarray(got)[PADDING], np.asarray(want)[PADDING], atol=1e-5)


@pytest.mark.filterwarnings("ignore:You are using a softmax")  # the reference at T=1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
@pytest.mark.parametrize("stride", [2, 3, 5])
def test_equals_full_attention_under_the_dense_pattern(stride, pattern, causal):
    # Lengths below, at and between multiples of the stride.
    assert_matches_pattern(
        lambda: StridedAttention(num_heads=2, key_dim=8, stride=stride, pattern=pattern),
        lambda length: strided_pattern(length, stride, pattern),
        lengths=(1, 4, 6, 11, 16),
        causal=causal,
    )


@pytest.mark.parametrize("score", ["cosine", "additive"])
def test_other_score_functions_and_a_separate_value(score):
    assert_matches_pattern(
        lambda: StridedAttention(num_heads=2, key_dim=8, stride=2, pattern="sparse", score=score),
        lambda length: strided_pattern(length, 2, "sparse"),
        lengths=(9,),
        causal=False,
        value_size=12,
    )


def test_unknown_length_in_a_graph():
    layer = StridedAttention(num_heads=2, key_dim=8, stride=3, pattern="sparse")
    assert_dynamic_length_matches(layer, (5, 10))


def test_dropout_only_in_training():
    layer = StridedAttention(num_heads=2, key_dim=4, stride=2, pattern="sparse", dropout=0.5)
    x = _x(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-3


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
def test_padding_and_causal_never_leak(pattern):
    layer = StridedAttention(num_heads=2, key_dim=8, stride=2, pattern=pattern, fused_qkv=True)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), PADDING)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, 11, D))


def test_unsupported_inputs_are_clear_errors():
    layer = StridedAttention(num_heads=2, key_dim=4, stride=2)
    x = _x(B, T, D)
    with pytest.raises(ValueError, match="not an arbitrary"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(x, return_attention_scores=True)
    with pytest.raises(ValueError, match="T=7, S=4"):
        layer(x, _x(B, 4, D))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.init_cache(B, 8)
    with pytest.raises(ValueError, match="`stride` must be an integer >= 1"):
        StridedAttention(num_heads=2, key_dim=4, stride=0)
    with pytest.raises(ValueError, match="Unknown strided pattern 'fixed'"):
        StridedAttention(num_heads=2, key_dim=4, pattern="fixed")


# ---------------------------------------------------------------- in the blocks, on JAX
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
def test_encoder_block_learns(pattern):
    assert_encoder_learns("strided", {"stride": 3, "pattern": pattern})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("strided", {"stride": 3, "pattern": "sparse"})


def test_equals_the_dense_pattern_on_jax():
    script = (
        "from tests.layers.test_strided_attention import *\n"
        "assert_matches_pattern(\n"
        "    lambda: StridedAttention(num_heads=2, key_dim=8, stride=3, pattern='sparse'),\n"
        "    lambda n: strided_pattern(n, 3, 'sparse'), lengths=(5, 12), causal=True)\n"
        "print('matches')\n"
    )
    assert "matches" in run_on_jax(script)


def test_docstring_examples_run():
    result = doctest.testmod(strided_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
