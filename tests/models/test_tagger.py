"""The tagger model: presets, shapes, masks, heads, the .keras round trip. Its training on
JAX, without TensorFlow, is a part of the one JAX process of tests/layers/test_layers_on_jax.py."""

import dataclasses
import doctest

import keras
import numpy as np
import pytest

from tests.data.test_tagger_vocabulary import SENTENCES, VOCABULARY
from tests.harness import fit_built, load_in_fresh_process
from tests.models.tagger_reference import encode
from zoo.data import UPOS_TAGS
from zoo.data.tagger_vocabulary import OOV_ID
from zoo.layers import CRFAccuracy, CRFLoss
from zoo.models import (
    TAGGER_PRESETS,
    TaggerConfig,
    TaggerHead,
    build_tagger,
    tagger_config,
)
from zoo.models.tagger import backbone as tagger_backbone


def _tiny(**overrides):
    return tagger_config("tiny", **{**VOCABULARY.config_overrides(), **overrides})


def _inputs(sentences, length=None):
    encoded = encode(VOCABULARY, sentences, length=length)
    return {"words": encoded["words"], "chars": encoded["chars"]}


# ---------------------------------------------------------------- configs
def test_presets_are_derived_and_overridable():
    assert set(TAGGER_PRESETS) == {"tiny", "small"}
    small = tagger_config("small")
    # The model's config is its architecture alone (how it trains is the task's): the preset
    # sets the dropout, and the other fields are the class's defaults.
    assert small == TaggerConfig(dropout=0.3)
    assert not {"epochs", "learning_rate", "lowercase", "language"} & set(
        TaggerConfig.__dataclass_fields__)
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


@pytest.mark.parametrize("use_crf", [True, False], ids=["crf", "softmax"])
def test_heads_of_a_built_and_a_reloaded_model(tmp_path, use_crf):
    num_xpos = VOCABULARY.num_xpos_tags
    model = build_tagger(_tiny(use_crf=use_crf, num_xpos_tags=num_xpos))
    expected = {"upos": TaggerHead(17, use_crf), "xpos": TaggerHead(num_xpos, use_crf)}
    assert model.heads == expected and list(model.heads) == ["upos", "xpos"]
    for head, spec in expected.items():  # the output ranks agree: (B, T, K, K) for a CRF
        assert model.output[head].shape[2:] == ((spec.num_tags,) * (2 if use_crf else 1))
    model.save(tmp_path / "tagger.keras")
    assert keras.models.load_model(tmp_path / "tagger.keras").heads == expected
    assert build_tagger(_tiny(use_crf=use_crf)).heads == {"upos": TaggerHead(17, use_crf)}


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
    encoded = encode(VOCABULARY, SENTENCES)
    inputs = {"words": encoded["words"], "chars": encoded["chars"]}
    model = build_tagger(_tiny(use_crf=use_crf))
    if use_crf:
        loss, metric = CRFLoss(), CRFAccuracy()
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss, metrics=[metric])
    history = fit_built(model, inputs, encoded["upos"], batch_size=4, epochs=8, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    assert history["accuracy"][-1] > history["accuracy"][0]


def test_docstring_examples_run():
    result = doctest.testmod(tagger_backbone, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_feats_and_lemma_heads_are_softmax_heads_even_with_a_crf(tmp_path):
    """config.heads follows the class counts; FEATS and lemma heads never get a CRF (their K
    runs to thousands), and .heads reads every head back from a .keras file."""
    config = _tiny(use_crf=True, num_xpos_tags=3, num_feats_tags=7, num_lemma_scripts=11)
    assert config.heads == ("upos", "xpos", "feats", "lemma")
    assert _tiny(num_lemma_scripts=2).heads == ("upos", "lemma")
    model = build_tagger(config)
    outputs = model(_inputs(SENTENCES))
    assert outputs["upos"].shape == (4, 5, 17, 17) and outputs["xpos"].shape == (4, 5, 3, 3)
    assert outputs["feats"].shape == (4, 5, 7) and outputs["lemma"].shape == (4, 5, 11)
    expected = {"upos": TaggerHead(17, True), "xpos": TaggerHead(3, True),
                "feats": TaggerHead(7, False), "lemma": TaggerHead(11, False)}  # fmt: skip
    assert model.heads == expected
    model.save(tmp_path / "tagger.keras")
    assert keras.models.load_model(tmp_path / "tagger.keras").heads == expected
