"""Tagging accuracy: the counts by hand, and evaluate_tagger's report and files."""

import json

import keras
import pytest

import zoo  # noqa: F401  (registers the layers)
from tests.models.tagger_reference import encode
from tests.models.test_tagger_task import ewt  # EWT read once per process
from zoo.data import TaggerVocabulary
from zoo.evaluation import tagging_accuracy
from zoo.models import Tagger, build_tagger, tagger_config
from zoo.tasks.tagging.evaluation import evaluate_tagger



def test_accuracy_overall_and_on_oov_words_by_hand():
    gold = [["DET", "NOUN", "VERB"], ["PRON"]]
    predicted = [["DET", "VERB", "VERB"], ["NOUN"]]
    oov = [[False, True, True], [False]]
    assert tagging_accuracy(gold, predicted, oov) == {
        "accuracy": 50.0, "tokens": 4, "oov_accuracy": 50.0, "oov_tokens": 2
    }
    assert tagging_accuracy([[]], [[]], [[]])["accuracy"] is None
    with pytest.raises(ValueError, match="Sentence 1: 1 gold tags but 2 predicted"):
        tagging_accuracy(gold, [predicted[0], ["A", "B"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        tagging_accuracy(gold, predicted[:1])


def test_evaluate_tagger_scores_the_tags_and_writes_them(tmp_path, capsys):
    # A tiny tagger with every head, its vocabulary of 200 training sentences (dev has OOVs).
    vocabulary = TaggerVocabulary.build(ewt("train")[:200], max_word_length=10,
                                        feats=True, lemmas=True)  # fmt: skip
    sizes = {field: len(vocabulary.classes(head)) for head, field in
             (("xpos", "num_xpos_tags"), ("feats", "num_feats_tags"),
              ("lemma", "num_lemma_scripts"))}  # fmt: skip
    keras.utils.set_random_seed(0)
    config = tagger_config("tiny", **vocabulary.config_overrides(), **sizes)
    tagger = Tagger.from_backbone(build_tagger(config), vocabulary)
    sentences = list(ewt("dev")[:40])
    capsys.readouterr()
    report = evaluate_tagger(tagger, "dev", str(tmp_path), sentences=sentences, verbose=True)
    out, err = capsys.readouterr()
    assert out == "" and "40/40" in err and "sentences" in err  # the bar, on stderr only
    predicted = [[token["upos"] for token in sentence]
                 for sentence in tagger.tag([list(s.words) for s in sentences])]  # fmt: skip
    word_ids = encode(vocabulary, [s.words for s in sentences])["words"]
    oov = [list(ids[: len(s.words)] == 1) for s, ids in zip(sentences, word_ids)]
    assert report["upos"] == tagging_accuracy([list(s.upos) for s in sentences], predicted, oov)
    assert report["upos"]["oov_tokens"] > 0
    with open(tmp_path / "dev.json") as f:
        assert json.load(f) == report
    with open(tmp_path / "dev.tags.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    heads = ["upos", "xpos", "feats", "lemma"]  # the tagger has every head
    assert sorted(report) == sorted(heads + ["split"])
    assert rows[0] == ["word", *(f"{side}_{head}" for head in heads
                                 for side in ("gold", "predicted")), "oov"]  # fmt: skip
    assert len(rows) - 1 == report["upos"]["tokens"]
    first = sentences[0]
    assert rows[1][:3] == [first.words[0], first.upos[0], predicted[0][0]]
    assert rows[1][5] == first.feats[0] and rows[1][7] == first.lemmas[0]  # gold FEATS, LEMMA
    assert rows[1][-1] == str(int(oov[0][0]))
