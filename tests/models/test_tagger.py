import dataclasses
import doctest
import json
import textwrap

import keras
import numpy as np
import pytest

from tests.harness import load_in_fresh_process, run_on_jax
from zoo.data import UPOS_TAGS, Sentence
from zoo.layers import CRFAccuracy, CRFLoss, crf_decode
from zoo.models import (
    TAGGER_PRESETS,
    TaggerConfig,
    TaggerVocabulary,
    build_tagger,
    predict_tags,
    tagger_config,
)
from zoo.models import tagger as tagger_module
from zoo.models.tagger import BOW_ID, EOW_ID, OOV_ID, PAD_ID


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


def _tiny(**overrides):
    return tagger_config("tiny", **{**VOCABULARY.config_overrides(), **overrides})


def _inputs(sentences, length=None):
    encoded = VOCABULARY.encode(sentences, length=length)
    return {"words": encoded["words"], "chars": encoded["chars"]}


# ---------------------------------------------------------------- configs
def test_presets_are_derived_and_overridable():
    assert set(TAGGER_PRESETS) == {"tiny", "small"}
    small = tagger_config("small")
    assert small == TaggerConfig()
    assert small.num_tags == len(UPOS_TAGS) == 17
    assert (small.position, small.use_crf) == ("relative", True)
    assert 2 <= small.num_layers <= 4 and 128 <= small.d_model <= 256
    tiny = tagger_config("tiny")
    assert tiny.d_model < small.d_model and tiny.position == small.position
    assert tagger_config("small", use_crf=False).use_crf is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.d_model = 7
    with pytest.raises(ValueError, match="Unknown tagger preset"):
        tagger_config("huge")
    with pytest.raises(ValueError, match="Unknown position"):
        tagger_config("tiny", position="sinusoidal")


def test_small_preset_builds_with_its_shapes():
    config = tagger_config("small", word_vocab_size=50, char_vocab_size=20)
    model = build_tagger(config)  # symbolic only: never called on data here
    assert model.output_shape == (None, None, 17, 17)
    shapes = {tensor.name: tuple(tensor.shape) for tensor in model.inputs}
    assert shapes == {"words": (None, None), "chars": (None, None, 20)}
    blocks = [layer for layer in model.layers if layer.name.startswith("encoder_block_")]
    assert len(blocks) == config.num_layers
    assert all(block.attention == "relative" for block in blocks)


# ---------------------------------------------------------------- the model
@pytest.mark.parametrize("use_crf", [True, False], ids=["crf", "softmax"])
@pytest.mark.parametrize("position", ["relative", "learned"])
def test_tiny_shapes_for_each_position_and_head(position, use_crf):
    model = build_tagger(_tiny(position=position, use_crf=use_crf))
    outputs = model(_inputs(SENTENCES))
    assert outputs.shape == ((4, 5, 17, 17) if use_crf else (4, 5, 17))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(outputs._keras_mask), _inputs(SENTENCES)["words"] != 0
    )
    paths = [w.path for w in model.weights]
    relative = any("relative_key_embeddings" in p for p in paths)
    learned = any("position_embedding" in p for p in paths)
    assert (relative, learned) == (position == "relative", position == "learned")
    names = {layer.name for layer in model.layers}
    assert {"word_embedding", "char_embedding", "word_and_char", "encoder_norm"} <= names
    assert "upos_logits" in names
    assert ("upos_crf" in names) == use_crf


def test_xpos_head_gives_a_dict_of_outputs():
    model = build_tagger(_tiny(num_xpos_tags=VOCABULARY.num_xpos_tags))
    outputs = model(_inputs(SENTENCES))
    assert set(outputs) == {"upos", "xpos"}
    assert outputs["upos"].shape == (4, 5, 17, 17)
    assert outputs["xpos"].shape == (4, 5, VOCABULARY.num_xpos_tags, VOCABULARY.num_xpos_tags)
    predicted = predict_tags(model, _inputs(SENTENCES))
    assert predicted["xpos"].shape == (4, 5) and predicted["xpos"].max() < VOCABULARY.num_xpos_tags


@pytest.mark.parametrize(
    "overrides",
    [{"position": "relative", "use_crf": True}, {"position": "learned", "use_crf": False}],
    ids=["relative-crf", "learned-softmax"],
)
def test_padding_does_not_change_real_positions(overrides):
    model = build_tagger(_tiny(**overrides))
    short = SENTENCES[2:3]  # 4 words, alone
    alone = np.asarray(model(_inputs(short)))
    padded = np.asarray(model(_inputs(short, length=9)))  # 5 padding words after it
    np.testing.assert_allclose(padded[:, :4], alone, atol=1e-5)
    in_batch = np.asarray(model(_inputs(SENTENCES)))[2:3]  # padded to the 5-word sentence
    np.testing.assert_allclose(in_batch[:, :4], alone, atol=1e-5)


def test_unknown_words_are_told_apart_by_their_characters():
    model = build_tagger(_tiny(use_crf=False))
    inputs = _inputs([["zebra", "quux"]])
    assert (inputs["words"] == OOV_ID).all()
    logits = np.asarray(model(inputs))
    assert np.abs(logits[0, 0] - logits[0, 1]).max() > 1e-4


def test_predict_tags_decodes_each_head():
    inputs = _inputs(SENTENCES)
    mask = inputs["words"] != 0
    crf_model = build_tagger(_tiny())
    want = np.asarray(crf_decode(crf_model(inputs), mask)[0])
    np.testing.assert_array_equal(predict_tags(crf_model, inputs, batch_size=3), want)
    softmax_model = build_tagger(_tiny(use_crf=False))
    want = np.where(mask, np.asarray(softmax_model(inputs)).argmax(-1), 0)
    np.testing.assert_array_equal(predict_tags(softmax_model, inputs, batch_size=3), want)


@pytest.mark.parametrize(
    "overrides",
    [{"position": "relative", "use_crf": True}, {"position": "learned", "use_crf": False}],
    ids=["relative-crf", "learned-softmax"],
)
def test_keras_file_round_trip_in_a_fresh_process(tmp_path, overrides):
    model = build_tagger(_tiny(**overrides))
    inputs = _inputs(SENTENCES)
    path = str(tmp_path / "tagger.keras")
    model.save(path)
    (reloaded,) = load_in_fresh_process(path, inputs)
    np.testing.assert_allclose(reloaded, np.asarray(model(inputs)), atol=1e-5)


@pytest.mark.parametrize("use_crf", [True, False], ids=["crf", "softmax"])
def test_a_few_fit_steps_lower_the_loss(use_crf):
    encoded = VOCABULARY.encode(SENTENCES)
    inputs = {"words": encoded["words"], "chars": encoded["chars"]}
    model = build_tagger(_tiny(use_crf=use_crf))
    if use_crf:
        loss, metric = CRFLoss(), CRFAccuracy()
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss, metrics=[metric])
    history = model.fit(inputs, encoded["upos"], batch_size=4, epochs=8, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    assert history["accuracy"][-1] > history["accuracy"][0]


_JAX_SCRIPT = textwrap.dedent(
    """
    import sys
    import keras
    import numpy as np
    from zoo.layers import CRFAccuracy, CRFLoss
    from zoo.models import TaggerVocabulary, build_tagger, predict_tags, tagger_config

    assert keras.backend.backend() == "jax"
    assert "tensorflow" not in sys.modules  # the model side of zoo never needs TensorFlow
    sentences = [["The", "cat", "sat", "."], ["A", "dog", "ran", "off", "."]]
    tags = np.array([[5, 7, 15, 12, 0], [5, 7, 15, 2, 12]], "int32")
    vocabulary = TaggerVocabulary.build(sentences, min_count=1, max_word_length=8)
    encoded = vocabulary.encode(sentences)
    model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CRFLoss(), metrics=[CRFAccuracy()])
    loss = model.fit(encoded, tags, epochs=5, verbose=0).history["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], loss
    predicted = predict_tags(model, encoded)
    assert predicted.shape == (2, 5) and predicted[0, 4] == 0
    print("jax ok", loss[0], loss[-1])
    """
)


def test_builds_and_trains_on_the_jax_backend():
    assert "jax ok" in run_on_jax(_JAX_SCRIPT)


# ---------------------------------------------------------------- the vocabulary
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


def test_docstring_examples_run():
    result = doctest.testmod(tagger_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
