"""The translator's incremental path (encode, init_caches, step) against its full forward pass."""

import keras
import numpy as np
import pytest

from tests.decoding.common import assert_steps_equal_the_full_model, numpy
from zoo.data import BOS_ID
from zoo.decoding import tile_for_beams
from zoo.models import build_translator, translator_config
from zoo.models.translator import (
    attention_weights,
    encode,
    init_caches,
    step,
    translator_layers,
)


def test_steps_equal_the_full_model(model, sources):
    """Teacher-forced, step by step with the caches (under XLA): the full model's logits."""
    rng = np.random.default_rng(0)
    target_in = rng.integers(4, 20, size=(len(sources), 6)).astype("int32")
    target_in[:, 0] = BOS_ID
    caches = assert_steps_equal_the_full_model(model, sources, target_in, xla=True)
    layers = translator_layers(model)
    assert sum(len(pair) for pair in caches["blocks"]) == layers.num_caches == 2 * sum(
        layer.name.startswith("decoder_block_") for layer in model.layers
    )


def test_source_padding_is_not_seen(copy_model, sources):
    """What stands in the padded source positions does not move the logits."""
    memory, padding = encode(copy_model, sources)
    # Overwrite the padded positions of the encoder output with noise.
    noise = np.random.default_rng(0).normal(size=memory.shape).astype("float32") * 10
    memory_noisy = np.where(numpy(padding)[..., None], numpy(memory), noise)
    bos = np.full((len(sources), 1), BOS_ID, "int32")
    clean, _ = step(copy_model, bos, init_caches(copy_model, memory, padding, 4), 0)
    moved, _ = step(copy_model, bos, init_caches(copy_model, memory_noisy, padding, 4), 0)
    np.testing.assert_allclose(numpy(moved), numpy(clean), atol=1e-5)


def test_tile_for_beams_repeats_each_row():
    x = np.arange(6).reshape(3, 2)
    tiled = numpy(tile_for_beams(x, 2))
    np.testing.assert_array_equal(tiled, [[0, 1], [0, 1], [2, 3], [2, 3], [4, 5], [4, 5]])
    pair = tile_for_beams((x, x[:, 0]), keras.ops.convert_to_tensor(3))
    assert isinstance(pair, tuple) and numpy(pair[1]).tolist() == [0, 0, 0, 2, 2, 2, 4, 4, 4]
    nested = tile_for_beams({"blocks": ((x,),), "padding": x[:, 0]}, 2)
    assert numpy(nested["blocks"][0][0]).shape == (6, 2)
    assert numpy(nested["padding"]).tolist() == [0, 0, 2, 2, 4, 4]


def test_a_model_without_a_translators_backbone_is_refused():
    """Layers are read by role from a backbone, never by name: a functional model (zoo
    0.1.0's) is refused in one line, even with a translator's layer names."""
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, keras.layers.Embedding(10, 4, name="embedding")(inputs))
    with pytest.raises(ValueError, match="no translator's backbone"):
        translator_layers(model)


def test_the_caches_must_fit_the_positions(copy_model, sources):
    memory, padding = encode(copy_model, sources)
    with pytest.raises(ValueError, match="max_length"):
        init_caches(copy_model, memory, padding, translator_layers(copy_model).max_length + 1)


def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = build_translator(translator_config("tiny", vocab_size=40, decoder_layers=2))
    source = np.array([[5, 6, 7, 0], [8, 9, 10, 11]], "int32")
    target_in = np.array([[2, 12, 13], [2, 14, 0]], "int32")
    weights = attention_weights(model, source, target_in)["cross"]
    assert len(weights) == 2
    w = np.asarray(weights[-1])
    assert w.shape == (2, 2, 3, 4)  # (B, N, T, S)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(w[0, :, :, 3], 0.0, atol=1e-7)  # the padded source token
