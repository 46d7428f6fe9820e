"""A run started from another model's weights (`train(..., init_from=DIR)`, `--init-from`):
the NAT from a translator with the same vocabulary."""

import dataclasses
import os
import shutil

import keras
import numpy as np
import pytest
from sentencepiece import sentencepiece_model_pb2

from zoo.artifacts import MODEL_FILE, SENTENCEPIECE_FILE
from zoo.data import load_multi30k
from zoo.models import build_translator, translator_config
from zoo.tasks import get_task
from zoo.training import train, warm_start

PAIRS = load_multi30k("train")[:64]
SIZES = {"vocab_size": 400, "max_length": 32}


@pytest.fixture(scope="module")
def translator_folder(tmp_path_factory):
    """A tiny translator with random weights and a vocabulary, as an export folder holds them."""
    folder = tmp_path_factory.mktemp("translator")
    task = get_task("translator")
    config = task.get_config("tiny", **SIZES)
    task.make_vocabulary(config, str(folder), load_multi30k("train")[:400])
    keras.utils.set_random_seed(1)
    build_translator(translator_config("tiny", **SIZES)).save(folder / MODEL_FILE)
    return folder


def nat_workdir(path, translator_folder):
    """A NAT workdir that shares the translator's vocabulary (as a distilled run does)."""
    os.makedirs(path, exist_ok=True)
    shutil.copy(translator_folder / SENTENCEPIECE_FILE, path)
    return str(path)


def weights_by_layer(model):
    return {layer.name: layer.get_weights() for layer in model.layers if layer.weights}


def test_the_nat_takes_every_layer_of_the_translator_but_its_length_predictor(
    translator_folder, tmp_path
):
    workdir = nat_workdir(tmp_path / "nat", translator_folder)
    task = get_task("nat")
    keras.utils.set_random_seed(2)
    model = task.build_model(task.get_config("tiny", **SIZES))
    built = weights_by_layer(model)
    copied, kept = warm_start(model, translator_folder, task, workdir)
    assert kept == ["length_predictor"]
    assert {"embedding", "encoder_block_0", "decoder_block_0", "decoder_norm"} <= set(copied)
    translator = weights_by_layer(keras.models.load_model(translator_folder / MODEL_FILE))
    now = weights_by_layer(model)
    for name in copied:
        for got, expected in zip(now[name], translator[name]):
            np.testing.assert_array_equal(got, expected, err_msg=name)
    for got, expected in zip(now["length_predictor"], built["length_predictor"]):
        np.testing.assert_array_equal(got, expected)


class WeightsAtStart(keras.callbacks.Callback):
    """The embedding's weights when fit starts (after a backup, if any, is restored)."""

    def on_train_begin(self, logs=None):
        self.embedding = self.model.get_layer("embedding").get_weights()[0]


def test_a_new_run_starts_from_them_and_a_resumed_run_from_its_backup(translator_folder, tmp_path):
    """From an empty workdir: the run takes the translator's vocabulary, not one of its own.
    The same command again resumes from the run's backup, not from the translator; it has no
    epoch left to train, and what it starts from is the point."""
    workdir = str(tmp_path / "nat")
    task = get_task("nat")
    translator = keras.models.load_model(translator_folder / MODEL_FILE)
    expected = translator.get_layer("embedding").get_weights()[0]

    def run(epochs):
        start = WeightsAtStart()
        model, _, _ = train(task, task.get_config("tiny", epochs=epochs, **SIZES), workdir,
                            train_data=PAIRS, validation_data=PAIRS[:8], verbose=0,
                            bleu_sample_size=0, init_from=str(translator_folder),
                            callbacks=[start])  # fmt: skip
        return model, start.embedding

    first, at_start = run(1)
    vocabulary = (translator_folder / SENTENCEPIECE_FILE).read_bytes()
    assert (tmp_path / "nat" / SENTENCEPIECE_FILE).read_bytes() == vocabulary
    np.testing.assert_array_equal(at_start, expected)
    trained = first.get_layer("embedding").get_weights()[0]
    assert not np.allclose(trained, expected)  # it trained
    _, at_resume = run(1)
    np.testing.assert_array_equal(at_resume, trained)


def test_another_vocabulary_a_missing_one_and_no_layer_in_common_are_refused(
    translator_folder, tmp_path
):
    workdir = nat_workdir(tmp_path / "nat", translator_folder)
    task = get_task("nat")
    config = task.get_config("tiny", **SIZES)
    model = task.build_model(config)

    other = tmp_path / "other-vocabulary"
    shutil.copytree(translator_folder, other)
    (other / SENTENCEPIECE_FILE).unlink()
    task.make_vocabulary(dataclasses.replace(config, vocab_size=500), str(other),
                         load_multi30k("train")[:400])
    with pytest.raises(ValueError, match=f"{SENTENCEPIECE_FILE} is not this run's"):
        warm_start(model, other, task, workdir)

    (other / SENTENCEPIECE_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=f"{SENTENCEPIECE_FILE}: missing"):
        warm_start(model, other, task, workdir)
    with pytest.raises(FileNotFoundError, match="nowhere: no such folder"):
        warm_start(model, tmp_path / "nowhere", task, workdir)

    wider = tmp_path / "wider"  # the same layer names, other shapes everywhere
    wider.mkdir()
    shutil.copy(translator_folder / SENTENCEPIECE_FILE, wider)
    config = translator_config("tiny", **SIZES)
    build_translator(translator_config("tiny", d_model=2 * config.d_model, **SIZES)).save(
        wider / MODEL_FILE
    )
    with pytest.raises(ValueError, match="no layer of its model has the name and the weight"):
        warm_start(model, wider, task, workdir)


def test_a_vocabulary_of_other_bytes_but_the_same_pieces_is_the_same(translator_folder, tmp_path):
    """Two SentencePiece models learned alike differ in what the trainer recorded, not in
    their pieces: a run may start from the other's weights."""
    workdir = nat_workdir(tmp_path / "nat", translator_folder)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((translator_folder / SENTENCEPIECE_FILE).read_bytes())
    proto.trainer_spec.input_sentence_size += 1  # what a trainer records, not a piece
    rewritten = proto.SerializeToString()
    assert rewritten != (translator_folder / SENTENCEPIECE_FILE).read_bytes()
    (tmp_path / "nat" / SENTENCEPIECE_FILE).write_bytes(rewritten)
    task = get_task("nat")
    assert task.same_vocabulary(str(translator_folder), workdir)
    copied, _ = warm_start(task.build_model(task.get_config("tiny", **SIZES)), translator_folder,
                           task, workdir)  # fmt: skip
    assert "embedding" in copied
    proto.pieces[-1].piece += "\u2581zz"  # one piece differs: another mapping
    (tmp_path / "nat" / SENTENCEPIECE_FILE).write_bytes(proto.SerializeToString())
    assert not task.same_vocabulary(str(translator_folder), workdir)


def test_a_given_vocabulary_comes_before_the_starting_models(translator_folder, tmp_path):
    """A run given a vocabulary (--sentencepiece-model, a distillation's teacher's) keeps it,
    whatever --init-from names (warm_start then refuses a starting model with another one)."""
    teacher = tmp_path / "kd"
    teacher.mkdir()
    task = get_task("nat")
    config = task.get_config("tiny", **{**SIZES, "vocab_size": 500})
    task.make_vocabulary(config, str(teacher), load_multi30k("train")[:400])
    workdir = tmp_path / "nat"
    workdir.mkdir()
    given = str(teacher / SENTENCEPIECE_FILE)
    vocabulary = task.prepare_vocabulary(config, str(workdir), PAIRS,
                                         init_from=str(translator_folder), given=given)
    assert vocabulary.vocab_size == 500
    assert (workdir / SENTENCEPIECE_FILE).read_bytes() == (teacher / SENTENCEPIECE_FILE).read_bytes()
    # train() takes the size from it, whatever the preset says.
    adopted = task.adopt_vocabulary(task.get_config("tiny", **SIZES), vocabulary)
    assert adopted.vocab_size == 500


def test_another_size_of_vocabulary_and_a_missing_folder_get_errors_that_say_what_to_do(
    translator_folder, tmp_path
):
    task = get_task("nat")
    config = task.get_config("tiny", **{**SIZES, "vocab_size": 1000})
    with pytest.raises(ValueError, match="has 400 pieces, the config says vocab_size=1000: "
                                         "use --vocab-size 400"):  # fmt: skip
        train(task, config, str(tmp_path / "nat"), train_data=PAIRS, validation_data=PAIRS[:8],
              verbose=0, init_from=str(translator_folder))
    with pytest.raises(FileNotFoundError, match="--init-from .*nowhere: no such folder"):
        train(task, config, str(tmp_path / "nat2"), train_data=PAIRS, verbose=0,
              init_from=str(tmp_path / "nowhere"))
    assert not (tmp_path / "nat2").exists()  # refused before the workdir or a vocabulary
