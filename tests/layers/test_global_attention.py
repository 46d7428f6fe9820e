import doctest

import numpy as np
import pytest

from tests.harness import run_layer_test
from tests.layers import test_local_attention as shared
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
    return shared.local_pattern(length, window) | is_global[:, None] | is_global[None, :]


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
    shared.assert_equals_full_attention(layer, causal, PADDING)


@pytest.mark.filterwarnings("ignore:You are using a softmax")  # the reference at T=1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window, num_global", [(0, 1), (1, 2), (3, 1), (2, 4)])
def test_equals_full_attention_under_the_dense_pattern(window, num_global, causal):
    # Lengths below, at and between multiples of the block (the window), and shorter than
    # the global prefix.
    shared.assert_matches_pattern(
        lambda: GlobalAttention(num_heads=2, key_dim=8, window=window, num_global=num_global),
        lambda length: global_pattern(length, window, num_global),
        lengths=(1, 3, 6, 10, 13),
        causal=causal,
    )


@pytest.mark.parametrize("score", ["cosine", "additive"])
def test_other_score_functions_and_a_separate_value(score):
    shared.assert_matches_pattern(
        lambda: GlobalAttention(num_heads=2, key_dim=8, window=1, num_global=2, score=score),
        lambda length: global_pattern(length, 1, 2),
        lengths=(9,),
        causal=False,
        value_size=12,
    )


def global_window_parts(causal, score, step_queries, g=2):
    """Window 3 (blocks of 3) over 12 positions with ``g`` global keys, as
    ``part(q, k, v, scale)``: the loop that joins the global keys to each step's window keys
    in one softmax, and the window and the global keys as two parts merged after."""
    import keras

    from zoo.layers.attention import local as local_module
    from zoo.layers.attention.scaled_dot_product import attention_scores

    valid = np.ones((2, 12), bool)
    valid[1, :1] = valid[1, -3:] = False  # a padded global key and padded keys at the end
    valid[1, 5:8] = False  # and a window with no real key for some queries
    local_valid = valid & (np.arange(12) >= g)

    def looped(q, k, v, scale):
        return local_module.recomputed_window_part(
            q, k, v, local_valid, 3, 3, causal, score=score, scale=scale,
            step_queries=step_queries, num_global=g, global_valid=valid[:, :g])  # fmt: skip

    def merged(q, k, v, scale):
        def score_fn(q, k):
            return attention_scores(q, k, score, scale)

        parts = [local_module.local_window_part(q, k, v, local_valid, 3, 3, causal,
                                                score_fn=score_fn),
                 global_module.global_key_part(q, k, v, valid, g, causal, score_fn=score_fn)]
        lse = keras.ops.logsumexp(keras.ops.stack([lse for _, lse in parts]), axis=0)
        return local_module.merge_parts(parts), lse

    return looped, merged


# Steps of 6 queries: 2 steps; of 9: a padded last step.
@pytest.mark.parametrize("causal, score, step_queries", [
    (False, "scaled_dot", 6), (True, "cosine", 6), (True, "scaled_dot", 9)
])  # fmt: skip
def test_the_global_keys_in_the_window_loop_equal_the_merged_parts(causal, score, step_queries):
    """The training path against the two parts merged: outputs, log-normalisers and every
    gradient (q, k, v and the scale)."""
    looped, merged = global_window_parts(causal, score, step_queries)
    q, k, v, scale, weights = shared.window_inputs(score)
    if score == "scaled_dot":
        scale = None  # the default 1/sqrt(H)
    args = (q, k, v, scale, weights, shared.tf_differentiate)
    shared.assert_same_values_and_gradients(shared.window_part_gradients(looped, *args),
                                            shared.window_part_gradients(merged, *args))


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
    shared.assert_dynamic_length_matches(layer, (5, 9))


def test_dropout_only_in_training():
    layer = GlobalAttention(num_heads=2, key_dim=4, window=1, num_global=1, dropout=0.5)
    shared.assert_dropout_only_in_training(layer)


# ---------------------------------------------------------------- masks and errors
def test_padding_and_causal_never_leak():
    layer = GlobalAttention(num_heads=2, key_dim=8, window=1, num_global=2, fused_qkv=True)
    # Row 1 has a padded global position: it must be neither seen nor a source.
    shared.assert_masks_never_leak(layer, np.array([[1] * T, [0, 1, 1, 1, 1, 1, 0]], bool))


def test_unsupported_inputs_are_clear_errors():
    shared.assert_unsupported_inputs_raise(GlobalAttention(num_heads=2, key_dim=4, window=2))
    with pytest.raises(ValueError, match="`num_global` must be an integer >= 1"):
        GlobalAttention(num_heads=2, key_dim=4, num_global=0)
    with pytest.raises(ValueError, match="`window` must be an integer >= 0"):
        GlobalAttention(num_heads=2, key_dim=4, window=-2)


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_learns():
    shared.assert_encoder_learns("global", {"window": 1, "num_global": 1})


def test_decoder_block_is_causal():
    shared.assert_decoder_block_is_causal("global", {"window": 2, "num_global": 2})


def test_docstring_examples_run():
    result = doctest.testmod(global_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
