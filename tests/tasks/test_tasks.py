"""The task seam: a new kind of run plugs into train() and load() with no change to either."""

import dataclasses
import json
import os
import re
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import REPO_ROOT
from zoo.data import SentencePieceTokenizer
from zoo.training.config import TrainingConfig
from zoo.tasks import TASKS, Task, get_task, load
from zoo.training import train
from zoo.training.average import average_checkpoints, epoch_checkpoints

SHIPPED_TAGGER = os.path.join(REPO_ROOT, "saved_models", "tagger-en-ewt")
SHIPPED_TRANSLATOR = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")
SHIPPED_NAT = os.path.join(REPO_ROOT, "saved_models", "nat-en-de")


# ---------------------------------------------------------------- a task written for the test
@dataclasses.dataclass(frozen=True)
class ParityConfig(TrainingConfig):  # every model's config includes the training fields
    vocab_size: int = 4
    width: int = 8
    epochs: int = 2
    learning_rate: float = 0.05


class ParityTask(Task):
    """A toy kind of run, defined here and nowhere in zoo: is a bit string's sum even?"""

    name = "parity"
    config_class = ParityConfig
    presets = {"tiny": ParityConfig()}
    vocabulary_file = "symbols.json"
    validation_split = "val"

    def load_data(self, split):
        rng = np.random.default_rng({"train": 0, "val": 1}[split])
        return rng.integers(0, 2, (64, 6))

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        with open(os.path.join(workdir, self.vocabulary_file), "w") as f:
            json.dump({"symbols": ["0", "1"]}, f)

    def load_vocabulary(self, folder):
        with open(os.path.join(folder, self.vocabulary_file)) as f:
            return json.load(f)["symbols"]

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None, counts=None, part=None):
        labels = data.sum(axis=1) % 2
        return tf.data.Dataset.from_tensor_slices((data, labels)).batch(16)

    def build_model(self, config):
        bits = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(config.vocab_size, config.width)(bits)
        x = keras.layers.GlobalAveragePooling1D()(x)
        return keras.Model(bits, keras.layers.Dense(2)(x), name=self.name)

    def compile_model(self, model, config, jit_compile=False):
        model.compile(
            optimizer=keras.optimizers.Adam(config.learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    def best_metric(self, config):
        return "val_accuracy"


def test_a_new_task_trains_resumes_and_loads_through_the_seam(tmp_path, monkeypatch):
    task = ParityTask()
    monkeypatch.setitem(TASKS, task.name, task)
    workdir = str(tmp_path / "parity")
    model, history, vocabulary = train(task, task.get_config("tiny"), workdir, verbose=0)
    assert vocabulary == ["0", "1"] and history.epoch == [0, 1]
    for name in ("config.json", "symbols.json", "checkpoint.keras", "best.keras", "backup",
                 "logs", "history.csv", "model.keras"):
        assert os.path.exists(os.path.join(workdir, name)), name

    # The workdir guard and resume are train()'s, so the new task has them too.
    with pytest.raises(ValueError, match="width"):
        train(task, dataclasses.replace(task.get_config("tiny"), width=4), workdir, verbose=0)
    _, history, _ = train(task, task.get_config("tiny", epochs=3), workdir, verbose=0)
    assert history.epoch == [2]

    loaded = load(workdir)
    assert loaded.task is task and loaded.vocabulary == ["0", "1"]
    assert loaded.model.name == "parity"

    # The last epochs' weights are kept, and averaging them is a workdir's model too.
    epochs = epoch_checkpoints(os.path.join(workdir, "epochs"))
    assert [os.path.basename(p) for p in epochs] == [
        f"epoch-{n:04d}.weights.h5" for n in (1, 2, 3)
    ]
    _, averaged = average_checkpoints(workdir, 2)
    assert averaged == epochs[1:]
    per_epoch = []
    for path in averaged:
        loaded.model.load_weights(path)
        per_epoch.append(loaded.model.get_weights())
    for index, weight in enumerate(load(workdir).model.get_weights()):
        np.testing.assert_allclose(weight, (per_epoch[0][index] + per_epoch[1][index]) / 2,
                                   rtol=1e-6)
    # A killed run leaves no model.keras: the model comes from its last checkpoint.keras.
    os.remove(os.path.join(workdir, "model.keras"))
    _, averaged = average_checkpoints(workdir, 2)
    assert averaged == epochs[1:]
    for index, weight in enumerate(load(workdir).model.get_weights()):
        np.testing.assert_allclose(weight, (per_epoch[0][index] + per_epoch[1][index]) / 2,
                                   rtol=1e-6)
    with pytest.raises(TypeError, match="ParityConfig"):
        train(task, {"width": 3}, workdir)


# ---------------------------------------------------------------- the shipped tasks
def test_load_reads_each_shipped_export_folder():
    translator = load(SHIPPED_TRANSLATOR)
    assert translator.task is TASKS["translator"] and translator.model.name == "translator"
    assert isinstance(translator.vocabulary, SentencePieceTokenizer)
    assert translator.vocabulary.vocab_size == translator.model.output_shape[-1]
    task, model, vocabulary = load(SHIPPED_TAGGER, "tagger")
    assert task is get_task("tagger") and vocabulary.word_vocab_size > 1000
    with pytest.raises(ValueError, match="holds a tagger, not a translator"):
        load(SHIPPED_TAGGER, "translator")
    task, model, vocabulary = load(SHIPPED_NAT)
    assert task is get_task("nat") and model.name == "nat"
    assert vocabulary.vocab_size == translator.vocabulary.vocab_size


def test_load_names_the_file_that_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no trained model"):
        load(tmp_path)
    (tmp_path / "model.keras").write_bytes(b"PK\x03\x04 not a zip archive")
    with pytest.raises(ValueError, match=r"model\.keras is not a readable \.keras model"):
        load(tmp_path)

    foreign = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="regressor")
    foreign.save(tmp_path / "model.keras")
    with pytest.raises(ValueError, match="'regressor', which is no zoo task"):
        load(tmp_path)

    folder = tmp_path / "no_vocabulary"
    folder.mkdir()
    with open(os.path.join(SHIPPED_TAGGER, "model.keras"), "rb") as f:
        (folder / "model.keras").write_bytes(f.read())
    with pytest.raises(FileNotFoundError, match=r"vocabulary\.json: missing"):
        load(folder)
    (folder / "vocabulary.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match=r"vocabulary\.json cannot be read"):
        load(folder)


def _rewrite_archive(path, edit_config, keras_version):
    """Rewrite a ``.keras`` archive in place: its config through ``edit_config``, and the
    Keras version its metadata records."""
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    edit_config(config)
    files["config.json"] = json.dumps(config).encode()
    metadata = json.loads(files["metadata.json"])
    metadata["keras_version"] = keras_version
    files["metadata.json"] = json.dumps(metadata).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def test_load_names_a_newer_keras_that_saved_the_model(tmp_path):
    # An argument that this Keras's initializer does not know, as Keras 3.13 meets the
    # `input_axes` of the GlorotUniform configs that Keras 3.15 writes.
    def add_unknown_argument(config):
        dense = config["config"]["layers"][-1]["config"]
        dense["kernel_initializer"]["config"]["future_argument"] = None

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="tagger")
    path = tmp_path / "model.keras"
    model.save(path)
    _rewrite_archive(path, add_unknown_argument, "99.1.0")
    message = (
        rf"model\.keras was saved by Keras 99\.1\.0, newer than this Keras "
        rf"{re.escape(keras.__version__)}, which cannot read it \(GlorotUniform\.__init__\(\) "
        r"got an unexpected keyword argument 'future_argument'\): upgrade Keras "
        r"\(pip install 'keras>=99\.1\.0'\)$"
    )
    with pytest.raises(ValueError, match=message):
        load(tmp_path)
    # Saved by this very Keras, the same failure is a broken file, not a version.
    _rewrite_archive(path, lambda config: None, keras.__version__)
    with pytest.raises(ValueError, match=r"model\.keras is not a readable \.keras model"):
        load(tmp_path)


def test_get_task_and_presets():
    assert set(TASKS) == {"translator", "tagger", "nat", "transliterator"}
    assert get_task(TASKS["tagger"]) is TASKS["tagger"]
    with pytest.raises(ValueError, match="Unknown task 'gpt'"):
        get_task("gpt")
    with pytest.raises(ValueError, match="Unknown translator preset 'huge'"):
        get_task("translator").get_config("huge")
    assert get_task("translator").get_config("tiny", epochs=3).epochs == 3


@pytest.fixture
def search_calls(monkeypatch):
    """The keyword arguments of every search the translator task starts (none runs)."""
    import zoo.tasks.translation.task as translation

    calls = []
    monkeypatch.setattr(translation.TranslationTask, "translate",
                        lambda self, *args, **kwargs: calls.append(kwargs))  # fmt: skip
    monkeypatch.setattr(
        translation, "evaluate_translator",
        lambda *args, **kwargs: calls.append(kwargs) or {"bleu": 0.0, "bleu_signature": "",
                                                         "bleu_lowercase": 0.0},
    )  # fmt: skip
    monkeypatch.setattr(translation, "bleu_line", lambda *args: "")
    return calls


def test_the_translator_hands_its_length_penalty_to_beam_search_only(search_calls):
    """`zoo translate|evaluate translator --alpha A`: the task's hooks give A to beam search
    (whose scores test_beam.py checks), leave the search's default when it is not given, and
    refuse it for a search that has no length penalty."""
    task = get_task("translator")
    task.predict(None, None, ["A dog."], alpha=1.5)
    task.evaluate(None, None, "val", "out", alpha=0.0)
    task.predict(None, None, ["A dog."])
    assert [call.get("alpha") for call in search_calls] == [1.5, 0.0, None]
    assert all(call["method"] == "beam" for call in search_calls)
    for method in ("greedy", "sample"):
        with pytest.raises(ValueError, match=f"beam search only, not to method='{method}'"):
            task.predict(None, None, ["A dog."], method=method, alpha=1.0)
    with pytest.raises(ValueError, match="beam search only"):
        task.evaluate(None, None, "val", "out", method="greedy", alpha=1.0)


def test_the_translator_hands_its_beam_size_to_beam_search_only(search_calls):
    """`--beam-size N` reaches beam search (default 4 to translate, 5 to evaluate), and is
    refused, not ignored, with `--method greedy` or `sample`."""
    task = get_task("translator")
    task.predict(None, None, ["A dog."])
    task.evaluate(None, None, "val", "out")
    task.predict(None, None, ["A dog."], beam_size=8)
    task.evaluate(None, None, "val", "out", beam_size=2)
    task.predict(None, None, ["A dog."], method="greedy")
    assert [call.get("beam_size") for call in search_calls] == [4, 5, 8, 2, None]
    for method in ("greedy", "sample"):
        with pytest.raises(ValueError, match=f"beam_size .* beam search only, not to "
                                             f"method='{method}'"):
            task.predict(None, None, ["A dog."], method=method, beam_size=4)
    with pytest.raises(ValueError, match="beam search only"):
        task.evaluate(None, None, "val", "out", method="greedy", beam_size=5)
