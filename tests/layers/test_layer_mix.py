"""LayerMix against its definition, and through tests/harness.run_layer_test."""

import doctest

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import LayerMix
from zoo.layers import layer_mix as layer_mix_module

RNG = np.random.default_rng(0)
OUTPUTS = [RNG.normal(size=(2, 5, 4)).astype("float32") for _ in range(3)]


def _reference(outputs, logits):
    weights = np.exp(logits) / np.exp(logits).sum()
    return sum(w * x for w, x in zip(weights, outputs))


def test_the_mix_is_the_softmax_weighted_sum():
    layer = LayerMix(3)
    layer(OUTPUTS)
    logits = np.array([0.5, -1.0, 2.0], "float32")
    layer.mix_logits.assign(logits)
    np.testing.assert_allclose(np.asarray(layer(OUTPUTS)), _reference(OUTPUTS, logits), atol=1e-6)


def test_an_index_passes_its_input_through_and_has_no_weights():
    layer = LayerMix(3, index=1)
    np.testing.assert_array_equal(np.asarray(layer(OUTPUTS)), OUTPUTS[1])
    assert layer.weights == []


@pytest.mark.parametrize("index", [None, 2])
def test_layer_contract(index):
    """Config and ``.keras`` round trips, symbolic and eager calls, mixed_bfloat16 and (for the
    mix: an index has no weights) a fit step that trains the mix."""
    run_layer_test(
        LayerMix,
        {"num_inputs": 3, "index": index},
        list(OUTPUTS),
        expected_output_shape=(2, 5, 4),
        run_training=index is None,
    )


def test_the_first_inputs_mask_passes_through():
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    assert np.array_equal(np.asarray(LayerMix(3).compute_mask(OUTPUTS, [mask] * 3)), mask)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"num_inputs": 0}, "num_inputs"), ({"num_inputs": 3, "index": 3}, r"index .*\[0, 3\)")],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LayerMix(**kwargs)


def test_the_wrong_number_of_inputs_is_refused():
    with pytest.raises(ValueError, match="mixes 3 inputs, got 2"):
        LayerMix(3)(OUTPUTS[:2])


def test_docstring_examples_run():
    assert doctest.testmod(layer_mix_module, extraglobs={"keras": keras}).failed == 0
