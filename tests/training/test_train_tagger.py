"""train() of the tagger task end to end at tiny size: the workdir, best-dev selection, resume, XPOS."""

import csv
import json
import os

import keras
import numpy as np
import pytest

from tests.harness import CrashAtEpoch
from tests.models.test_tagger_task import ewt  # EWT read once per process
from zoo.tasks.tagging.config import get_config
from zoo.tasks import get_task
from zoo.training import train
from zoo.training.callbacks import BestCheckpoint

TAGGER = get_task("tagger")

TRAIN = list(ewt("train")[:200])
DEV = list(ewt("dev")[:60])
CONFIG = get_config("tiny", epochs=2)


def _run(workdir, config=CONFIG, **kwargs):
    return train(TAGGER, config, workdir, train_data=TRAIN, validation_data=DEV, verbose=0,
                 **kwargs)


def test_train_resumes_after_a_crash_trains_longer_and_keeps_the_best_dev_epoch(tmp_path):
    workdir = str(tmp_path / "run")
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(workdir, callbacks=[CrashAtEpoch(1)])
    for name in ("config.json", "vocabulary.json", "checkpoint.keras", "best.keras", "backup"):
        assert os.path.exists(os.path.join(workdir, name)), name
    with open(os.path.join(workdir, "config.json")) as f:
        saved = json.load(f)
    assert saved["word_vocab_size"] > 2 and saved["word_vocab_size"] != CONFIG.word_vocab_size

    # The run resumes with the second epoch, and a config of more epochs trains on from there
    # in the same call (the same command resuming alone: test_train.py's translator, the same
    # train(); a finished run trained longer: tests/tasks/test_tasks.py).
    model, history, _ = _run(workdir, get_config("tiny", epochs=3))
    assert history.epoch == [1, 2]
    with open(os.path.join(workdir, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]

    # model.keras is the best dev epoch, whose score best.keras.json keeps.
    dev_accuracy = [float(r["val_accuracy"]) for r in rows]
    with open(os.path.join(workdir, "best.keras.json")) as f:
        best = json.load(f)
    assert best["epoch"] == int(np.argmax(dev_accuracy))
    assert best["best"] == pytest.approx(max(dev_accuracy))
    best_model = keras.models.load_model(os.path.join(workdir, "best.keras"))
    for a, b in zip(model.weights, best_model.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # Resuming with another model is refused, naming the field.
    with pytest.raises(ValueError, match=r"d_model"):
        _run(workdir, get_config("tiny", d_model=48))


def test_a_resumed_run_does_not_replace_a_better_model(tmp_path):
    path = str(tmp_path / "best.keras")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    first = BestCheckpoint(path, "val_accuracy")
    first.set_model(model)
    first.on_epoch_end(0, {"val_accuracy": 0.9})
    resumed = BestCheckpoint(path, "val_accuracy")  # a new process after a crash
    resumed.set_model(model)
    os.remove(path + ".json")  # a write now would recreate it
    resumed.on_epoch_end(1, {"val_accuracy": 0.8})
    assert not os.path.exists(path + ".json")
    resumed.on_epoch_end(2, {"val_accuracy": 0.95})
    with open(path + ".json") as f:
        assert json.load(f) == {"monitor": "val_accuracy", "best": 0.95, "epoch": 2}


def test_xpos_head_softmax_and_weight_averaging(tmp_path):
    config = get_config(
        "tiny", epochs=1, num_xpos_tags=1, use_crf=False, label_smoothing=0.1, ema_momentum=0.9
    )
    # Dev sentences from the training set: 200 sentences do not have every XPOS tag of dev.
    model, history, vocabulary = train(
        TAGGER, config, str(tmp_path / "xpos"), strategy="one_device", train_data=TRAIN,
        validation_data=TRAIN[:40], verbose=0,
    )
    assert model.output["xpos"].shape[-1] == vocabulary.num_xpos_tags > 30
    assert {"val_upos_accuracy", "val_xpos_accuracy"} <= set(history.history)
    assert all(np.isfinite(history.history["loss"]))
    # The model kept (the best, here the only, epoch) is the moving average, not the last step.
    averages = model.optimizer._model_variables_moving_average
    raw = [np.asarray(v) for v in model.optimizer._trainable_variables]
    assert len(averages) == len(model.trainable_weights)
    for weight, average in zip(model.trainable_weights, averages):
        np.testing.assert_allclose(np.asarray(weight), np.asarray(average), atol=1e-6)
    assert raw  # the optimizer tracked the weights it averaged


def test_train_tagger_rejects_a_non_config(tmp_path):
    with pytest.raises(TypeError, match="TaggerRun"):
        train(TAGGER, {"d_model": 8}, str(tmp_path))
