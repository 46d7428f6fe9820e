"""Crash safety of a training run: atomic writes, a stop at the first NaN loss, and a resume
from the backup's second copy when the first was cut short."""

import json
import os

import keras
import numpy as np
import pytest

from tests.harness import fit_built
from zoo.artifacts import (
    BACKUP_DIR,
    CHECKPOINT_FILE,
    EPOCHS_DIR,
    save_model_atomically,
    write_text_atomically,
    written_atomically,
)
from zoo.training.callbacks import NonFiniteLossError
from zoo.training.train import standard_callbacks

BATCHES = 4  # per epoch


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    return model


def _fit(model, workdir, epochs, extra=()):
    x = np.random.default_rng(0).normal(size=(8 * BATCHES, 3)).astype("float32")
    return fit_built(model, x, x.sum(axis=1), batch_size=8, epochs=epochs, shuffle=False,
                     verbose=0, callbacks=standard_callbacks(workdir, extra=extra))


def _backup_epoch(workdir):
    with open(os.path.join(workdir, BACKUP_DIR, "training_metadata.json")) as f:
        return json.load(f)["epoch"]


# ---------------------------------------------------------------- write, then rename
def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = tmp_path / "config.json"
    write_text_atomically(path, "old")
    with pytest.raises(RuntimeError, match="killed"):
        with written_atomically(path) as temporary:
            with open(temporary, "w") as f:
                f.write("half of the new")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["config.json"]
    write_text_atomically(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["config.json"]


def test_a_folder_is_replaced_whole(tmp_path):
    path = tmp_path / "1"
    path.mkdir()
    (path / "old.pb").write_text("old")
    with written_atomically(path) as temporary:
        os.makedirs(temporary)
        with open(os.path.join(temporary, "saved_model.pb"), "w") as f:
            f.write("new")
    assert os.listdir(path) == ["saved_model.pb"] and os.listdir(tmp_path) == ["1"]


def test_a_model_and_its_weights_are_saved_under_their_names_only(tmp_path):
    model = _model()
    save_model_atomically(model, tmp_path / "model.keras")
    save_model_atomically(model, tmp_path / "epoch-0001.weights.h5")
    assert sorted(os.listdir(tmp_path)) == ["epoch-0001.weights.h5", "model.keras"]
    loaded = keras.models.load_model(tmp_path / "model.keras")
    for got, want in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- NaN
class _PoisonAt(keras.callbacks.Callback):
    """Set the first kernel to NaN after one batch: the next batch's loss is NaN."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at = (epoch, batch)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            kernel = self.model.layers[0].kernel
            kernel.assign(np.full(kernel.shape, np.nan, "float32"))


def test_a_nan_loss_stops_training_naming_the_step_and_keeps_the_last_epoch(tmp_path):
    workdir = str(tmp_path)
    model = _model()
    # Poisoned after the second batch of the second epoch: the third batch's loss is NaN.
    with pytest.raises(NonFiniteLossError, match=r"nan at step 7 \(epoch 2, batch 3\)"):
        _fit(model, workdir, epochs=3, extra=[_PoisonAt(epoch=1, batch=1)])
    # Nothing after the first epoch was saved: no NaN weights anywhere.
    assert _backup_epoch(workdir) == 1
    assert os.listdir(os.path.join(workdir, EPOCHS_DIR)) == ["epoch-0001.weights.h5"]
    checkpoint = keras.models.load_model(os.path.join(workdir, CHECKPOINT_FILE))
    assert all(np.all(np.isfinite(w)) for w in checkpoint.get_weights())
    # The CLI turns it into one line (a ValueError), and a rerun resumes from epoch 1.
    assert isinstance(NonFiniteLossError("x"), ValueError)
    history = _fit(_model(), workdir, epochs=3)
    assert history.epoch == [1, 2] and np.all(np.isfinite(history.history["loss"]))


# ---------------------------------------------------------------- the backup's second copy
def test_a_cut_backup_resumes_from_the_copy_before_it(tmp_path):
    workdir = str(tmp_path)
    _fit(_model(), workdir, epochs=2)
    latest = os.path.join(workdir, BACKUP_DIR, "latest.weights.h5")
    with open(latest, "rb") as f:
        data = f.read()
    with open(latest, "wb") as f:  # a kill in the middle of the write
        f.write(data[: len(data) // 3])
    history = _fit(_model(), workdir, epochs=3)
    assert history.epoch == [1, 2]  # from the copy of epoch 1, not from scratch
    assert _backup_epoch(workdir) == 3
