"""make_tagging_dataset: every word once per epoch, the word budget, word dropout, XPOS labels."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.data import UPOS_TAGS, Sentence, TaggerVocabulary, load_ud_english_ewt
from zoo.data import DataPosition, make_tagging_dataset, skip_done
from zoo.data import split_long_sentences
from tests.models.tagger_reference import encode
from zoo.models import TaggerPreprocessor

SENTENCES = load_ud_english_ewt("dev")[:300]
VOCABULARY = TaggerVocabulary.build(SENTENCES, max_word_length=12)
PREPROCESSOR = TaggerPreprocessor(VOCABULARY)  # encodes the words, as tagging does


def _epoch(ds):
    return [(f["words"].numpy(), f["chars"].numpy(), labels) for f, labels in ds]


def test_one_epoch_holds_every_sentence_once_within_the_budget():
    ds = make_tagging_dataset(SENTENCES, PREPROCESSOR, batch_tokens=256, max_length=64, seed=1)
    expected = encode(VOCABULARY, split_long_sentences(SENTENCES, 64))
    # Each sentence, as (words, upos) tuples, from the reference encoder and from the dataset.
    want = sorted(
        (tuple(w[w != 0]), tuple(u[w != 0])) for w, u in zip(expected["words"], expected["upos"])
    )
    got = []
    for words, chars, upos in _epoch(ds):
        assert words.size <= 256, words.shape  # the word budget, padding included
        assert chars.shape == words.shape + (12,)
        for w, u in zip(words, upos.numpy()):
            got.append((tuple(w[w != 0]), tuple(u[w != 0])))
    assert sorted(got) == want


def test_characters_match_the_vocabulary_and_padding_is_zero():
    ds = make_tagging_dataset(SENTENCES[:20], PREPROCESSOR, shuffle=False)
    assert ds.options().autotune.enabled is False  # as the translation pipeline's (prefetched)
    by_words = {}
    encoded = encode(VOCABULARY, SENTENCES[:20])
    for w, c in zip(encoded["words"], encoded["chars"]):
        by_words[tuple(w[w != 0])] = c[w != 0]
    for words, chars, _ in _epoch(ds):
        for w, c in zip(words, chars):
            real = w != 0
            np.testing.assert_array_equal(c[real], by_words[tuple(w[real])])
            assert not c[~real].any()



def test_the_parts_of_an_epoch_are_disjoint_and_make_it_whole():
    def sentences(ds):
        return sorted(tuple(w[w != 0]) for words, _, _ in _epoch(ds) for w in words)

    whole = sentences(make_tagging_dataset(SENTENCES, PREPROCESSOR))
    for epoch in (0, 1):
        parts = [sentences(make_tagging_dataset(SENTENCES, PREPROCESSOR, seed=1,
                                                epoch=tf.Variable(epoch, dtype=tf.int64),
                                                part=(index, 2)))
                 for index in (0, 1)]  # fmt: skip
        # Every other sentence of the epoch's one order: a part each, together the epoch.
        assert abs(len(parts[0]) - len(parts[1])) <= 1
        assert sorted(parts[0] + parts[1]) == whole
    with pytest.raises(ValueError, match="part of an epoch needs a seed"):
        make_tagging_dataset(SENTENCES, PREPROCESSOR, part=(0, 2))

def test_word_dropout_replaces_words_by_oov_and_keeps_characters():
    kept = make_tagging_dataset(SENTENCES, PREPROCESSOR, shuffle=False)
    dropped = make_tagging_dataset(SENTENCES, PREPROCESSOR, shuffle=False, word_dropout=0.5,
                                   seed=3)  # fmt: skip
    changed = total = 0
    for (w0, c0, u0), (w1, c1, u1) in zip(_epoch(kept), _epoch(dropped)):
        np.testing.assert_array_equal(c0, c1)
        np.testing.assert_array_equal(u0.numpy(), u1.numpy())
        assert np.all((w1 == w0) | (w1 == 1))  # a word is kept or becomes OOV
        assert np.all((w1 == 0) == (w0 == 0))  # padding stays padding
        changed += int(((w1 != w0)).sum())
        total += int((w0 > 1).sum())
    assert 0.4 < changed / total < 0.6


def test_word_dropout_is_a_function_of_the_epoch_and_the_batch_place_alone():
    """A resumed run builds its pipeline afresh and skips the batches done (skip_done): it
    must drop the words the interrupted run dropped, and another epoch others."""
    def batches(epoch, skip=0, shuffle=True):
        position = DataPosition()
        position.set(epoch, skip=skip)
        ds = make_tagging_dataset(SENTENCES[:120], PREPROCESSOR, word_dropout=0.3, seed=5,
                                  epoch=position.epoch, shuffle=shuffle)
        return [words for words, _, _ in _epoch(skip_done(ds, position))]

    first = batches(1)
    assert len(first) > 3
    for a, b in zip(batches(1, skip=2), first[2:], strict=True):  # resumed at batch 2
        np.testing.assert_array_equal(a, b)
    # In one order, each epoch drops other words.
    one, two = batches(1, shuffle=False), batches(2, shuffle=False)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a == 0, b == 0)
    assert sum(int(((a == 1) != (b == 1)).sum()) for a, b in zip(one, two)) > 20


def test_xpos_labels_and_long_sentences_split_without_loss():
    long = Sentence(
        words=tuple(f"w{i}" for i in range(70)), upos=("NOUN",) * 70, xpos=("NN",) * 70, sent_id="x"
    )
    pieces = split_long_sentences([long], 32)
    assert [len(p.words) for p in pieces] == [32, 32, 6]
    assert [p.sent_id for p in pieces] == ["x/1", "x/2", "x/3"]
    vocabulary = TaggerVocabulary.build([long] + SENTENCES[:50])
    ds = make_tagging_dataset([long], TaggerPreprocessor(vocabulary), batch_tokens=64,
                              max_length=32, xpos=True)  # fmt: skip
    lengths, nouns, nn = [], UPOS_TAGS.index("NOUN"), vocabulary.xpos_tags.index("NN")
    for features, labels in ds:
        real = features["words"].numpy() != 0
        lengths += list(real.sum(1))
        assert np.all(labels["upos"].numpy()[real] == nouns)
        assert np.all(labels["xpos"].numpy()[real] == nn)
    assert sorted(lengths) == [6, 32, 32]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="empty"):
        make_tagging_dataset([], PREPROCESSOR)
    with pytest.raises(ValueError, match="word_dropout"):
        make_tagging_dataset(SENTENCES, PREPROCESSOR, word_dropout=1.0)
    with pytest.raises(ValueError, match="XPOS"):
        make_tagging_dataset(SENTENCES, TaggerPreprocessor(TaggerVocabulary.build([["a", "b"]])),
                             xpos=True)  # fmt: skip
    odd = Sentence(words=("a",), upos=("NOPE",), xpos=("NN",), sent_id="odd-1")
    with pytest.raises(ValueError, match="odd-1.*NOPE"):
        make_tagging_dataset([odd], PREPROCESSOR)


def test_an_xpos_tag_that_training_never_saw_is_an_error_label_in_validation_only():
    seen = Sentence(("a", "b"), ("DET", "NOUN"), ("DT", "NN"))
    unseen = Sentence(("a", "b"), ("DET", "NOUN"), ("DT", "NEW"), sent_id="v1")
    vocabulary = TaggerVocabulary.build([seen], min_count=1)
    with pytest.raises(ValueError, match="'v1'.*xpos tag 'NEW' is not in the vocabulary"):
        make_tagging_dataset([unseen], TaggerPreprocessor(vocabulary), xpos=True, shuffle=False)
    ds = make_tagging_dataset([unseen], TaggerPreprocessor(vocabulary), xpos=True, shuffle=False,
                              unseen_tags="error")  # fmt: skip
    (_, labels), = list(ds)
    # -1: no prediction (an index 0..K-1) equals it, so the accuracy counts it as wrong.
    assert labels["xpos"].numpy().tolist() == [[vocabulary.xpos_tags.index("DT"), -1]]
    with pytest.raises(ValueError, match="unseen_tags must be"):
        make_tagging_dataset([seen], TaggerPreprocessor(vocabulary), unseen_tags="skip")


def test_feats_and_lemma_labels_and_their_unseen_classes():
    """Every head's labels: FEATS bundles as classes, the lemma as its edit script (so a new
    word of a known pattern has a known label); classes training never had are counted."""
    train = Sentence(("cats", "ran"), ("NOUN", "VERB"), ("NNS", "VBD"),
                     lemmas=("cat", "run"), feats=("Number=Plur", "Tense=Past"))  # fmt: skip
    dev = Sentence(("dogs", "went"), ("NOUN", "VERB"), ("NNS", "VBD"), sent_id="d1",
                   lemmas=("dog", "go"), feats=("Number=Plur", "Mood=Ind|Tense=Past"))
    vocabulary = TaggerVocabulary.build([train], min_count=1, feats=True, lemmas=True)
    heads = ("upos", "xpos", "feats", "lemma")
    counts = {}
    ds = make_tagging_dataset([dev], TaggerPreprocessor(vocabulary), heads=heads, shuffle=False,
                              unseen_tags="error", unseen_counts=counts)  # fmt: skip
    (_, labels), = list(ds)
    assert set(labels) == set(heads)
    assert labels["feats"].numpy().tolist() == [[vocabulary.feats_tags.index("Number=Plur"), -1]]
    # "dogs" -> "dog" is the script of "cats" -> "cat"; "went" -> "go" is new.
    script = vocabulary.lemma_scripts.index(vocabulary.gold_classes("lemma", train)[0])
    assert labels["lemma"].numpy().tolist() == [[script, -1]]
    assert counts == {"upos": 0, "xpos": 0, "feats": 1, "lemma": 1}
    with pytest.raises(ValueError, match="'d1'.*feats tag 'Mood=Ind|Tense=Past'"):
        make_tagging_dataset([dev], TaggerPreprocessor(vocabulary), heads=heads, shuffle=False)
