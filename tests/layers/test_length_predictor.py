import doctest

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import LengthPredictor, TokenAndPositionEmbedding
from zoo.layers import length_predictor as length_predictor_module

RNG = np.random.default_rng(0)
B, S, D, K = 3, 6, 8, 4
STATES = RNG.normal(size=(B, S, D)).astype("float32")
PADDING = np.array([[1] * 6, [1] * 3 + [0] * 3, [1] + [0] * 5], bool)


def _reference(layer, states, padding):
    """The definition in float64: the mean of the real states, then the projection."""
    w = np.asarray(layer.projection.kernel, "float64")
    b = np.asarray(layer.projection.bias, "float64")
    means = np.stack([states[i][padding[i]].mean(0) for i in range(len(states))])
    return means @ w + b


def test_is_the_mean_of_the_real_states_projected():
    layer = LengthPredictor(K)
    got = np.asarray(layer(STATES, padding_mask=PADDING))
    np.testing.assert_allclose(got, _reference(layer, STATES, PADDING), atol=1e-5)
    # The padding's states never matter.
    noisy = np.where(PADDING[..., None], STATES, 100.0).astype("float32")
    np.testing.assert_allclose(np.asarray(layer(noisy, padding_mask=PADDING)), got, atol=1e-5)


def test_reads_the_implicit_mask_and_an_empty_source_is_finite():
    ids = np.array([[5, 6, 7, 0], [8, 0, 0, 0], [0, 0, 0, 0]], "int32")
    inputs = keras.Input((None,), dtype="int32")
    states = TokenAndPositionEmbedding(10, D, position=None, mask_zero=True)(inputs)
    layer = LengthPredictor(K)
    model = keras.Model(inputs, [states, layer(states)])
    hidden, scores = (np.asarray(x) for x in model(ids))
    np.testing.assert_allclose(scores[:2], _reference(layer, hidden[:2], ids[:2] != 0), atol=1e-5)
    assert np.all(np.isfinite(scores[2]))  # no real token: the mean is 0, not NaN


def test_offset_classes_clip_at_both_ends():
    classes = LengthPredictor.offset_class([5, 9, 1, 20], [5, 6, 9, 2], K)
    assert np.asarray(classes).tolist() == [K, K + 3, 0, 2 * K]


def test_bad_arguments_are_named():
    for bad in (-1, 2.5, "3"):
        with pytest.raises(ValueError, match="max_offset must be an int"):
            LengthPredictor(bad)
    with pytest.raises(ValueError, match="Unknown length_mode 'widest'"):
        LengthPredictor(K, length_mode="widest")


def test_length_predictor_layer():
    run_layer_test(
        LengthPredictor,
        {"max_offset": K, "length_mode": "max"},  # kept in the config: how the model decodes
        {"encoder_output": STATES, "padding_mask": PADDING},
        expected_output_shape=(B, 2 * K + 1),
    )


def test_docstring_examples_run():
    result = doctest.testmod(length_predictor_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
