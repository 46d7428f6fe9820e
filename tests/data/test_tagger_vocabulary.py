"""TaggerVocabulary: word and character ids, lowercasing, long words, labels, the JSON file."""

import json

import numpy as np
import pytest

from zoo.data import UPOS_TAGS, Sentence, TaggerVocabulary
from zoo.data.tagger_vocabulary import BOW_ID, EOW_ID, OOV_ID, PAD_ID


def _sentence(pairs, sent_id):
    words, upos, xpos = zip(*(p.split("/") for p in pairs.split()))
    return Sentence(words=words, upos=upos, xpos=xpos, sent_id=sent_id)


SENTENCES = [
    _sentence("The/DET/DT cat/NOUN/NN sat/VERB/VBD ./PUNCT/.", "a"),
    _sentence("the/DET/DT dog/NOUN/NN ran/VERB/VBD quickly/ADV/RB ./PUNCT/.", "b"),
    _sentence("A/DET/DT cat/NOUN/NN ran/VERB/VBD ./PUNCT/.", "c"),
    _sentence("Dogs/NOUN/NNS bark/VERB/VBP !/PUNCT/.", "d"),
]
VOCABULARY = TaggerVocabulary.build(SENTENCES, min_count=2, max_word_length=10)


def test_vocabulary_ids_counts_and_lowercasing():
    # "the" (2, after lowercasing "The"), "cat" (2), "ran" (2) and "." (3) reach min_count=2.
    assert VOCABULARY.words == (".", "cat", "ran", "the")
    assert VOCABULARY.word_vocab_size == 6
    the = 2 + VOCABULARY.words.index("the")
    assert VOCABULARY.word_id("THE") == VOCABULARY.word_id("the") == the
    assert VOCABULARY.word_id("dog") == OOV_ID  # seen once
    cased = TaggerVocabulary.build(SENTENCES, min_count=1, lowercase=False)
    assert cased.word_id("The") != cased.word_id("the") and cased.word_id("THE") == OOV_ID
    # Characters keep case, the most frequent first; the four special ids come before them.
    assert "T" in VOCABULARY.chars and "t" in VOCABULARY.chars
    assert VOCABULARY.char_vocab_size == len(VOCABULARY.chars) + 4
    assert VOCABULARY.xpos_tags == (".", "DT", "NN", "NNS", "RB", "VBD", "VBP")


def test_encode_pads_marks_words_and_labels_tags():
    encoded = VOCABULARY.encode(SENTENCES)
    assert set(encoded) == {"words", "chars", "upos", "xpos"}
    assert encoded["words"].shape == (4, 5) and encoded["chars"].shape == (4, 5, 10)
    assert all(a.dtype == np.int32 for a in encoded.values())
    assert encoded["words"][0, 4] == PAD_ID and not encoded["chars"][0, 4].any()
    assert encoded["words"][3, 0] == OOV_ID  # "Dogs"
    cat = encoded["chars"][0, 1]
    letters = [VOCABULARY.char_ids(letter)[1] for letter in "cat"]
    np.testing.assert_array_equal(cat[:5], [BOW_ID, *letters, EOW_ID])
    assert not cat[5:].any()
    assert encoded["upos"][1].tolist() == [UPOS_TAGS.index(t) for t in SENTENCES[1].upos]
    assert encoded["xpos"][1, 3] == VOCABULARY.xpos_tags.index("RB")
    assert encoded["upos"][0, 4] == 0  # labels are 0 at padding
    # Unknown characters are OOV; plain word lists give inputs only.
    plain = VOCABULARY.encode([["ζ"]])
    assert set(plain) == {"words", "chars"}
    assert plain["chars"][0, 0, :3].tolist() == [BOW_ID, OOV_ID, EOW_ID]


def test_long_words_keep_their_prefix_and_suffix():
    vocabulary = TaggerVocabulary.build([list("abcdefghijklmnop")], min_count=1, max_word_length=7)
    ids = vocabulary.char_ids("abcdefghijklmnop")
    assert len(ids) == 7
    inverse = {i: c for c, i in ((c, vocabulary.char_ids(c)[1]) for c in "abcdefghijklmnop")}
    assert "".join(inverse[i] for i in ids[1:-1]) == "abcop"  # 5 of room: 3 first, 2 last
    assert (ids[0], ids[-1]) == (BOW_ID, EOW_ID)


def test_encode_length_and_unknown_tags_are_errors():
    assert VOCABULARY.encode(SENTENCES[:1], length=7)["words"].shape == (1, 7)
    with pytest.raises(ValueError, match="more than length=3"):
        VOCABULARY.encode(SENTENCES[:1], length=3)
    odd = _sentence("cat/NOUN/XX", "odd")
    with pytest.raises(ValueError, match="'XX' is not in the vocabulary"):
        VOCABULARY.encode([odd])


def test_vocabulary_json_round_trip(tmp_path):
    sentences = SENTENCES + [_sentence("Größe/NOUN/NN", "u")]
    vocabulary = TaggerVocabulary.build(sentences, min_count=1)
    path = tmp_path / "vocabulary.json"
    vocabulary.save(path)
    loaded = TaggerVocabulary.load(path)
    assert loaded == vocabulary and loaded.chars == vocabulary.chars
    for key, value in vocabulary.encode(SENTENCES).items():
        np.testing.assert_array_equal(loaded.encode(SENTENCES)[key], value)
    path.write_text(json.dumps({"words": []}))
    with pytest.raises(ValueError, match="not a TaggerVocabulary file"):
        TaggerVocabulary.load(path)


def test_head_classes_rare_words_and_the_json_round_trip(tmp_path):
    """FEATS bundles and lemma scripts are kept when asked; every training word is known
    (seen_in_training), those without an id too; all of it survives save and load, and a
    file saved before rare words were kept loads with seen_in_training None."""
    tagged = [Sentence(("Cats", "ran"), ("NOUN", "VERB"), ("NNS", "VBD"),
                       lemmas=("cat", "run"), feats=("Number=Plur", "_"))]  # fmt: skip
    vocabulary = TaggerVocabulary.build(tagged, min_count=2, feats=True, lemmas=True)
    assert vocabulary.classes("feats") == ("Number=Plur", "_")
    assert vocabulary.classes("upos") == UPOS_TAGS and len(vocabulary.classes("lemma")) == 2
    # A script applied to its form; one that would cut the whole form leaves the form itself.
    assert vocabulary.column_values("lemma", ["Dogs", "s"], ["l:0:1:0:", "l:0:1:0:"]) == [
        "dog", "s"]
    assert vocabulary.column_values("feats", ["Dogs"], ["Number=Plur"]) == ["Number=Plur"]
    assert vocabulary.words == () and vocabulary.rare_words == ("cats", "ran")
    assert vocabulary.seen_in_training("CATS") and not vocabulary.seen_in_training("dogs")
    path = tmp_path / "vocabulary.json"
    vocabulary.save(path)
    assert TaggerVocabulary.load(path) == vocabulary
    assert TaggerVocabulary.build(tagged).classes("feats") == ()  # not asked: none kept
    old = json.loads(path.read_text(encoding="utf-8"))
    for key in ("feats_tags", "lemma_scripts", "rare_words"):
        del old[key]
    path.write_text(json.dumps(old), encoding="utf-8")
    assert TaggerVocabulary.load(path).seen_in_training("cats") is None
    with pytest.raises(ValueError, match="Unknown tagger head 'deprel'"):
        vocabulary.classes("deprel")
