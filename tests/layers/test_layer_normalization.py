"""zoo.layers.LayerNormalization (Keras's class name, fewer graph ops) against Keras's: the same
outputs, gradients and weights; weights files written with either load into the other."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from zoo.layers import LayerNormalization as Ours


def twins(shape, seed=0, **kwargs):
    """Ours and Keras's, built on ``shape``, with the same random gamma and beta."""
    rng = np.random.default_rng(seed)
    ours, theirs = Ours(**kwargs), keras.layers.LayerNormalization(**kwargs)
    for layer in (ours, theirs):
        layer.build(shape)
    weights = [rng.normal(size=w.shape).astype("float32") for w in theirs.weights]
    for layer in (ours, theirs):
        layer.set_weights(weights)
    return ours, theirs


@pytest.mark.parametrize("shape", [(2, 5, 16), (3, 7), (1, 1, 1, 8)])
def test_outputs_and_gradients_are_keras_s_to_float32_tolerance(shape):
    x = tf.constant(np.random.default_rng(1).normal(3.0, 2.0, size=shape).astype("float32"))
    ours, theirs = twins(shape, epsilon=1e-5)
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * tf.range(1.0, shape[-1] + 1.0))
        layer.grads = tape.gradient(loss, [x] + layer.trainable_weights)
        layer.y = y
    np.testing.assert_allclose(ours.y, theirs.y, rtol=1e-5, atol=1e-5)
    for mine, keras_s in zip(ours.grads, theirs.grads):
        np.testing.assert_allclose(mine, keras_s, rtol=1e-4, atol=1e-4)


def test_float16_inputs_keep_float32_statistics():
    ours, theirs = twins((2, 4, 32), epsilon=1e-3, dtype="mixed_float16")
    x = np.random.default_rng(2).normal(100.0, 30.0, size=(2, 4, 32)).astype("float16")
    y = ours(x)
    assert y.dtype == tf.float16
    np.testing.assert_allclose(np.asarray(y, "float32"), np.asarray(theirs(x), "float32"),
                               atol=2e-2)  # fmt: skip


def test_other_axes_are_keras_s_own():
    x = np.random.default_rng(3).normal(size=(2, 3, 4)).astype("float32")
    for kwargs in ({"axis": 1}, {"axis": [1, 2]}):
        ours, theirs = twins(x.shape, **kwargs)
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-6)


def test_no_center_or_no_scale():
    x = np.random.default_rng(4).normal(size=(2, 6)).astype("float32")
    for kwargs in ({"center": False}, {"scale": False}):
        ours, theirs = twins(x.shape, **kwargs)
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-6)


def test_fewer_ops_in_a_graph():
    def count(layer):
        layer.build((None, None, 16))
        graph = tf.function(layer).get_concrete_function(
            tf.TensorSpec([None, None, 16], tf.float32)).graph
        return sum(op.type not in ("Placeholder", "ReadVariableOp", "Const", "Identity",
                                   "NoOp") for op in graph.get_operations())  # fmt: skip

    assert count(Ours()) == 9 < count(keras.layers.LayerNormalization())


def test_saved_with_either_loads_into_the_other(tmp_path):
    inputs = keras.Input((3, 8))
    theirs = keras.Model(inputs, keras.layers.LayerNormalization(name="norm")(inputs))
    theirs.layers[-1].set_weights([np.full(8, 2.0, "float32"), np.full(8, 0.5, "float32")])
    ours = keras.Model(inputs, Ours(name="norm")(inputs))
    path = str(tmp_path / "keras.weights.h5")  # Keras's file, an old checkpoint: ours reads it
    theirs.save_weights(path)
    ours.load_weights(path)
    x = np.random.default_rng(5).normal(size=(2, 3, 8)).astype("float32")
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
    ours.save(tmp_path / "ours.keras")
    again = keras.models.load_model(tmp_path / "ours.keras")
    assert type(again.layers[-1]) is Ours
    np.testing.assert_allclose(again(x), theirs(x), rtol=1e-5, atol=1e-6)


def test_the_layer_battery():
    x = np.random.default_rng(6).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(Ours, {"epsilon": 1e-5}, x, expected_output_shape=(2, 5, 8))
