"""Mixed precision: mixed_float16 training scales the loss, and every export computes in
float32 (float32_model), with the weights of the mixed model."""

import keras
import numpy as np
import pytest

from zoo.export.folder import float32_model
from zoo.tasks import get_task
from zoo.training.train import training_dtype_policy

SOURCE = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32")
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 9, 0]], "int32")


@pytest.mark.parametrize("mixed", ["bfloat16", "float16"])
def test_the_float32_copy_of_a_mixed_model_is_a_float32_build_with_its_weights(mixed):
    task = get_task("translator")
    config = task.get_config("tiny", vocab_size=64, max_length=16)
    with training_dtype_policy(mixed):
        model = task.build_model(config)
    assert model.get_layer("encoder_block_0").compute_dtype == mixed
    copy = float32_model(model)
    reference = task.build_model(config)  # float32: the global policy is back
    reference.set_weights(model.get_weights())
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    assert all(layer.compute_dtype == "float32" for layer in copy.layers[2:])
    np.testing.assert_array_equal(np.asarray(copy(inputs)), np.asarray(reference(inputs)))
    assert float32_model(reference) is reference  # a float32 model is used as it is


def test_the_float32_copy_of_a_mixed_tagger_is_a_float32_build_with_its_weights():
    task = get_task("tagger")
    config = task.get_config("tiny")
    with training_dtype_policy("bfloat16"):
        model = task.build_model(config)
    copy = float32_model(model)
    reference = task.build_model(config)
    reference.set_weights(model.get_weights())
    rng = np.random.default_rng(0)
    inputs = {"words": rng.integers(2, 50, (2, 7)), "chars": rng.integers(2, 20, (2, 7, 10))}
    for got, want in zip(keras.tree.flatten(copy(inputs)), keras.tree.flatten(reference(inputs))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_float16_training_scales_the_loss_and_its_copy_computes_in_float32():
    task = get_task("translator")
    config = task.get_config("tiny", vocab_size=64, max_length=16)
    with training_dtype_policy("float16"):
        model = task.compile_model(task.build_model(config), config, jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.get_layer("encoder_block_0").compute_dtype == "float16"
    labels = np.concatenate([TARGET_IN[:, 1:], np.zeros((2, 1), "int32")], axis=1)
    losses = [model.train_on_batch({"source": SOURCE, "target_in": TARGET_IN}, labels)
              for _ in range(3)]  # fmt: skip
    assert np.all(np.isfinite(keras.tree.flatten(losses)))
    with pytest.raises(ValueError, match="mixed_precision='float8'"):
        with training_dtype_policy("float8"):
            pass
    copy = float32_model(model)  # what write_export and the serving modules use
    assert copy.get_layer("encoder_block_0").compute_dtype == "float32"
    for got, want in zip(copy.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(got, want)
