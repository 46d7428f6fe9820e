"""The translator's config switches of issue 13, each against the plain model's contract:
the cached incremental decode equals the full forward pass, and a ``.keras`` round trip
gives the same outputs. (Each switch's serving export: tests/export/test_translator_options.py.)
"""

import keras
import numpy as np
import pytest

from zoo.data import BOS_ID
from zoo.models import build_translator, translator_config
from zoo.models.translator import encode, full_logits, init_caches, step

VOCAB_SIZE = 24
SOURCES = np.array([[5, 9, 13, 7, 0, 0], [11, 0, 0, 0, 0, 0], [4, 18, 6, 10, 15, 12]], "int32")

# Each switch on a tiny two-block model (so that block-wise options have blocks to differ).
OPTIONS = {
    "dot score": {"cross_attention_score": "dot"},
    "cosine score": {"cross_attention_score": "cosine"},
    "additive score": {"cross_attention_score": "additive"},
}


def tiny_translator(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    config = translator_config(
        "tiny", vocab_size=VOCAB_SIZE, max_length=12, encoder_layers=2, decoder_layers=2,
        **overrides,
    )  # fmt: skip
    return build_translator(config)


def teacher_forced_input(seed=0):
    target_in = np.random.default_rng(seed).integers(4, VOCAB_SIZE, (len(SOURCES), 6))
    target_in[:, 0] = BOS_ID
    return target_in.astype("int32")


def assert_steps_equal_the_full_model(model):
    target_in = teacher_forced_input()
    expected = np.asarray(full_logits(model, SOURCES, target_in))  # (B, T, V)
    memory, padding = encode(model, SOURCES)
    caches = init_caches(model, memory, padding, max_length=8)
    for t in range(target_in.shape[1]):
        logits, caches = step(model, target_in[:, t : t + 1], caches, t)
        np.testing.assert_allclose(np.asarray(logits), expected[:, t], atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def plain_outputs():
    return np.asarray(tiny_translator()({"source": SOURCES, "target_in": teacher_forced_input()}))


@pytest.mark.parametrize("overrides", OPTIONS.values(), ids=OPTIONS.keys())
def test_the_switch_changes_the_model_and_survives_a_keras_file(overrides, plain_outputs, tmp_path):
    """Same seed, other outputs; then the loaded model gives the same outputs, and its cached
    decode equals its full forward pass."""
    model = tiny_translator(**overrides)
    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    outputs = np.asarray(model(inputs))
    assert not np.allclose(outputs, plain_outputs, atol=1e-3)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(inputs)), outputs, atol=1e-5)
    assert_steps_equal_the_full_model(loaded)


def test_the_score_reaches_cross_attention_only():
    model = tiny_translator(cross_attention_score="cosine")
    blocks = [model.get_layer(f"decoder_block_{i}") for i in (0, 1)]
    assert [block.cross_attention_layer.score for block in blocks] == ["cosine"] * 2
    assert [block.self_attention_layer.score for block in blocks] == ["scaled_dot"] * 2


def test_the_default_score_leaves_the_saved_block_config_as_it_was():
    block = tiny_translator().get_layer("decoder_block_0")
    assert block.get_config()["cross_attention_kwargs"] is None


def test_an_unknown_score_is_refused():
    with pytest.raises(ValueError, match="cross_attention_score 'bilinear'.*additive"):
        translator_config("tiny", cross_attention_score="bilinear")
