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
from zoo.layers.attention import GlobalAttention, get_attention
from zoo.layers.attention import global_attention as global_module

RNG = np.random.default_rng(2)
B, T, D = 2, 7, 16
PADDING = np.array([[1] * T, [1, 1, 1, 1, 1, 0, 0]], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def global_pattern(length, window, num_global):
    """The dense ``(T, T)`` pattern: the window, plus every pair with a global end."""
    position = np.arange(length)
    is_global = position < num_global
    return local_pattern(length, window) | is_global[:, None] | is_global[None, :]


# ---------------------------------------------------------------- harness runs
def test_layer():
    run_layer_test(
        GlobalAttention,
        {"num_heads": 2, "key_dim": 4, "window": 1, "num_global": 2, "fused_qkv": True},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        expected_output_shape=(B, T, D),
    )


def test_causal_layer_with_dropout():
    run_layer_test(
        GlobalAttention,
        {"num_heads": 2, "key_dim": 4, "output_dim": 10, "window": 2, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, 10),
        allow_untrained_weights=("key/bias",),  # softmax ignores a per-query constant
    )


# ---------------------------------------------------------------- the definition
def test_registered_as_global():
    assert get_attention("global") is GlobalAttention


@pytest.mark.parametrize("causal", [False, True])
def test_window_at_least_the_length_is_full_attention(causal):
    layer = GlobalAttention(num_heads=2, key_dim=8, window=T, num_global=2)
    x = _x(B, T, D)
    got = layer(x, padding_mask=PADDING, use_causal_mask=causal)
    want = full_attention_twin(layer, x)(x, padding_mask=PADDING, use_causal_mask=causal)
    np.testing.assert_allclose(np.asarray(got)[PADDING], np.asarray(want)[PADDING], atol=1e-5)


@pytest.mark.filterwarnings("ignore:You are using a softmax")  # the reference at T=1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window, num_global", [(0, 1), (1, 2), (3, 1), (2, 4)])
def test_equals_full_attention_under_the_dense_pattern(window, num_global, causal):
    # Lengths below, at and between multiples of the block (the window), and shorter than
    # the global prefix.
    assert_matches_pattern(
        lambda: GlobalAttention(num_heads=2, key_dim=8, window=window, num_global=num_global),
        lambda length: global_pattern(length, window, num_global),
        lengths=(1, 3, 6, 10, 13),
        causal=causal,
    )


@pytest.mark.parametrize("score", ["cosine", "additive"])
def test_other_score_functions_and_a_separate_value(score):
    assert_matches_pattern(
        lambda: GlobalAttention(num_heads=2, key_dim=8, window=1, num_global=2, score=score),
        lambda length: global_pattern(length, 1, 2),
        lengths=(9,),
        causal=False,
        value_size=12,
    )


def test_a_global_token_reaches_every_position_and_sees_every_position():
    layer = GlobalAttention(num_heads=2, key_dim=8, window=1, num_global=1)
    x = _x(1, 12, D)
    base = np.asarray(layer(x))
    moved_first, moved_last = x.copy(), x.copy()
    moved_first[:, 0] += 1.0
    moved_last[:, -1] += 1.0
    # Moving the global token moves every output; moving the last token moves its window
    # (positions 10, 11) and the global token, nothing else.
    assert np.all(np.abs(np.asarray(layer(moved_first)) - base).max(-1) > 1e-6)
    changed = np.abs(np.asarray(layer(moved_last)) - base).max(-1)[0] > 1e-6
    np.testing.assert_array_equal(np.flatnonzero(changed), [0, 10, 11])


def test_unknown_length_in_a_graph():
    layer = GlobalAttention(num_heads=2, key_dim=8, window=2, num_global=2)
    assert_dynamic_length_matches(layer, (5, 9))


def test_dropout_only_in_training():
    layer = GlobalAttention(num_heads=2, key_dim=4, window=1, num_global=1, dropout=0.5)
    x = _x(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-3


# ---------------------------------------------------------------- masks and errors
def test_padding_and_causal_never_leak():
    layer = GlobalAttention(num_heads=2, key_dim=8, window=1, num_global=2, fused_qkv=True)
    # Row 1 has a padded global position: it must be neither seen nor a source.
    padding = np.array([[1] * T, [0, 1, 1, 1, 1, 1, 0]], bool)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), padding)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, 11, D))


def test_unsupported_inputs_are_clear_errors():
    layer = GlobalAttention(num_heads=2, key_dim=4, window=2)
    x = _x(B, T, D)
    with pytest.raises(ValueError, match="not an arbitrary"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(x, return_attention_scores=True)
    with pytest.raises(ValueError, match="T=7, S=9"):
        layer(x, _x(B, 9, D))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.init_cache(B, 8)
    with pytest.raises(ValueError, match="`num_global` must be an integer >= 1"):
        GlobalAttention(num_heads=2, key_dim=4, num_global=0)
    with pytest.raises(ValueError, match="`window` must be an integer >= 0"):
        GlobalAttention(num_heads=2, key_dim=4, window=-2)


# ---------------------------------------------------------------- in the blocks, on JAX
def test_encoder_block_learns():
    assert_encoder_learns("global", {"window": 1, "num_global": 1})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("global", {"window": 2, "num_global": 2})


def test_equals_the_dense_pattern_on_jax():
    script = (
        "from tests.layers.test_global_attention import *\n"
        "assert_matches_pattern(\n"
        "    lambda: GlobalAttention(num_heads=2, key_dim=8, window=2, num_global=2),\n"
        "    lambda n: global_pattern(n, 2, 2), lengths=(5, 8), causal=False)\n"
        "print('matches')\n"
    )
    assert "matches" in run_on_jax(script)


def test_docstring_examples_run():
    result = doctest.testmod(global_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
