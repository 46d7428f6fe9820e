"""The Tagger task model's tagging: single-pass tags for sentences that fit, windows against a
slow reference (one model call per window, crf_decode or the argmax, Python's encoding).

The taggers are tiny, with 16 positions, so that a long sentence is a few windows. One (a CRF
head, relative positions) is trained a few steps on EWT, so its tags vary with the context; the
other two have random weights: softmax with learned positions, and a model with an XPOS head.
"""

import doctest
import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import fit_built
from tests.models.tagger_reference import encode, tag_sentences
from zoo.data import UPOS_TAGS, TaggerVocabulary, load_ud_english_ewt
from zoo.layers import CRFLoss, crf_decode
from zoo.models import Tagger, build_tagger
from zoo.tasks.tagging.config import get_config as tagger_config  # a run's: it trains
from zoo.models.tagger import backbone as backbone_module
from zoo.models.tagger import preprocessor as preprocessor_module
from zoo.models.tagger import tagger as tagger_module

MAX_LENGTH = 16  # the taggers' positions: the default window


TRAIN = 600  # the EWT training sentences of the vocabulary and the training


@functools.cache
def ewt(split):
    """The sentences of an EWT split, read once (reading the training split takes a second)."""
    return tuple(load_ud_english_ewt(split))


@functools.cache
def ewt_vocabulary():
    """The vocabulary of 600 EWT training sentences: words seen twice, characters once, and
    their XPOS tags."""
    return TaggerVocabulary.build(ewt("train")[:TRAIN], max_word_length=10)


@functools.cache
def trained_tagger(steps=40):
    """A tiny CRF tagger (relative positions) of :func:`ewt_vocabulary`, trained ``steps``
    batches of 16 EWT sentences of <= 16 words: its tags vary. Made once per session."""
    vocabulary = ewt_vocabulary()
    model = random_tagger(vocabulary, 0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CRFLoss())
    train = [s for s in ewt("train")[:TRAIN] if len(s.words) <= MAX_LENGTH]
    inputs = encode(vocabulary, [s.words for s in train[: 16 * steps]], length=MAX_LENGTH)
    labels = np.zeros(inputs["words"].shape, "int32")
    for b, sentence in enumerate(train[: 16 * steps]):
        labels[b, : len(sentence.upos)] = [UPOS_TAGS.index(tag) for tag in sentence.upos]
    fit_built(model, inputs, labels, batch_size=16, epochs=1, shuffle=False, verbose=0)
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
    return [s.words for s in ewt("dev")[:80]]


# ---------------------------------------------------------------- the slow references
def single_pass(model, vocabulary, words, head="upos"):
    """The tags of one model call on ``words`` alone (no batch, no padding): Viterbi
    (crf_decode) for a CRF head, the argmax otherwise."""
    inputs = encode(vocabulary, [words])
    ids = np.asarray(_one_call(model, head, inputs["chars"].shape[-1])(inputs["words"],
                                                                        inputs["chars"]))
    if not model.heads[head].use_crf:  # the scores: their argmax
        ids = ids.argmax(-1)
    names = UPOS_TAGS if head == "upos" else vocabulary.xpos_tags
    return [names[i] for i in ids[0]]


_ONE_CALL = {}  # (model id, head, C) -> (the model, kept so that its id is not reused, call)


def _one_call(model, head, chars):
    """The model's call on one sentence of any length, and crf_decode for a CRF head, as one
    function traced once: eager, they cost 60 ms a sentence, and the references make
    hundreds of calls."""
    key = (id(model), head, chars)
    if key not in _ONE_CALL:
        spec = [tf.TensorSpec((1, None), tf.int32), tf.TensorSpec((1, None, chars), tf.int32)]

        @tf.function(input_signature=spec)
        def call(words, char_ids):
            outputs = model({"words": words, "chars": char_ids}, training=False)
            scores = outputs[head] if isinstance(outputs, dict) else outputs
            if model.heads[head].use_crf:
                return crf_decode(scores, tf.ones(tf.shape(words), bool))[0]
            return scores

        _ONE_CALL[key] = (model, call)
    return _ONE_CALL[key][1]


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


# ---------------------------------------------------------------- tagging
def test_a_sentence_that_fits_is_tagged_in_one_pass(model, vocabulary, dev):
    sentences = [words for words in dev if len(words) <= MAX_LENGTH][:30]
    sentences.append(long_sentence(ewt("dev")[:5], MAX_LENGTH))  # exactly fits
    tags = tag_sentences(model, vocabulary, sentences, batch_size=7)
    assert tags == [single_pass(model, vocabulary, words) for words in sentences]
    assert tags == tag_sentences(model, vocabulary, sentences, window=MAX_LENGTH)
    assert len({tag for sentence in tags for tag in sentence}) > 3  # the tags vary


# The default, an odd window and the narrowest, one a word (each a graph of its own to trace;
# the narrowest only on the CRF, as it only moves the windows); the plans of other windows are
# test_tagger_serving.py's test_window_plan_equals_tagging_windows.
@pytest.mark.parametrize(
    "model, window",
    [("crf_model", MAX_LENGTH), ("crf_model", 7), ("crf_model", 1), ("softmax_model", MAX_LENGTH),
     ("softmax_model", 7)],
    indirect=["model"],
)  # fmt: skip
def test_long_sentences_equal_the_window_by_window_reference(model, vocabulary, window):
    sentences = ewt("dev")[:12]
    long = [long_sentence(sentences, n) for n in (3 * window, 3 * window + 5, window + 1)]
    batch = [long[0], [], long[1], ["A", "dog", "."], long[2]]
    tags = tag_sentences(model, vocabulary, batch, window=window, batch_size=3)
    assert [len(t) for t in tags] == [len(words) for words in batch]
    for words, tagged in zip(batch, tags):
        assert tagged == windowed_reference(model, vocabulary, words, window)


def test_overlapping_windows_are_not_disjoint_pieces(crf_model, vocabulary):
    # The reference test can fail: cutting the sentence into disjoint pieces of the window
    # (every word at some piece's edge loses context) gives other tags than the windows.
    words = long_sentence(ewt("dev")[:12], 3 * MAX_LENGTH)
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
    sentences = short + [long_sentence(ewt("dev")[:12], 40)]
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
    other = TaggerVocabulary(["a", "b"], vocabulary.chars, max_word_length=10)
    with pytest.raises(ValueError, match="not its vocabulary"):
        tag_sentences(crf_model, other, [["a"]])
    with pytest.raises(ValueError, match="XPOS head has 3 classes"):
        tag_sentences(random_tagger(vocabulary, 3, num_xpos_tags=3), vocabulary, [["a"]])
    with pytest.raises(ValueError, match="needs a TaggerBackbone"):
        tag_sentences(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), vocabulary,
                      [["a"]])  # fmt: skip


def test_the_default_window_survives_the_keras_file(crf_model, vocabulary, tmp_path):
    crf_model.save(tmp_path / "tagger.keras")
    reloaded = keras.models.load_model(tmp_path / "tagger.keras")
    words = long_sentence(ewt("dev")[:12], 2 * MAX_LENGTH + 3)
    assert Tagger.from_backbone(reloaded, vocabulary).preprocessor.window == MAX_LENGTH
    assert tag_sentences(reloaded, vocabulary, [words]) == tag_sentences(
        crf_model, vocabulary, [words]
    )


def test_an_int8_tagger_tags_and_its_keras_file_keeps_it_int8(crf_model, vocabulary, dev,
                                                              tmp_path):  # fmt: skip
    tagger = Tagger.from_backbone(crf_model, vocabulary)  # over a copy: the fixture stays float
    with pytest.warns(UserWarning, match="left the layers of these kinds in float"):
        tagger.quantize("int8")
    int8 = tagger.tag(dev[:20])
    tagger.save(tmp_path / "int8.keras")
    loaded = keras.models.load_model(tmp_path / "int8.keras")
    assert "int8" in {layer.quantization_mode for layer in loaded.backbone._flatten_layers()}
    assert loaded.tag(dev[:20]) == int8
    exact = Tagger.from_backbone(crf_model, vocabulary).tag(dev[:20])
    pairs = [(a["upos"], b["upos"]) for x, y in zip(exact, int8) for a, b in zip(x, y)]
    assert np.mean([a == b for a, b in pairs]) >= 0.9  # int8 weights: nearly the same tags


@pytest.mark.parametrize("module", [backbone_module, preprocessor_module, tagger_module])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and (result.attempted > 0 or module is tagger_module)


def test_padding_in_a_batch_never_moves_a_tag(crf_model, vocabulary, dev):
    # tag_columns pads each batch to its longest sentence; padding never moves a tag.
    sentences = dev[:20]
    alone = [tag_sentences(crf_model, vocabulary, [words])[0] for words in sentences]
    assert tag_sentences(crf_model, vocabulary, sentences, batch_size=64) == alone
    assert np.mean([len(t) for t in alone]) > 5


def test_verbose_draws_a_progress_bar_on_stderr(crf_model, vocabulary, dev, capsys):
    sentences = dev[:10] + [long_sentence(ewt("dev")[:12], 3 * MAX_LENGTH)]
    quiet = tag_sentences(crf_model, vocabulary, sentences, batch_size=4)
    assert capsys.readouterr() == ("", "")
    loud = tag_sentences(crf_model, vocabulary, sentences, batch_size=4, verbose=True)
    out, err = capsys.readouterr()
    assert loud == quiet and out == ""
    assert f"{len(sentences)}/{len(sentences)}" in err and "sentences" in err


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


def test_fit_on_sentences_and_their_tags_lowers_the_loss(vocabulary):
    """The Tagger's fit on strings: sentences and their UPOS and XPOS tags go through its
    preprocessor (the encoding of tag and the SavedModel); a lemma column is refused."""
    train = [s for s in ewt("train")[:TRAIN] if len(s.words) <= MAX_LENGTH
             and not any(" " in w for w in s.words)][:64]  # fmt: skip
    backbone = random_tagger(vocabulary, 0, num_xpos_tags=len(vocabulary.xpos_tags))
    tagger = Tagger.from_backbone(backbone, vocabulary, compile=True)
    # Its default compile at ten times the rate: two epochs lower the loss by 40% (seeds 0-2),
    # where four at the default rate lowered it by 24% (an epoch costs a second).
    tagger.optimizer.learning_rate.assign(1e-2)
    sentences = [" ".join(s.words) for s in train]
    tags = {head: tf.ragged.constant([list(getattr(s, head)) for s in train])
            for head in ("upos", "xpos")}  # fmt: skip
    data = tf.data.Dataset.from_tensor_slices((sentences, tags)).batch(16)
    history = fit_built(tagger, data, epochs=2, verbose=0).history
    assert history["loss"][-1] < 0.8 * history["loss"][0], history["loss"]
    with pytest.raises(ValueError, match="lemma head's edit scripts"):
        tagger.preprocessor(tf.constant(sentences[:2]), {"lemma": tags["upos"][:2]})
