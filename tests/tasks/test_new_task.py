"""A fourth task, written here as a newcomer would add one: its own model and its own task, and
nothing else. It trains, evaluates, predicts, exports a SavedModel and loads again through the
generic code (train(), zoo.tasks.load, the export frame), which is never edited for it.

The files such a task needs in the package: ``zoo/models/parity/`` (the config and the builder
below), ``zoo/tasks/parity/`` (the task and its serving module below), its entry in
``zoo.tasks.TASKS`` and its row in ``zoo.tasks.table.TASKS`` (with its own predict verb here),
from which the task reads its presets, splits and verb: the ``zoo`` command then trains,
evaluates, classifies and exports it too."""

import dataclasses
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo.tasks
import zoo_cli
from zoo.tasks import table
from zoo.export.folder import write_export
from zoo.layers import TokenAndPositionEmbedding, TransformerEncoderBlock
from zoo.training.config import TrainingConfig
from zoo.tasks import Task, load
from zoo.training import make_optimizer, train

DIGITS = "0123456789"


# ---------------------------------------------------------------- the model (its own file)
@dataclasses.dataclass(frozen=True)
class ParityConfig(TrainingConfig):
    d_model: int = 16
    max_length: int = 8


def build_parity(config):
    """Digit ids (0 is padding) -> the logits of "the digits' sum is even / odd"."""
    digits = keras.Input((None,), dtype="int32", name="digits")
    x = TokenAndPositionEmbedding(len(DIGITS) + 1, config.d_model, max_length=config.max_length,
                                  mask_zero=True, name="embedding")(digits)  # fmt: skip
    x = TransformerEncoderBlock(num_heads=2, ff_dim=32, dropout=0.0, name="encoder_block_0")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(digits, keras.layers.Dense(2, name="logits")(x), name="parity")


# ---------------------------------------------------------------- the task (its own file)
class ParityServing(tf.Module):
    """Strings of digits in, "even" or "odd" out, in the graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    @property
    def signatures(self):
        return {"serving_default": self.classify}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")], autograph=False)
    def classify(self, inputs):
        chars = tf.strings.unicode_split(inputs, "UTF-8").to_tensor("")
        ids = tf.strings.to_number(tf.where(chars == "", "-1", chars), tf.int32) + 1
        labels = tf.argmax(self.model(ids, training=False), axis=-1)
        return {"parity": tf.gather(tf.constant(["even", "odd"]), labels)}


class ParityTask(Task):
    name = "parity"
    config_class = ParityConfig
    run_presets = {"tiny": ParityConfig(epochs=3, learning_rate=1e-2, warmup_steps=10,
                                    batch_tokens=256)}  # fmt: skip
    vocabulary_file = "digits.json"
    validation_split = "val"
    evaluation_splits = ("val",)

    def load_data(self, split):
        rng = np.random.default_rng({"train": 0, "val": 1}[split])
        return ["".join(rng.choice(list(DIGITS), rng.integers(1, 8))) for _ in range(400)]

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        with open(os.path.join(workdir, self.vocabulary_file), "w") as f:
            json.dump(list(DIGITS), f)

    def load_vocabulary(self, folder):
        with open(os.path.join(folder, self.vocabulary_file)) as f:
            return json.load(f)

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None, counts=None, part=None):
        ids = [[vocabulary.index(d) + 1 for d in line] for line in data]
        ids = keras.utils.pad_sequences(ids, config.max_length, padding="post")
        labels = np.array([sum(map(int, line)) % 2 for line in data])
        ds = tf.data.Dataset.from_tensor_slices((ids, labels))
        if part:  # under multi_worker: this worker's share of the lines
            ds = ds.shard(part.count, part.index)
        return ds.batch(32)

    def build_model(self, config):
        return build_parity(config)

    def compile_model(self, model, config, jit_compile=False):
        model.compile(make_optimizer(config), keras.losses.SparseCategoricalCrossentropy(True),
                      metrics=["accuracy"])  # fmt: skip
        return model

    def predict(self, model, vocabulary, lines, verbose=False):
        serving = ParityServing(model)  # held: a tf.function method keeps only a weak reference
        outputs = serving.classify(tf.constant(lines))["parity"]
        return [text.decode() for text in outputs.numpy()]

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False):
        data = self.load_data(split)
        right = sum(p == ("odd" if sum(map(int, line)) % 2 else "even")
                    for p, line in zip(self.predict(model, vocabulary, data), data))  # fmt: skip
        return [f"{split}: accuracy {100 * right / len(data):.1f}"]

    def export(self, model, vocabulary, output_dir, verbose=False):
        def write_vocabulary(path):
            with open(path, "w") as f:
                json.dump(vocabulary, f)

        return write_export(output_dir, model, self.vocabulary_file, write_vocabulary,
                            ParityServing(model), verbose=verbose)  # fmt: skip


# ---------------------------------------------------------------- the generic path
ROW = {  # its row in zoo.tasks.table.TASKS
    "help": "is the sum of a string of digits even?",
    "presets": ("tiny",),
    "splits": ("train", "val"),
    "predict": "classify",
    "predict_help": "classify strings of digits (arguments, or stdin one per line)",
    "train": (table.EPOCHS,),
    "evaluate": (),
    "predict_flags": (),
    "export": (),
}


@pytest.fixture
def registered(monkeypatch):
    task = ParityTask()
    monkeypatch.setitem(zoo.tasks.TASKS, task.name, task)  # its line in zoo.tasks.TASKS
    monkeypatch.setitem(table.TASKS, task.name, ROW)
    return task


def test_a_new_task_trains_evaluates_predicts_exports_and_loads(registered, tmp_path):
    task = zoo.tasks.get_task("parity")
    workdir, export_dir = str(tmp_path / "run"), str(tmp_path / "export")
    model, history, vocabulary = train(task, task.get_config("tiny"), workdir, verbose=0)
    assert len(history.history["loss"]) == 3 and "val_accuracy" in history.history
    assert history.history["loss"][-1] < history.history["loss"][0]  # it learned something

    loaded = load(workdir)  # the generic loader finds the task from the model's name
    assert loaded.task is task and loaded.vocabulary == list(DIGITS)
    [line] = task.evaluate(loaded.model, loaded.vocabulary, "val", str(tmp_path / "eval"))
    assert line.startswith("val: accuracy ")
    assert set(task.predict(loaded.model, vocabulary, ["12", "11"])) <= {"even", "odd"}

    task.export(loaded.model, loaded.vocabulary, export_dir)
    again = load(export_dir, "parity")
    np.testing.assert_allclose(again.model.predict(np.array([[2, 3, 0]]), verbose=0),
                               loaded.model.predict(np.array([[2, 3, 0]]), verbose=0), rtol=1e-5)
    served = tf.saved_model.load(os.path.join(export_dir, "serving", "1"))
    outputs = served.signatures["serving_default"](inputs=tf.constant(["12", "11"]))["parity"]
    assert [t.decode() for t in outputs.numpy()] == task.predict(loaded.model, vocabulary,
                                                                 ["12", "11"])  # fmt: skip


def test_the_zoo_command_runs_the_new_task(registered, tmp_path, capsys):
    workdir, export_dir = str(tmp_path / "run"), str(tmp_path / "export")
    zoo_cli.main(["train", "parity", "--preset", "tiny", "--epochs", "2", "--workdir", workdir,
                  "--debug"])  # fmt: skip
    assert json.load(open(os.path.join(workdir, "config.json")))["epochs"] == 2
    zoo_cli.main(["evaluate", "parity", "--workdir", workdir, "--debug"])
    zoo_cli.main(["classify", "--workdir", workdir, "--debug", "12", "11"])
    zoo_cli.main(["export", "parity", "--workdir", workdir, "--output", export_dir, "--debug"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-5] == f"model saved to {os.path.join(workdir, 'model.keras')}"
    assert lines[-4].startswith("val: accuracy ") and set(lines[-3:-1]) <= {"even", "odd"}
    assert lines[-1] == f"exported to {export_dir}"
    assert os.path.exists(os.path.join(export_dir, "serving", "1", "saved_model.pb"))
    with pytest.raises(SystemExit, match="holds a parity: use `zoo classify`"):
        zoo_cli.main(["translate", "--workdir", workdir, "A dog."])
