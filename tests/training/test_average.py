"""Checkpoint averaging: the kept epochs, their mean, and `zoo average` on a workdir."""

import os

import keras
import numpy as np
import pytest

from zoo.training.average import average_checkpoints, average_weights, epoch_checkpoints
from zoo.training.callbacks import LastCheckpoints


def _model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])


def test_the_average_of_identical_checkpoints_is_that_checkpoint(tmp_path):
    model = _model(0)
    expected = [np.array(w) for w in model.get_weights()]
    paths = []
    for epoch in range(3):
        paths.append(str(tmp_path / f"epoch-{epoch + 1:04d}.weights.h5"))
        model.save_weights(paths[-1])
    other = _model(1)
    average_weights(other, paths)
    for got, want in zip(other.get_weights(), expected):
        np.testing.assert_array_equal(got, want)


def test_the_average_is_the_elementwise_mean(tmp_path):
    weights = []
    for seed in range(3):
        model = _model(seed)
        model.save_weights(str(tmp_path / f"epoch-{seed + 1:04d}.weights.h5"))
        weights.append(model.get_weights())
    model = average_weights(_model(5), epoch_checkpoints(str(tmp_path)))
    for index, got in enumerate(model.get_weights()):
        want = np.mean([w[index].astype("float64") for w in weights], axis=0)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_last_checkpoints_keeps_the_last_epochs_in_order(tmp_path):
    model = _model(0)
    callback = LastCheckpoints(str(tmp_path / "epochs"), keep=2)
    callback.set_model(model)
    for epoch in range(11):
        callback.on_epoch_end(epoch)
    names = [os.path.basename(p) for p in epoch_checkpoints(str(tmp_path / "epochs"))]
    assert names == ["epoch-0010.weights.h5", "epoch-0011.weights.h5"]  # 10 sorts after 9
    with pytest.raises(ValueError, match="keep"):
        LastCheckpoints(str(tmp_path), keep=0)


def test_average_checkpoints_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no epoch weights"):
        average_checkpoints(str(tmp_path), 2)
    epochs = tmp_path / "epochs"
    epochs.mkdir()
    _model(0).save_weights(str(epochs / "epoch-0001.weights.h5"))
    with pytest.raises(ValueError, match="keeps only 1 epochs"):
        average_checkpoints(str(tmp_path), 3)
    with pytest.raises(ValueError, match="at least 1"):
        average_checkpoints(str(tmp_path), 0)
