"""LayerMix against its definition. It takes a list of tensors, which tests/harness.run_layer_test
does not feed, so its checks (config and .keras round trips, a fit step, bfloat16, masks) are here."""

import doctest

import keras
import numpy as np
import pytest

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


def _model(layer):
    inputs = [keras.Input((None, 4)) for _ in range(3)]
    return keras.Model(inputs, keras.layers.Dense(2)(layer(inputs)))


def test_config_and_keras_file_round_trips(tmp_path):
    layer = LayerMix(3, name="mix")
    assert LayerMix.from_config(layer.get_config()).get_config() == layer.get_config()
    model = _model(layer)
    layer.mix_logits.assign([1.0, 0.0, -1.0])
    path = str(tmp_path / "mix.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(OUTPUTS)), np.asarray(model(OUTPUTS)), atol=1e-6)


def test_a_fit_step_trains_the_mix():
    model = _model(LayerMix(3, name="mix"))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(OUTPUTS, np.ones((2, 5, 2), "float32"), epochs=1, verbose=0)
    assert np.any(np.asarray(model.get_layer("mix").mix_logits) != 0)


def test_mixed_bfloat16_outputs_in_the_compute_dtype():
    layer = LayerMix(3, dtype="mixed_bfloat16")
    out = layer([keras.ops.cast(x, "bfloat16") for x in OUTPUTS])
    assert out.dtype == "bfloat16" and layer.mix_logits.dtype == "float32"
    np.testing.assert_allclose(
        np.asarray(keras.ops.cast(out, "float32")), _reference(OUTPUTS, np.zeros(3)), atol=0.05
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
