import doctest

import numpy as np
import pytest

from tests.harness import run_layer_test
from tests.layers import test_local_attention as shared
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
        allowed |= shared.local_pattern(length, stride)
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
    shared.assert_equals_full_attention(layer, causal)


@pytest.mark.filterwarnings("ignore:You are using a softmax")  # the reference at T=1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
@pytest.mark.parametrize("stride", [2, 3, 5])
def test_equals_full_attention_under_the_dense_pattern(stride, pattern, causal):
    # Lengths below, at and between multiples of the stride.
    shared.assert_matches_pattern(
        lambda: StridedAttention(num_heads=2, key_dim=8, stride=stride, pattern=pattern),
        lambda length: strided_pattern(length, stride, pattern),
        lengths=(1, 4, 6, 11, 16),
        causal=causal,
    )


@pytest.mark.parametrize("score", ["cosine", "additive"])
def test_other_score_functions_and_a_separate_value(score):
    shared.assert_matches_pattern(
        lambda: StridedAttention(num_heads=2, key_dim=8, stride=2, pattern="sparse", score=score),
        lambda length: strided_pattern(length, 2, "sparse"),
        lengths=(9,),
        causal=False,
        value_size=12,
    )


def test_unknown_length_in_a_graph():
    layer = StridedAttention(num_heads=2, key_dim=8, stride=3, pattern="sparse")
    shared.assert_dynamic_length_matches(layer, (5, 10))


def test_dropout_only_in_training():
    layer = StridedAttention(num_heads=2, key_dim=4, stride=2, pattern="sparse", dropout=0.5)
    shared.assert_dropout_only_in_training(layer)


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
def test_padding_and_causal_never_leak(pattern):
    layer = StridedAttention(num_heads=2, key_dim=8, stride=2, pattern=pattern, fused_qkv=True)
    shared.assert_masks_never_leak(layer)


def test_unsupported_inputs_are_clear_errors():
    shared.assert_unsupported_inputs_raise(StridedAttention(num_heads=2, key_dim=4, stride=2))
    with pytest.raises(ValueError, match="`stride` must be an integer >= 1"):
        StridedAttention(num_heads=2, key_dim=4, stride=0)
    with pytest.raises(ValueError, match="Unknown strided pattern 'fixed'"):
        StridedAttention(num_heads=2, key_dim=4, pattern="fixed")


# ---------------------------------------------------------------- in the blocks
@pytest.mark.parametrize("pattern", ["strided", "sparse"])
def test_encoder_block_learns(pattern):
    shared.assert_encoder_learns("strided", {"stride": 3, "pattern": pattern})


def test_decoder_block_is_causal():
    shared.assert_decoder_block_is_causal("strided", {"stride": 3, "pattern": "sparse"})


def test_docstring_examples_run():
    result = doctest.testmod(strided_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
