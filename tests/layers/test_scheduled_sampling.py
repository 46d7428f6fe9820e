import doctest
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.harness import REPO_ROOT, run_layer_test
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


def test_a_prediction_is_never_the_padding_id():
    """A 0 would mask a real position in the second pass: the argmax skips it."""
    logits = LOGITS.copy()
    logits[..., 0] = 10.0  # the padding id wins every argmax over the whole vocabulary
    mixed = np.asarray(ScheduledSampling("linear", k=0.0, c=0.0)(TARGET_IN, logits, training=True))
    expected = np.concatenate([TARGET_IN[:, :1], PREDICTED[:, :-1]], axis=1)
    np.testing.assert_array_equal(mixed, np.where(TARGET_IN == 0, 0, expected))


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


def test_the_schedule_reads_the_exact_step_under_mixed_precision():
    """bfloat16 rounds 257 to 256: the step is never autocast. At step 257 this schedule's
    gold probability is 0 (all predictions); at 256 it would be 1 (all gold)."""
    layer = ScheduledSampling("linear", k=257.0, c=1.0, dtype="mixed_bfloat16")
    layer.build(TARGET_IN.shape)
    layer.step.assign(257.0)
    mixed = np.asarray(layer(TARGET_IN, LOGITS, training=True))
    expected = np.concatenate([TARGET_IN[:, :1], PREDICTED[:, :-1]], axis=1)
    np.testing.assert_array_equal(mixed, np.where(TARGET_IN == 0, 0, expected))
    assert layer.step.dtype == "float32" and float(layer.step) == 258.0


# Two replicas on two logical CPUs, which must be set before TensorFlow starts: a fresh Python.
MIRRORED = """
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from zoo.layers import ScheduledSampling

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    layer = ScheduledSampling("exponential", k=0.5)
    layer.build((None, None))
target_in = tf.constant([[2, 7, 8, 0]])
logits = tf.one_hot([[5, 6, 3, 3]], 10)

@tf.function
def train_step():  # as fit's: the call runs once on each replica
    strategy.run(lambda: layer(target_in, logits, training=True))

for _ in range(3):
    train_step()
print(strategy.num_replicas_in_sync, [float(v) for v in layer.step.value.values])
"""


def test_under_a_mirrored_strategy_the_step_counts_steps_not_replicas():
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.split() == ["2", "[3.0,", "3.0]"]  # two replicas, three steps each


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
        ({"schedule": "linear", "minimum": 2}, r"minimum must be a probability in \[0, 1\]"),
        ({"schedule": "linear", "c": -1e-4}, "c .the linear slope. must be >= 0"),
        ({"schedule": "exponential", "k": 1.5}, r"k must be in \(0, 1\] for the exponential"),
        ({"schedule": "inverse_sigmoid", "k": 0.5}, "k must be >= 1 for the inverse_sigmoid"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduledSampling(**kwargs)


def test_docstring_examples_run():
    assert doctest.testmod(scheduled_sampling_module, extraglobs={"keras": keras}).failed == 0
