import doctest

import keras
import numpy as np
import pytest

import zoo.models.nat as nat_module
from zoo.models.nat import MASK_ID, build_nat_translator, get_config, nat_decode, nat_encode
from zoo.models.translator import build_translator

SOURCE = np.array([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]], "int32")
TARGET_IN = np.array([[MASK_ID, 12, MASK_ID, 3], [MASK_ID, MASK_ID, 0, 0]], "int32")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return build_nat_translator(get_config("tiny"))


def test_outputs_and_the_translators_layers(model):
    out = model({"source": SOURCE, "target_in": TARGET_IN})
    assert tuple(out["tokens"].shape) == (2, 4, 1000)
    assert tuple(out["length"].shape) == (2, 2 * 8 + 1)
    translator = build_translator(get_config("tiny"))
    shared = {layer.name for layer in translator.layers} - {"source", "target_in"}
    assert shared <= {layer.name for layer in model.layers}  # the same stacks, by name
    assert model.count_params() == translator.count_params() + 17 * (32 + 1)


def test_encode_and_decode_are_the_models_forward_pass(model):
    out = model({"source": SOURCE, "target_in": TARGET_IN})
    memory, source_padding, scores = nat_encode(model, SOURCE)
    np.testing.assert_array_equal(np.asarray(source_padding), SOURCE != 0)
    np.testing.assert_allclose(np.asarray(scores), np.asarray(out["length"]), atol=1e-5)
    logits = np.asarray(nat_decode(model, memory, source_padding, TARGET_IN))
    real = TARGET_IN != 0
    np.testing.assert_allclose(logits[real], np.asarray(out["tokens"])[real], atol=1e-5)


def test_every_position_sees_the_whole_target_and_never_the_padding(model):
    memory, source_padding, _ = nat_encode(model, SOURCE)
    base = np.asarray(nat_decode(model, memory, source_padding, TARGET_IN))
    later = TARGET_IN.copy()
    later[0, 3] = 20  # a later token moves the first position: no causal mask
    moved = np.asarray(nat_decode(model, memory, source_padding, later))
    assert np.abs(moved[0, 0] - base[0, 0]).max() > 1e-4
    padded = np.pad(TARGET_IN, ((0, 0), (0, 3)))  # more padding changes no real position
    wider = np.asarray(nat_decode(model, memory, source_padding, padded))
    np.testing.assert_allclose(wider[:, :4][TARGET_IN != 0], base[TARGET_IN != 0], atol=1e-5)


def test_keras_file_round_trip(model, tmp_path):
    path = str(tmp_path / "nat.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    for name in ("tokens", "length"):
        np.testing.assert_allclose(
            np.asarray(loaded(inputs)[name]), np.asarray(model(inputs)[name]), atol=1e-6
        )


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="Unknown decoder_input 'copies'"):
        get_config("tiny", decoder_input="copies")
    with pytest.raises(ValueError, match="Unknown NAT translator preset 'huge'"):
        get_config("huge")


def test_docstring_examples_run():
    result = doctest.testmod(nat_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
