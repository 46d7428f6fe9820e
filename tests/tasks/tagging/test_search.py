"""predict_tags and tag_sentences: single-pass tags for sentences that fit, windows against a
slow reference.

The taggers are tiny, with 16 positions, so that a long sentence is a few windows. One (a CRF
head, relative positions) is trained a few steps on EWT, so its tags vary with the context; the
other two have random weights: softmax with learned positions, and a model with an XPOS head.
"""

import doctest
import functools

import keras
import numpy as np
import pytest

from tests.data.test_tagger_vocabulary import SENTENCES as SMALL_SENTENCES
from tests.data.test_tagger_vocabulary import VOCABULARY as SMALL_VOCABULARY
from zoo.data import UPOS_TAGS, TaggerVocabulary, load_ud_english_ewt
from zoo.tasks.tagging.search import predict_tags, tag_sentences
from zoo.tasks.tagging import search as tagging_module
from zoo.tasks.tagging.search import tagging_windows
from zoo.layers import CRFLoss, crf_decode
from zoo.models import build_tagger, tagger_config

MAX_LENGTH = 16  # the taggers' positions: the default window


TRAIN = 600  # the EWT training sentences of the vocabulary and the training


@functools.cache
def ewt_vocabulary():
    """The vocabulary of 600 EWT training sentences: words seen twice, characters once, and
    their XPOS tags."""
    return TaggerVocabulary.build(load_ud_english_ewt("train")[:TRAIN], max_word_length=10)


@functools.cache
def trained_tagger(steps=40):
    """A tiny CRF tagger (relative positions) of :func:`ewt_vocabulary`, trained ``steps``
    batches of 16 EWT sentences of <= 16 words: its tags vary. Made once per session."""
    vocabulary = ewt_vocabulary()
    model = random_tagger(vocabulary, 0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CRFLoss())
    train = [s for s in load_ud_english_ewt("train")[:TRAIN] if len(s.words) <= MAX_LENGTH]
    encoded = vocabulary.encode(train[: 16 * steps], length=MAX_LENGTH)
    inputs = {"words": encoded["words"], "chars": encoded["chars"]}
    model.fit(inputs, encoded["upos"], batch_size=16, epochs=1, shuffle=False, verbose=0)
    return model


def random_tagger(vocabulary, seed, **overrides):
    """A tiny tagger of ``vocabulary`` with 16 positions and random weights of ``seed``."""
    keras.utils.set_random_seed(seed)
    config = tagger_config(
        "tiny", max_length=MAX_LENGTH, **{**vocabulary.config_overrides(), **overrides}
    )
    return build_tagger(config)


def long_sentence(sentences, length):
    """The words of consecutive ``sentences``, cut to ``length`` words."""
    words = [word for sentence in sentences for word in sentence.words]
    assert len(words) >= length
    return words[:length]


@pytest.fixture(scope="module")
def vocabulary():
    return ewt_vocabulary()


@pytest.fixture(scope="module")
def crf_model():
    return trained_tagger()


@pytest.fixture(scope="module")
def softmax_model(vocabulary):
    return random_tagger(vocabulary, 1, use_crf=False, position="learned")


@pytest.fixture(scope="module")
def xpos_model(vocabulary):
    return random_tagger(vocabulary, 2, num_xpos_tags=vocabulary.num_xpos_tags)


@pytest.fixture(params=["crf_model", "softmax_model"])
def model(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def dev():
    return [s.words for s in load_ud_english_ewt("dev")[:80]]


# ---------------------------------------------------------------- the slow references
def single_pass(model, vocabulary, words, head="upos"):
    """The tags of one model call on ``words`` alone (no batch, no padding)."""
    ids = predict_tags(model, vocabulary.encode([words]))
    ids = ids[head] if isinstance(ids, dict) else ids
    names = UPOS_TAGS if head == "upos" else vocabulary.xpos_tags
    return [names[i] for i in ids[0]]


def windowed_reference(model, vocabulary, words, window):
    """Each window tagged by itself; each word takes the tag of the window whose centre is
    nearest (the earlier window on a tie), found by trying every window."""
    n = len(words)
    if n <= window:
        return single_pass(model, vocabulary, words) if words else []
    stride = max(window // 2, 1)
    starts = []
    start = 0
    while start + window < n:
        starts.append(start)
        start += stride
    starts.append(n - window)
    tags = {s: single_pass(model, vocabulary, words[s : s + window]) for s in starts}
    result = []
    for i in range(n):
        holders = [s for s in starts if s <= i < s + window]
        best = min(holders, key=lambda s: (abs(2 * (i - s) - (window - 1)), s))
        result.append(tags[best][i - best])
    return result


# ---------------------------------------------------------------- predict_tags
def _small_tagger(**overrides):
    """A tiny tagger of the four sentences of tests/data/test_tagger_vocabulary.py."""
    return build_tagger(
        tagger_config("tiny", **{**SMALL_VOCABULARY.config_overrides(), **overrides})
    )


def _small_inputs():
    encoded = SMALL_VOCABULARY.encode(SMALL_SENTENCES)
    return {"words": encoded["words"], "chars": encoded["chars"]}


def test_predict_tags_decodes_each_head():
    inputs = _small_inputs()
    mask = inputs["words"] != 0
    crf_model = _small_tagger()
    want = np.asarray(crf_decode(crf_model(inputs), mask)[0])
    np.testing.assert_array_equal(predict_tags(crf_model, inputs, batch_size=3), want)
    softmax_model = _small_tagger(use_crf=False)
    want = np.where(mask, np.asarray(softmax_model(inputs)).argmax(-1), 0)
    np.testing.assert_array_equal(predict_tags(softmax_model, inputs, batch_size=3), want)


def test_predict_tags_decodes_the_xpos_head():
    num_xpos = SMALL_VOCABULARY.num_xpos_tags
    model = _small_tagger(num_xpos_tags=num_xpos)
    inputs = _small_inputs()
    predicted = predict_tags(model, inputs)
    assert predicted["xpos"].shape == (4, 5) and predicted["xpos"].max() < num_xpos
    outputs = model(inputs)
    for head in ("upos", "xpos"):
        want = np.asarray(crf_decode(outputs[head], inputs["words"] != 0)[0])
        np.testing.assert_array_equal(predicted[head], want)
    empty = {"words": np.zeros((0, 3), "int32"), "chars": np.zeros((0, 3, 10), "int32")}
    assert {k: v.shape for k, v in predict_tags(model, empty).items()} == {
        "upos": (0, 3), "xpos": (0, 3)
    }


# ---------------------------------------------------------------- the plan of windows
@pytest.mark.parametrize("window", range(1, 10))
def test_tagging_windows_against_the_nearest_centre_rule(window):
    stride = max(window // 2, 1)
    for n in range(0, 5 * window + 3):
        spans = tagging_windows(n, window)
        if n == 0:
            assert spans == []
            continue
        starts = [start for start, _, _ in spans]
        expected_starts = list(range(0, n - window, stride)) + [max(n - window, 0)]
        assert starts == expected_starts, (n, window)
        owner = []
        for k, (start, first, end) in enumerate(spans):
            assert start <= first < end <= start + window, (n, window, spans)
            owner += [k] * (end - first)
        assert len(owner) == n and owner == sorted(owner), (n, window, spans)  # a tiling
        for i in range(n):
            holders = [k for k, s in enumerate(starts) if s <= i < s + window]
            best = min(holders, key=lambda k: (abs(2 * (i - starts[k]) - (window - 1)), k))
            assert owner[i] == best, (n, window, i)


def test_tagging_windows_refuses_bad_arguments():
    with pytest.raises(ValueError, match="window must be a positive int"):
        tagging_windows(5, 0)
    with pytest.raises(ValueError, match="length must be an int >= 0"):
        tagging_windows(-1, 4)


# ---------------------------------------------------------------- tagging
def test_a_sentence_that_fits_is_tagged_in_one_pass(model, vocabulary, dev):
    sentences = [words for words in dev if len(words) <= MAX_LENGTH][:30]
    sentences.append(long_sentence(load_ud_english_ewt("dev")[:5], MAX_LENGTH))  # exactly fits
    tags = tag_sentences(model, vocabulary, sentences, batch_size=7)
    assert tags == [single_pass(model, vocabulary, words) for words in sentences]
    assert tags == tag_sentences(model, vocabulary, sentences, window=MAX_LENGTH)
    assert len({tag for sentence in tags for tag in sentence}) > 3  # the tags vary


@pytest.mark.parametrize("window", [MAX_LENGTH, 7, 4, 1])
def test_long_sentences_equal_the_window_by_window_reference(model, vocabulary, window):
    sentences = load_ud_english_ewt("dev")[:12]
    long = [long_sentence(sentences, n) for n in (3 * window, 3 * window + 5, window + 1)]
    batch = [long[0], [], long[1], ["A", "dog", "."], long[2]]
    tags = tag_sentences(model, vocabulary, batch, window=window, batch_size=3)
    assert [len(t) for t in tags] == [len(words) for words in batch]
    for words, tagged in zip(batch, tags):
        assert tagged == windowed_reference(model, vocabulary, words, window)


def test_overlapping_windows_are_not_disjoint_pieces(crf_model, vocabulary):
    # The reference test can fail: cutting the sentence into disjoint pieces of the window
    # (every word at some piece's edge loses context) gives other tags than the windows.
    words = long_sentence(load_ud_english_ewt("dev")[:12], 3 * MAX_LENGTH)
    windowed = tag_sentences(crf_model, vocabulary, [words], window=8)[0]
    pieces = [w for start in range(0, len(words), 8) for w in [words[start : start + 8]]]
    disjoint = [tag for piece in pieces for tag in single_pass(crf_model, vocabulary, piece)]
    assert len(windowed) == len(disjoint) == len(words)
    assert windowed != disjoint


def test_empty_sentences_and_batches(crf_model, vocabulary):
    assert tag_sentences(crf_model, vocabulary, []) == []
    assert tag_sentences(crf_model, vocabulary, [[]]) == [[]]
    tags = tag_sentences(crf_model, vocabulary, [[], ("The", "cat"), []])
    assert tags == [[], single_pass(crf_model, vocabulary, ["The", "cat"]), []]


def test_the_xpos_head(xpos_model, vocabulary, dev):
    short = [words for words in dev if len(words) <= MAX_LENGTH][:10]
    sentences = short + [long_sentence(load_ud_english_ewt("dev")[:12], 40)]
    xpos = tag_sentences(xpos_model, vocabulary, sentences, head="xpos")
    upos = tag_sentences(xpos_model, vocabulary, sentences)
    assert [len(t) for t in xpos] == [len(t) for t in upos] == [len(s) for s in sentences]
    assert set(tag for t in xpos for tag in t) <= set(vocabulary.xpos_tags)
    assert set(tag for t in upos for tag in t) <= set(UPOS_TAGS)
    for words, tagged in zip(short, xpos):
        assert tagged == single_pass(xpos_model, vocabulary, words, head="xpos")


def test_bad_arguments_are_refused(crf_model, vocabulary):
    with pytest.raises(TypeError, match="list of words"):
        tag_sentences(crf_model, vocabulary, ["The cat sat ."])
    with pytest.raises(TypeError, match="a list of sentences"):
        tag_sentences(crf_model, vocabulary, "The cat sat .")
    with pytest.raises(TypeError, match="A word must be a str"):
        tag_sentences(crf_model, vocabulary, [["The", 3]])
    with pytest.raises(ValueError, match="more than the model's max_length=16"):
        tag_sentences(crf_model, vocabulary, [["a"]], window=MAX_LENGTH + 1)
    with pytest.raises(ValueError, match="window must be a positive int"):
        tag_sentences(crf_model, vocabulary, [["a"]], window=0)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        tag_sentences(crf_model, vocabulary, [["a"]], batch_size=0)
    with pytest.raises(ValueError, match=r"head='xpos': the model has the heads \['upos'\]"):
        tag_sentences(crf_model, vocabulary, [["a"]], head="xpos")
    other = TaggerVocabulary(["a", "b"], vocabulary.chars, max_word_length=10)
    with pytest.raises(ValueError, match="not its vocabulary"):
        tag_sentences(crf_model, other, [["a"]])
    with pytest.raises(ValueError, match="XPOS head has 3 classes"):
        tag_sentences(random_tagger(vocabulary, 3, num_xpos_tags=3), vocabulary, [["a"]])
    with pytest.raises(ValueError, match="not a tagger"):
        tag_sentences(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), vocabulary,
                      [["a"]])  # fmt: skip


def test_the_default_window_survives_the_keras_file(crf_model, vocabulary, tmp_path):
    crf_model.save(tmp_path / "tagger.keras")
    reloaded = keras.models.load_model(tmp_path / "tagger.keras")
    words = long_sentence(load_ud_english_ewt("dev")[:12], 2 * MAX_LENGTH + 3)
    assert tagging_module.tagger_window(reloaded, vocabulary) == MAX_LENGTH
    assert tag_sentences(reloaded, vocabulary, [words]) == tag_sentences(
        crf_model, vocabulary, [words]
    )


def test_docstring_examples_run():
    result = doctest.testmod(tagging_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_padding_in_a_batch_never_moves_a_tag(crf_model, vocabulary, dev):
    # tag_sentences pads each batch to its longest window; padding never moves a tag.
    sentences = dev[:20]
    alone = [tag_sentences(crf_model, vocabulary, [words])[0] for words in sentences]
    assert tag_sentences(crf_model, vocabulary, sentences, batch_size=64) == alone
    assert np.mean([len(t) for t in alone]) > 5


def test_verbose_draws_a_progress_bar_on_stderr(crf_model, vocabulary, dev, capsys):
    sentences = dev[:10] + [long_sentence(load_ud_english_ewt("dev")[:12], 3 * MAX_LENGTH)]
    quiet = tag_sentences(crf_model, vocabulary, sentences, batch_size=4)
    assert capsys.readouterr() == ("", "")
    loud = tag_sentences(crf_model, vocabulary, sentences, batch_size=4, verbose=True)
    out, err = capsys.readouterr()
    assert loud == quiet and out == ""
    windows = sum(len(tagging_windows(len(words), MAX_LENGTH)) for words in sentences)
    assert f"{windows}/{windows}" in err and "windows" in err


def test_alltags_counts_a_word_right_when_every_tag_head_is():
    """AllTags as the CoNLL 2018 script counts it: UPOS, XPOS and the universal features all
    right; a layered feature (Number[psor]) is not compared; heads the model lacks are not."""
    from zoo.data import Sentence
    from zoo.tasks.tagging.validation import alltags_accuracy

    gold = [Sentence(("a", "b", "c", "d"), ("DET", "NOUN", "VERB", "X"), ("DT", "NN", "VB", "X"),
                     feats=("_", "Number=Sing|Number[psor]=Plur", "Tense=Past", "_"))]
    predicted = {"upos": [["DET", "NOUN", "VERB", "X"]], "xpos": [["DT", "NN", "VB", "FW"]],
                 "feats": [["_", "Number=Sing", "Tense=Pres", "_"]]}  # fmt: skip
    assert alltags_accuracy(gold, predicted) == 50.0  # a, b right; c's feats, d's XPOS wrong
    del predicted["feats"]
    assert alltags_accuracy(gold, predicted) == 75.0
