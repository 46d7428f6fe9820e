"""The CoNLL 2018 tagging figures on hand-made files, each definition counted by hand."""

import gzip

import pytest

from zoo.evaluation import conll18_scores, universal_features


def line(i, form, lemma="_", upos="NOUN", xpos="NN", feats="_"):
    return f"{i}\t{form}\t{lemma}\t{upos}\t{xpos}\t{feats}\t0\troot\t_\t_\n"


GOLD = (
    "# sent_id = 1\n"
    "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"  # a multiword token: its two words count, it doesn't
    + line(1, "do", "do", "AUX", "VBP", "Mood=Ind|Tense=Pres")
    + line(2, "n't", "not", "PART", "RB", "Polarity=Neg")
    + "2.1\tghost\t_\t_\t_\t_\t_\t_\t_\t_\n"  # an empty node: not a word
    + line(3, "go", "_", "VERB", "VB", "VerbForm=Inf|Typo=Yes")
    + "\n"
    + line(1, "New York", "New York", "PROPN", "NNP", "Number=Sing")
    + "\n"
)


def system(*rows):
    text = "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    text += line(1, "do", *rows[0]) + line(2, "n't", *rows[1])
    return text + line(3, "go", *rows[2]) + "\n" + line(1, "NewYork", *rows[3]) + "\n"


def scores(tmp_path, system_text, gzipped=False):
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOLD, encoding="utf-8")
    path = tmp_path / ("system.conllu" + (".gz" if gzipped else ""))
    data = system_text.encode()
    path.write_bytes(gzip.compress(data) if gzipped else data)
    return conll18_scores(gold, path)


def test_each_figure_as_the_shared_task_defines_it(tmp_path):
    result = scores(tmp_path, system(
        ("do", "AUX", "VBP", "Tense=Pres|Mood=Ind"),  # all right; features in another order
        ("no", "PART", "XX", "Polarity=Neg"),  # XPOS and lemma wrong
        ("went", "VERB", "VB", "VerbForm=Inf"),  # Typo is not universal; gold lemma "_": right
        ("New York", "NOUN", "NNP", "_"),  # UPOS and UFeats wrong
    ), gzipped=True)
    assert result["words"] == 4  # do, n't, go, New York: not the token don't, not the node
    assert result["correct"] == {"UPOS": 3, "XPOS": 3, "UFeats": 3, "AllTags": 2, "Lemmas": 3}
    assert result["UPOS"] == 75.0 and result["AllTags"] == 50.0


def test_universal_features_only_sorted():
    assert universal_features("Typo=Yes|Number[psor]=Plur|Case=Nom|Animacy=Anim") == (
        "Animacy=Anim|Case=Nom")
    assert universal_features("_") == "" and universal_features("Typo=Yes") == ""


def test_another_tokenization_is_refused_naming_where(tmp_path):
    rows = [("x", "NOUN", "NN", "_")] * 4
    other = system(*rows).replace("\tgo\t", "\tgone\t")
    with pytest.raises(ValueError, match="system.conllu, line 1: its words differ from sentence "
                                         "1 .*not the gold tokenization"):
        scores(tmp_path, other)
    shorter = system(*rows).split("\n\n")[0] + "\n\n"
    with pytest.raises(ValueError, match="ends before sentence 2"):
        scores(tmp_path, shorter)
    with pytest.raises(ValueError, match="a sentence after the last"):
        scores(tmp_path, system(*rows) + line(1, "more") + "\n")
