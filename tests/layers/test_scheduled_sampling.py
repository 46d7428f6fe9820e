import doctest
import math

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import ScheduledSampling
from zoo.layers import scheduled_sampling as scheduled_sampling_module
from zoo.layers.scheduled_sampling import gold_probability

TARGET_IN = np.array([[2, 7, 8, 9, 0, 0], [2, 5, 0, 0, 0, 0], [2, 4, 6, 8, 10, 12]], "int32")
V = 16
PREDICTED = np.random.default_rng(0).integers(3, V, TARGET_IN.shape)
LOGITS = np.eye(V, dtype="float32")[PREDICTED] * 5  # (B, T, V): argmax is PREDICTED


@pytest.mark.parametrize(
    "schedule, kwargs, definition",
    [
        ("linear", {"k": 1.0, "c": 1e-3, "minimum": 0.2}, lambda i: max(0.2, 1.0 - 1e-3 * i)),
        ("exponential", {"k": 0.999}, lambda i: 0.999**i),
        ("inverse_sigmoid", {"k": 100.0}, lambda i: 100.0 / (100.0 + math.exp(i / 100.0))),
    ],
)
def test_the_schedules_follow_their_definitions(schedule, kwargs, definition):
    steps = [0, 1, 10, 500, 2000]
    for step in steps:
        assert gold_probability(schedule, step, **kwargs) == pytest.approx(definition(step))
    tensor = gold_probability(schedule, keras.ops.convert_to_tensor(steps, "float32"), **kwargs)
    expected = [definition(i) for i in steps]
    np.testing.assert_allclose(np.asarray(tensor), expected, rtol=1e-4)  # float32 powers


def test_gold_probability_one_passes_the_gold_input():
    layer = ScheduledSampling("linear", k=1.0, c=0.0)
    for _ in range(3):
        mixed = layer(TARGET_IN, LOGITS, training=True)
        np.testing.assert_array_equal(np.asarray(mixed), TARGET_IN)


def test_gold_probability_zero_feeds_only_the_predictions_of_the_position_before():
    layer = ScheduledSampling("linear", k=0.0, c=0.0)
    mixed = np.asarray(layer(TARGET_IN, LOGITS, training=True))
    expected = np.concatenate([TARGET_IN[:, :1], PREDICTED[:, :-1]], axis=1)
    expected = np.where(TARGET_IN == 0, 0, expected)  # padding stays padding
    np.testing.assert_array_equal(mixed, expected)
    assert (mixed[:, 0] == 2).all()  # BOS


def test_a_half_probability_mixes_both():
    layer = ScheduledSampling("linear", k=0.5, c=0.0, seed=1)
    ids = np.tile(TARGET_IN[2:], (64, 1))
    logits = np.tile(LOGITS[2:], (64, 1, 1))
    mixed = np.asarray(layer(ids, logits, training=True))[:, 1:]
    gold = mixed == ids[:, 1:]
    assert 0.4 < gold.mean() < 0.6  # the predictions here never equal the gold tokens
    shifted = np.tile(PREDICTED[2:, :-1], (64, 1))
    assert ((mixed == ids[:, 1:]) | (mixed == shifted)).all()


def test_the_step_advances_once_per_training_call_and_not_at_inference():
    layer = ScheduledSampling("exponential", k=0.5)
    layer(TARGET_IN, LOGITS, training=True)
    layer(TARGET_IN, LOGITS, training=True)
    np.testing.assert_array_equal(np.asarray(layer(TARGET_IN, LOGITS)), TARGET_IN)
    assert float(layer.step) == 2.0
    assert float(layer.gold_probability()) == pytest.approx(0.25)


def test_the_layer_contract():
    run_layer_test(
        ScheduledSampling,
        {"schedule": "inverse_sigmoid", "k": 10.0, "seed": 3},
        {"target_in": TARGET_IN, "logits": LOGITS},
        expected_output_shape=TARGET_IN.shape,
        run_training=False,
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"schedule": "cosine"}, "Unknown schedule 'cosine'"),
        ({"schedule": "linear", "minimum": 2}, "minimum"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduledSampling(**kwargs)


def test_docstring_examples_run():
    assert doctest.testmod(scheduled_sampling_module, extraglobs={"keras": keras}).failed == 0
