"""Location-aware and monotonic cross attention: the layer harness, and each against a slow,
obviously correct reference (the two-pass location features against a step-by-step loop; the
expected alignment against its recurrence written out in NumPy; hard attention never going
back)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.harness import run_layer_test
from zoo.layers.attention import (
    LocationAwareAttention,
    MonotonicAttention,
    hard_monotonic_alignment,
    monotonic_alignment,
)

RNG = np.random.default_rng(0)
B, T, S, D = 2, 5, 7, 16
PADDING = np.array([[1] * S, [1] * 4 + [0] * 3], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- harness runs
def test_location_aware_attention_passes_the_harness():
    weights = RNG.dirichlet(np.ones(S), size=(B, T)).astype("float32")
    state = np.cumsum(weights, axis=1) - weights
    run_layer_test(
        LocationAwareAttention,
        {"num_heads": 2, "key_dim": 8, "location_filters": 4, "location_kernel": 3},
        {"query": _x(B, T, D), "value": _x(B, S, D), "padding_mask": PADDING, "state": state},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, D), (B, 2, T, S)],
        allow_untrained_weights=("key/bias", "location_dense/bias"),
    )


def test_monotonic_attention_passes_the_harness():
    run_layer_test(
        MonotonicAttention,
        {"num_heads": 2, "key_dim": 8, "energy_noise": 0.0},
        {"query": _x(B, T, D), "value": _x(B, S, D), "padding_mask": PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, D), (B, 2, T, S)],
    )


# ---------------------------------------------------------------- location-aware
def test_location_features_of_a_whole_target_equal_a_step_by_step_loop():
    """The parallel form (the state of every query from a pass's weights, one call) gives what
    decoding gives one query at a time, its state summed step by step."""
    layer = LocationAwareAttention(num_heads=2, key_dim=8, location_kernel=3)
    query, memory = _x(B, T, D), _x(B, S, D)
    _, first = layer(query, memory, padding_mask=PADDING, return_attention_scores=True)
    whole, _ = layer(query, memory, padding_mask=PADDING, state=layer.sequence_state(first),
                     return_attention_scores=True)  # fmt: skip
    state = layer.initial_state(B, S)
    for t in range(T):
        step = layer(query[:, t : t + 1], memory, padding_mask=PADDING, state=state)
        np.testing.assert_allclose(step[:, 0], whole[:, t], atol=1e-5)
        state = layer.next_state(state, first[:, :, t : t + 1])
    # The loop's state after T steps is the sum of every step's weights (the mean over heads).
    np.testing.assert_allclose(state, np.asarray(first).mean(1).sum(1), atol=1e-5)


def test_the_location_state_moves_the_attention():
    layer = LocationAwareAttention(num_heads=2, key_dim=8)
    query, memory = _x(B, 1, D), _x(B, S, D)
    _, plain = layer(query, memory, return_attention_scores=True)
    state = np.zeros((B, S), "float32")
    state[:, :3] = 1.0  # the first three positions already read
    _, moved = layer(query, memory, state=state, return_attention_scores=True)
    assert not np.allclose(plain, moved, atol=1e-4)
    with pytest.raises(ValueError, match="location_kernel must be a positive odd int"):
        LocationAwareAttention(num_heads=2, key_dim=8, location_kernel=4)


# ---------------------------------------------------------------- monotonic
def expected_alignment_by_recurrence(p):
    """Raffel et al. 2017, eq. (9)-(10), written out: one query at a time, one source position
    at a time. ``p`` is ``(T, S)``."""
    steps, positions = p.shape
    alpha = np.zeros((steps, positions))
    previous = np.eye(positions)[0]
    for t in range(steps):
        q = 0.0
        for j in range(positions):
            q = (1 - p[t, j - 1]) * q + previous[j] if j else previous[0]
            alpha[t, j] = p[t, j] * q
        previous = alpha[t]
    return alpha


def test_the_expected_alignment_is_its_recurrence():
    p = RNG.uniform(0.05, 0.95, size=(B, 2, T, S)).astype("float32")
    p[1, :, :, 4:] = 0.0  # padding never stops
    got = np.asarray(monotonic_alignment(p))
    for b in range(B):
        for n in range(2):
            np.testing.assert_allclose(got[b, n], expected_alignment_by_recurrence(p[b, n]),
                                       atol=1e-5)  # fmt: skip
    assert (got.sum(-1) <= 1 + 1e-5).all() and (got[1, :, :, 4:] == 0).all()


def test_the_expected_alignment_has_a_gradient_under_xla():
    import tensorflow as tf

    layer = MonotonicAttention(num_heads=2, key_dim=8)
    query, memory = tf.constant(_x(B, T, D)), tf.constant(_x(B, S, D))
    layer(query, memory)

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None, None, D])] * 2)
    def gradient(query, memory):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(query, memory, training=True) ** 2)
        return tape.gradient(loss, layer.trainable_variables)

    grads = gradient(query, memory)
    assert all(g is not None and np.isfinite(np.asarray(g)).all() for g in grads)
    assert np.abs(np.asarray(grads[-1])).sum() > 0  # the energy bias learns


def test_hard_attention_never_goes_back():
    layer = MonotonicAttention(num_heads=4, key_dim=4, initial_bias=0.0)
    memory = _x(B, S, D)
    state, positions = layer.initial_state(B, S), []
    for _ in range(12):
        _, weights = layer(_x(B, 1, D), memory, padding_mask=PADDING, state=state,
                           return_attention_scores=True)  # fmt: skip
        weights = np.asarray(weights)
        assert set(np.unique(weights)) <= {0.0, 1.0} and (weights.sum(-1) <= 1).all()
        assert not weights[1, ..., 4:].any()  # never the padding
        state = layer.next_state(state, weights)
        positions.append(np.asarray(state))
    positions = np.stack(positions)  # (steps, B, N)
    assert (np.diff(positions, axis=0) >= 0).all() and positions.max() > 0


def test_hard_attention_takes_the_first_stop_from_where_it_was():
    p = np.array([[[[0.9, 0.2, 0.6, 0.9]], [[0.1, 0.1, 0.1, 0.4]]]], "float32")  # (1, 2, 1, 4)
    got = np.asarray(hard_monotonic_alignment(p, np.array([[1, 0]])))
    np.testing.assert_array_equal(got[0, :, 0], [[0, 0, 1, 0], [0, 0, 0, 0]])
    layer = MonotonicAttention(num_heads=2, key_dim=4)
    state = layer.next_state(ops.convert_to_tensor([[1, 0]], "int32"), got)
    assert np.asarray(state).tolist() == [[2, 0]]  # head 1 attended nowhere: it stays


def test_noise_only_in_training():
    keras.utils.set_random_seed(0)
    layer = MonotonicAttention(num_heads=2, key_dim=8, energy_noise=1.0)
    query, memory = _x(B, T, D), _x(B, S, D)
    np.testing.assert_allclose(layer(query, memory), layer(query, memory), atol=1e-6)
    assert not np.allclose(layer(query, memory, training=True), layer(query, memory), atol=1e-4)
