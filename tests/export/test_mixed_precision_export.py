"""Mixed precision: mixed_float16 training scales the loss, and every export computes in
float32 (float32_model), with the weights of the mixed model."""

import keras
import numpy as np
import pytest

from zoo.data import load_multi30k
from zoo.export.folder import float32_model
from zoo.tasks import get_task
from zoo.training import train
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


def test_float16_training_scales_the_loss_and_exports_in_float32(tmp_path):
    task = get_task("translator")
    config = task.get_config("tiny", vocab_size=400, max_length=32, epochs=1)
    model, history, tokenizer = train(
        task, config, str(tmp_path / "run"), mixed_precision="float16",
        train_data=load_multi30k("train")[:300], validation_data=load_multi30k("val")[:20],
        verbose=0, bleu_sample_size=0,
    )
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.get_layer("encoder_block_0").compute_dtype == "float16"
    assert np.all(np.isfinite(history.history["loss"]))
    with pytest.raises(ValueError, match="mixed_precision='float8'"):
        with training_dtype_policy("float8"):
            pass
    folder = task.export(model, tokenizer, str(tmp_path / "export"))
    exported = keras.models.load_model(f"{folder}/model.keras", compile=False)
    assert exported.get_layer("encoder_block_0").compute_dtype == "float32"
