import doctest

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import CharacterEmbedding, TokenAndPositionEmbedding
from zoo.layers import character_embedding as character_embedding_module

RNG = np.random.default_rng(0)
V, D, E, F = 13, 6, 4, 5
# Two sentences of three words of up to 6 characters; the last words of the second are padding.
CHARS = np.array(
    [
        [[2, 5, 6, 3, 0, 0], [2, 7, 8, 9, 10, 3], [2, 11, 3, 0, 0, 0]],
        [[2, 12, 4, 3, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
    ],
    "int32",
)


def _reference(layer, char_ids):
    """The definition, one word, one width and one position at a time, in float64."""
    table = np.asarray(layer.char_embedding.embeddings, "float64")
    w = np.asarray(layer.projection.kernel, "float64")
    b = np.asarray(layer.projection.bias, "float64")
    out = np.zeros(char_ids.shape[:2] + (w.shape[1],))
    for s in range(char_ids.shape[0]):
        for t in range(char_ids.shape[1]):
            ids = char_ids[s, t]
            e = np.where((ids != 0)[:, None], table[ids], 0.0)  # padding characters are zeros
            features = []
            for conv in layer.convs:  # the maxima of each width, concatenated
                kernel = np.asarray(conv.kernel, "float64")  # (width, E, F)
                bias = np.asarray(conv.bias, "float64")
                width, half = kernel.shape[0], (kernel.shape[0] - 1) // 2
                pooled = np.zeros(kernel.shape[-1])
                for i in np.flatnonzero(ids):
                    h = bias.copy()
                    for k in range(width):
                        j = i + k - half
                        if 0 <= j < len(ids):
                            h += e[j] @ kernel[k]
                    pooled = np.maximum(pooled, np.maximum(h, 0.0))
                features.append(pooled)
            out[s, t] = np.concatenate(features) @ w + b
    return out


@pytest.mark.parametrize("kernel_size", [3, 2, (2, 3, 5)])
def test_is_the_definition(kernel_size):
    layer = CharacterEmbedding(V, D, char_dim=E, filters=F, kernel_size=kernel_size)
    got = np.asarray(layer(CHARS))
    np.testing.assert_allclose(got, _reference(layer, CHARS), atol=1e-5)


def test_a_word_does_not_depend_on_its_padding_or_its_neighbours():
    layer = CharacterEmbedding(V, D, char_dim=E, filters=F)
    base = np.asarray(layer(CHARS))
    wider = np.asarray(layer(np.pad(CHARS, ((0, 0), (0, 0), (0, 4)))))  # more padding per word
    np.testing.assert_allclose(wider, base, atol=1e-5)
    alone = np.asarray(layer(CHARS[:1, 1:2]))
    np.testing.assert_allclose(alone[0, 0], base[0, 1], atol=1e-5)



def test_an_empty_batch_is_embedded_as_one():
    # What a replica gets under multi_worker once its worker's part of an epoch is done.
    layer = CharacterEmbedding(V, D, char_dim=E, filters=F, kernel_size=(2, 3))
    layer(CHARS)
    assert tuple(layer(CHARS[:0]).shape) == (0, 3, D)

def test_mask_marks_words_with_characters_and_survives_a_sum_with_word_embeddings():
    words = np.array([[4, 5, 6], [7, 0, 0]], "int32")
    word_ids = keras.Input((None,), dtype="int32")
    char_ids = keras.Input((None, CHARS.shape[-1]), dtype="int32")
    x = TokenAndPositionEmbedding(9, D, position=None, mask_zero=True)(word_ids)
    c = CharacterEmbedding(V, D, char_dim=E, filters=F)(char_ids)
    model = keras.Model([word_ids, char_ids], [c, keras.layers.Add()([x, c])])
    chars_out, summed = model([words, CHARS])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(chars_out._keras_mask), words != 0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(summed._keras_mask), words != 0)
    assert CharacterEmbedding(V, D, mask_zero=False).compute_mask(CHARS) is None


@pytest.mark.parametrize("kernel_size", [3, [2, 4]])
def test_character_embedding_layer(kernel_size):
    run_layer_test(
        CharacterEmbedding,
        {
            "vocab_size": V,
            "embed_dim": D,
            "char_dim": E,
            "filters": F,
            "kernel_size": kernel_size,
            "mask_zero": True,
            "embeddings_initializer": "glorot_uniform",
        },
        CHARS,
        expected_output_shape=(2, 3, D),
    )


def test_one_width_keeps_the_weight_names_of_saved_models_and_bad_widths_are_named():
    one = CharacterEmbedding(V, D, filters=F, kernel_size=3)
    several = CharacterEmbedding(V, D, filters=F, kernel_size=(2, 4))
    one(CHARS), several(CHARS)
    assert [conv.name for conv in one.convs] == ["conv"]
    assert [conv.name for conv in several.convs] == ["conv_2", "conv_4"]
    assert several.projection.kernel.shape == (2 * F, D)
    for bad in [0, (), (3, "4"), (2, -1), (3, 3)]:
        with pytest.raises(ValueError, match="kernel_size must be a positive int"):
            CharacterEmbedding(V, D, kernel_size=bad)


def test_docstring_examples_run():
    result = doctest.testmod(character_embedding_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
