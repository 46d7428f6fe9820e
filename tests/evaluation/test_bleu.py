import json

import pytest
import sacrebleu

from zoo.evaluation import corpus_bleu, save_evaluation

HYPOTHESES = ["Ein Mann fährt Fahrrad .", "zwei hunde spielen im schnee ."]
REFERENCES = ["Ein Mann fährt ein Fahrrad .", "Zwei Hunde spielen im Schnee ."]


def test_two_ways_match_sacrebleu_directly():
    scores = corpus_bleu(HYPOTHESES, REFERENCES)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    lowered = sacrebleu.corpus_bleu([h.lower() for h in HYPOTHESES], [[r.lower() for r in REFERENCES]])
    assert scores["bleu_lowercase"] == pytest.approx(lowered.score)
    assert scores["bleu_lowercase"] > scores["bleu"]  # the second sentence differs only in case
    assert "case:lc" in scores["bleu_lowercase_signature"] and "tok:13a" in scores["bleu_signature"]


def test_misaligned_inputs_are_an_error():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(HYPOTHESES, REFERENCES[:1])


def test_hypotheses_are_saved_next_to_the_score(tmp_path):
    scores = save_evaluation(str(tmp_path), "val.beam5", ["a", "b"], HYPOTHESES, REFERENCES)
    lines = (tmp_path / "val.beam5.hyp.txt").read_text(encoding="utf-8").splitlines()
    assert lines == HYPOTHESES
    saved = json.loads((tmp_path / "val.beam5.bleu.json").read_text())
    assert saved["bleu"] == scores["bleu"] and saved["sentences"] == 2
