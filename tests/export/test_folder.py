"""The export folder every task writes: its files, in order, with a progress bar on stderr."""

import os

import keras
import pytest
import tensorflow as tf

from zoo.artifacts import latest_serving_path, serving_path
from zoo.export.folder import write_export


class _Doubler(tf.Module):
    """A serving module with two signatures, as a task's would have."""

    def __init__(self, model):
        super().__init__()
        self.model_variables = list(model.variables)
        self._model = model

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def double(self, x):
        return {"y": 2 * x}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def predict(self, x):
        return {"y": self._model(x)}

    @property
    def signatures(self):
        return {"serving_default": self.double, "predict": self.predict}


def test_write_export_writes_every_part_and_draws_its_stages(tmp_path, capsys):
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs), name="tiny")
    model.compile(optimizer="adam", loss="mse")  # the export drops the optimizer
    out = write_export(
        tmp_path / "out", model, "vocab.txt",
        lambda path: open(path, "w").write("a\nb\n"), _Doubler(model), verbose=True,
    )
    assert sorted(os.listdir(out)) == ["model.keras", "serving", "vocab.txt"]
    reloaded = keras.models.load_model(os.path.join(out, "model.keras"))
    assert reloaded.name == "tiny" and getattr(reloaded, "optimizer", None) is None
    serving = tf.saved_model.load(serving_path(out))
    assert set(serving.signatures) == {"serving_default", "predict"}
    y = serving.signatures["serving_default"](x=tf.ones([1, 2]))["y"]
    assert y.numpy().tolist() == [[2.0, 2.0]]
    captured = capsys.readouterr()
    assert captured.out == "" and "5/5" in captured.err  # model, vocabulary, 2 traces, save


def test_each_signature_is_traced_once(tmp_path):
    """The traces that move the progress bar are the ones tf.saved_model.save uses: it does
    not trace the functions again (tracing is most of an export's time)."""
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    serving = _Doubler(model)
    write_export(tmp_path / "out", model, "vocab.txt", lambda path: open(path, "w").close(),
                 serving)  # fmt: skip
    counts = {name: f.experimental_get_tracing_count() for name, f in serving.signatures.items()}
    assert counts == {"serving_default": 1, "predict": 1}, counts


def test_versions_follow_tf_servings_layout(tmp_path):
    """serving/ is TF Serving's base path: each export writes serving/<version>/, the newest
    version is the highest number, and a version that is not a positive integer is refused
    before anything is written."""
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    out = tmp_path / "out"
    assert latest_serving_path(out) is None
    for version in (1, 10, 2):
        write_export(out, model, "vocab.txt", lambda path: open(path, "w").close(),
                     _Doubler(model), version=version)  # fmt: skip
    assert sorted(os.listdir(out / "serving")) == ["1", "10", "2"]
    assert latest_serving_path(out) == serving_path(out, 10) == str(out / "serving" / "10")
    assert os.path.isfile(os.path.join(serving_path(out), "saved_model.pb"))  # version 1
    for bad in (0, -1, "3", 2.0, True):
        with pytest.raises(ValueError, match="version must be a positive integer"):
            write_export(tmp_path / "bad", model, "vocab.txt", print, _Doubler(model),
                         version=bad)  # fmt: skip
    assert not (tmp_path / "bad").exists()
