"""The transliteration task: its rule-made data, and a tiny model trained, evaluated, loaded,
run and served through the generic paths (the task adds only its data, vocabulary and scores)."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.artifacts import serving_path
from zoo.data import load_transliteration, transliterate
from zoo.tasks import get_task, load, translate
from zoo.tasks.transliteration.evaluation import edit_distance, transliteration_scores
from zoo.training import train

TASK = get_task("transliterator")
PHRASES = ["lucky fox", "wax", "", "a quiz in the zoo"]


def test_the_splits_are_fixed_disjoint_and_the_long_one_longer():
    splits = {split: load_transliteration(split) for split in ("train", "val", "test", "long")}
    assert [len(pairs) for pairs in splits.values()] == [20_000, 1_000, 1_000, 500]
    assert load_transliteration("val") == splits["val"]  # the same pairs every time
    train_sources = {source for source, _ in splits["train"]}
    for split in ("val", "test", "long"):
        assert not train_sources & {source for source, _ in splits[split]}
    assert min(len(s) for s, _ in splits["long"]) > max(len(s) for s, _ in splits["train"])
    assert all(target == transliterate(source) for pairs in splits.values()
               for source, target in pairs)  # fmt: skip
    assert transliterate("xyz qw") == "ksidz kvv"
    with pytest.raises(ValueError, match="Unknown split 'dev'"):
        load_transliteration("dev")


def test_the_scores_against_hand_counts():
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "abc") == 0
    assert edit_distance("ksi", "xy") == 3
    scores = transliteration_scores(["ab", "kd"], ["ab", "ksd"])
    assert scores == {"exact": 0.5, "cer": 1 / 5}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    keras.utils.set_random_seed(0)
    config = TASK.get_config("tiny", epochs=2)
    workdir = str(tmp_path_factory.mktemp("transliterator"))
    model, history, vocabulary = train(
        TASK, config, workdir, train_data=load_transliteration("train")[:500],
        validation_data=load_transliteration("val")[:16], bleu_sample_size=8, verbose=0,
    )  # fmt: skip
    return model, history, vocabulary, workdir


def test_it_trains_with_one_piece_per_character(trained):
    model, history, vocabulary, _ = trained
    assert model.name == "transliterator" and vocabulary.vocab_size == 31
    losses = history.history["loss"]
    assert losses[1] < losses[0] and "val_exact" in history.history
    ids = vocabulary.tokenize(tf.constant(["ab c"])).to_list()[0]
    assert len(ids) == 5  # the word boundary, a, b, the boundary, c


def test_evaluate_load_translate_and_serve(trained, tmp_path, monkeypatch):
    model, _, vocabulary, workdir = trained
    # The split's first 8 phrases, one small batch, through the same path: all 500 are eight
    # batches of 64 in three padded widths, each compiled by XLA.
    monkeypatch.setattr(TASK, "load_data", {"long": load_transliteration("long")[:8]}.__getitem__)
    lines = TASK.evaluate(model, vocabulary, "long", str(tmp_path / "eval"))
    assert lines[0].startswith("long: exact ") and "(8 phrases)" in lines[0]
    scores = json.loads((tmp_path / "eval" / "long.greedy.scores.json").read_text())
    assert scores["sentences"] == 8 and 0 <= scores["cer"]
    loaded = load(workdir)
    assert loaded.task is TASK
    expected = translate(model, vocabulary, PHRASES)
    assert translate(loaded.model, loaded.vocabulary, PHRASES) == expected
    assert expected[2] == "" and TASK.predict(model, vocabulary, PHRASES) == expected
    served = tf.saved_model.load(serving_path(TASK.export(model, vocabulary, tmp_path / "out")))
    greedy = served.signatures["translate_greedy"](inputs=tf.constant(PHRASES))["translations"]
    assert [text.decode() for text in greedy.numpy()] == expected
    assert os.path.exists(tmp_path / "out" / "model.keras")
    assert np.isfinite(scores["exact"])
