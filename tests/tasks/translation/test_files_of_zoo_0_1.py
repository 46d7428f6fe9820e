"""Files made by zoo 0.1.0: a functional translator (no backbone) in a workdir loads, upgraded in
memory from its config.json; without one, and through from_preset, it is refused in one line
that names the command that writes it anew (`zoo export`)."""

import dataclasses
import json
import shutil

import keras
import numpy as np
import pytest

from zoo.artifacts import CONFIG_FILE, MODEL_FILE, SENTENCEPIECE_FILE
from zoo.data import load_multi30k, train_sentencepiece
from zoo.models import Translator, TranslatorBackbone, translator_config
from zoo.tasks import load


@pytest.fixture(scope="module")
def old_workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("old")
    texts = [s for pair in load_multi30k("val") for s in pair]
    shutil.copy(train_sentencepiece(texts, folder / "sp", vocab_size=400),
                folder / SENTENCEPIECE_FILE)  # fmt: skip
    config = translator_config("tiny", vocab_size=400)
    backbone = TranslatorBackbone.from_architecture(config)
    # What 0.1.0's builder saved: a plain functional model of the same layers.
    keras.Model(backbone.input, backbone.output, name="translator").save(folder / MODEL_FILE)
    (folder / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(config)))
    return folder, backbone


def test_a_workdir_of_zoo_0_1_loads_upgraded_with_its_weights(old_workdir):
    folder, backbone = old_workdir
    task, model, _ = load(folder)
    assert task.name == "translator" and isinstance(model, TranslatorBackbone)
    for got, want in zip(model.weights, backbone.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_without_its_config_or_through_from_preset_it_is_refused_in_one_line(old_workdir,
                                                                               tmp_path):
    folder, _ = old_workdir
    bare = tmp_path / "export"
    bare.mkdir()
    for name in (MODEL_FILE, SENTENCEPIECE_FILE):
        shutil.copy(folder / name, bare / name)
    with pytest.raises(ValueError, match=r"zoo 0\.1\.0.*`zoo export`") as error:
        load(bare)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="`zoo export` of its workdir") as error:
        Translator.from_preset(str(folder))
    assert "\n" not in str(error.value)
