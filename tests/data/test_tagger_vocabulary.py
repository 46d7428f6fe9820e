"""TaggerVocabulary: word and character ids (as the tagger's preprocessor looks them up),
lowercasing, long words, the classes of each head, the JSON file."""

import json

import numpy as np
import pytest
import tensorflow as tf

from zoo.data import UPOS_TAGS, Sentence, TaggerVocabulary
from zoo.data.tagger_vocabulary import BOW_ID, EOW_ID, OOV_ID
from zoo.models import TaggerPreprocessor


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


def _ids(vocabulary, words):
    """The word ids ``(N,)`` and character ids ``(N, C)`` of ``words``."""
    word_ids, char_ids = TaggerPreprocessor(vocabulary).encode(tf.constant(words, tf.string))
    return word_ids.numpy(), char_ids.numpy()


def _word_id(vocabulary, word):
    return int(_ids(vocabulary, [word])[0][0])


def test_vocabulary_ids_counts_and_lowercasing():
    # "the" (2, after lowercasing "The"), "cat" (2), "ran" (2) and "." (3) reach min_count=2.
    assert VOCABULARY.words == (".", "cat", "ran", "the")
    assert VOCABULARY.word_vocab_size == 6
    the = 2 + VOCABULARY.words.index("the")
    assert _word_id(VOCABULARY, "THE") == _word_id(VOCABULARY, "the") == the
    assert _word_id(VOCABULARY, "dog") == OOV_ID  # seen once
    cased = TaggerVocabulary.build(SENTENCES, min_count=1, lowercase=False)
    assert _word_id(cased, "The") != _word_id(cased, "the")
    assert _word_id(cased, "THE") == OOV_ID
    # Characters keep case, the most frequent first; the four special ids come before them.
    assert "T" in VOCABULARY.chars and "t" in VOCABULARY.chars
    assert VOCABULARY.char_vocab_size == len(VOCABULARY.chars) + 4
    assert VOCABULARY.xpos_tags == (".", "DT", "NN", "NNS", "RB", "VBD", "VBP")


def test_words_are_marked_and_unknown_ones_are_oov():
    word_ids, char_ids = _ids(VOCABULARY, ["cat", "Dogs", "ζ"])
    assert char_ids.shape == (3, 10) and char_ids.dtype == np.int32
    assert word_ids[1] == OOV_ID  # "Dogs"
    letters = [VOCABULARY.chars.index(letter) + 4 for letter in "cat"]
    np.testing.assert_array_equal(char_ids[0, :5], [BOW_ID, *letters, EOW_ID])
    assert not char_ids[0, 5:].any()
    assert char_ids[2, :3].tolist() == [BOW_ID, OOV_ID, EOW_ID]  # an unknown character


def test_long_words_keep_their_prefix_and_suffix():
    vocabulary = TaggerVocabulary.build([list("abcdefghijklmnop")], min_count=1, max_word_length=7)
    ids = _ids(vocabulary, ["abcdefghijklmnop"])[1][0]
    assert len(ids) == 7
    inverse = {vocabulary.chars.index(c) + 4: c for c in "abcdefghijklmnop"}
    assert "".join(inverse[i] for i in ids[1:-1]) == "abcop"  # 5 of room: 3 first, 2 last
    assert (ids[0], ids[-1]) == (BOW_ID, EOW_ID)


def test_vocabulary_json_round_trip(tmp_path):
    sentences = SENTENCES + [_sentence("Größe/NOUN/NN", "u")]
    vocabulary = TaggerVocabulary.build(sentences, min_count=1)
    path = tmp_path / "vocabulary.json"
    vocabulary.save(path)
    loaded = TaggerVocabulary.load(path)
    assert loaded == vocabulary and loaded.chars == vocabulary.chars
    words = [word for sentence in sentences for word in sentence.words]
    for loaded_ids, ids in zip(_ids(loaded, words), _ids(vocabulary, words)):
        np.testing.assert_array_equal(loaded_ids, ids)
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
    # The preprocessor's decoding: a script applied to its form (one that would cut the whole
    # form leaves the form itself); a bundle by its id.
    preprocessor, script = TaggerPreprocessor(vocabulary), vocabulary.class_id("lemma", "l:0:1:0:")
    lemmas = preprocessor.decode("lemma", tf.constant([script] * 2), tf.constant(["Dogs", "s"]))
    assert lemmas.numpy().tolist() == [b"dog", b"s"]
    feats = preprocessor.decode("feats", tf.constant([0]), tf.constant(["Dogs"]))
    assert feats.numpy().tolist() == [b"Number=Plur"]
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
