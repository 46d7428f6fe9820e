import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.common import numpy
from zoo.data import BOS_ID
from zoo.decoding import IncrementalTranslator, tile_for_beams
from zoo.models import build_translator, translator_config


def test_steps_equal_the_full_model(model, sources):
    """Teacher-forced, step by step with the caches (under XLA): the full model's logits."""
    translator = IncrementalTranslator(model)
    rng = np.random.default_rng(0)
    target_in = rng.integers(4, 20, size=(len(sources), 6)).astype("int32")
    target_in[:, 0] = BOS_ID
    expected = numpy(translator.full_logits(sources, target_in))  # (B, T, V)

    @tf.function(jit_compile=True)
    def step(token, caches, index, padding):
        return translator.step(token, caches, index, padding)

    memory, padding = translator.encode(sources)
    caches = translator.init_caches(memory, max_length=8)  # longer than needed
    assert len(caches) == translator.num_caches == 2 * sum(
        layer.name.startswith("decoder_block_") for layer in model.layers
    )
    for t in range(target_in.shape[1]):
        logits, caches = step(target_in[:, t : t + 1], caches, tf.constant(t), padding)
        assert logits.dtype == "float32" and tuple(logits.shape) == (len(sources), 20)
        np.testing.assert_allclose(numpy(logits), expected[:, t], atol=1e-4, rtol=1e-4)


def test_source_padding_is_not_seen(copy_model, sources):
    """What stands in the padded source positions does not move the logits."""
    translator = IncrementalTranslator(copy_model)
    memory, padding = translator.encode(sources)
    # Overwrite the padded positions of the encoder output with noise.
    noise = np.random.default_rng(0).normal(size=memory.shape).astype("float32") * 10
    memory_noisy = np.where(numpy(padding)[..., None], numpy(memory), noise)
    bos = np.full((len(sources), 1), BOS_ID, "int32")
    clean, _ = translator.step(bos, translator.init_caches(memory, 4), 0, padding)
    moved, _ = translator.step(bos, translator.init_caches(memory_noisy, 4), 0, padding)
    np.testing.assert_allclose(numpy(moved), numpy(clean), atol=1e-5)


def test_tile_for_beams_repeats_each_row():
    x = np.arange(6).reshape(3, 2)
    tiled = numpy(tile_for_beams(x, 2))
    np.testing.assert_array_equal(tiled, [[0, 1], [0, 1], [2, 3], [2, 3], [4, 5], [4, 5]])
    pair = tile_for_beams((x, x[:, 0]), keras.ops.convert_to_tensor(3))
    assert isinstance(pair, tuple) and numpy(pair[1]).tolist() == [0, 0, 0, 2, 2, 2, 4, 4, 4]


def test_a_model_without_the_layer_names_is_refused():
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, keras.layers.Embedding(10, 4, name="words")(inputs))
    with pytest.raises(ValueError, match="source_embedding"):
        IncrementalTranslator(model)


def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = build_translator(translator_config("tiny", vocab_size=40, decoder_layers=2))
    translator = IncrementalTranslator(model)
    source = np.array([[5, 6, 7, 0], [8, 9, 10, 11]], "int32")
    target_in = np.array([[2, 12, 13], [2, 14, 0]], "int32")
    weights = translator.cross_attention_weights(source, target_in)
    assert len(weights) == 2
    w = np.asarray(weights[-1])
    assert w.shape == (2, 2, 3, 4)  # (B, N, T, S)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(w[0, :, :, 3], 0.0, atol=1e-7)  # the padded source token
