import doctest

import keras
import numpy as np
import pytest

import zoo.models.nat.backbone as nat_backbone
import zoo.models.nat.inference as nat_inference
import zoo.models.nat.serving as nat_serving
from zoo.models.nat import (
    MASK_ID,
    NATModes,
    build_nat_translator,
    decode_and_lengths,
    get_config,
    nat_decode,
    nat_encode,
    nat_modes,
)
from zoo.models.translator import build_translator
from zoo.models.translator import get_config as translator_config

SOURCE = np.array([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]], "int32")
TARGET_IN = np.array([[MASK_ID, 12, MASK_ID, 3], [MASK_ID, MASK_ID, 0, 0]], "int32")
# The default model and one of each new option.
OPTIONS = {"mask": {}, "copy": {"decoder_input": "copy"}, "max": {"length_mode": "max"}}


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return build_nat_translator(get_config("tiny"))


@pytest.fixture(scope="module", params=sorted(OPTIONS))
def option_model(request):
    """A model of each option, and the modes it must decode with."""
    keras.utils.set_random_seed(1)
    modes = NATModes(**{"decoder_input": "mask", "length_mode": "predict", "max_offset": 8,
                        **OPTIONS[request.param]})  # fmt: skip
    return build_nat_translator(get_config("tiny", **OPTIONS[request.param])), modes


def test_outputs_and_the_translators_layers(model):
    out = model({"source": SOURCE, "target_in": TARGET_IN})
    assert tuple(out["tokens"].shape) == (2, 4, 1000)
    assert tuple(out["length"].shape) == (2, 2 * 8 + 1)
    translator = build_translator(translator_config("tiny"))
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


def test_the_copy_decoder_reads_the_source_not_the_target_tokens():
    keras.utils.set_random_seed(2)
    model = build_nat_translator(get_config("tiny", decoder_input="copy"))
    mask_model = build_nat_translator(get_config("tiny"))
    assert model.count_params() == mask_model.count_params()  # the copy has no weights
    out = model({"source": SOURCE, "target_in": TARGET_IN})
    memory, source_padding, scores = nat_encode(model, SOURCE)
    np.testing.assert_allclose(np.asarray(scores), np.asarray(out["length"]), atol=1e-5)
    logits = np.asarray(nat_decode(model, memory, source_padding, TARGET_IN, source_ids=SOURCE))
    real = TARGET_IN != 0
    np.testing.assert_allclose(logits[real], np.asarray(out["tokens"])[real], atol=1e-5)
    # Other target tokens, the same padding: the same logits.
    other = np.where(real, 40, 0).astype("int32")
    moved = np.asarray(nat_decode(model, memory, source_padding, other, source_ids=SOURCE))
    np.testing.assert_allclose(moved[real], logits[real], atol=1e-5)
    # Another source token copied (the memory kept): other logits.
    copied = SOURCE.copy()
    copied[0, 1] = 40  # what target position 1 copies: round(1 * 4 / 3)
    moved = np.asarray(nat_decode(model, memory, source_padding, TARGET_IN, source_ids=copied))
    assert np.abs(moved[0] - logits[0]).max() > 1e-4
    # The source's padding (source_padding says where) is never read.
    padded = SOURCE.copy()
    padded[1, 3:] = 50
    same = np.asarray(nat_decode(model, memory, source_padding, TARGET_IN, source_ids=padded))
    np.testing.assert_allclose(same[real], logits[real], atol=1e-6)
    with pytest.raises(ValueError, match="source_ids"):
        nat_decode(model, memory, source_padding, TARGET_IN)


def test_decode_and_lengths_of_each_length_mode(option_model):
    option_model, modes = option_model
    assert nat_modes(option_model) == modes
    decode, lengths = decode_and_lengths(option_model, SOURCE, max_length=12)
    if modes.predicts_length:
        assert sorted(lengths) == ["length_logits", "source_lengths"]
        np.testing.assert_array_equal(np.asarray(lengths["source_lengths"]), [5, 3])
    else:
        # min(max(S + K, 2), max_length) with K = 8: 13 -> 12, and 11.
        assert sorted(lengths) == ["lengths"]
        np.testing.assert_array_equal(np.asarray(lengths["lengths"]), [12, 11])
        with pytest.raises(ValueError, match="length_beam=2"):
            decode_and_lengths(option_model, SOURCE, max_length=12, length_beam=2)
    source_ids = SOURCE if modes.decoder_input == "copy" else None
    memory, source_padding, _ = nat_encode(option_model, SOURCE)
    np.testing.assert_allclose(
        np.asarray(decode(TARGET_IN)),
        np.asarray(nat_decode(option_model, memory, source_padding, TARGET_IN, source_ids)),
        atol=1e-6,
    )


def test_keras_file_round_trip_keeps_the_modes(option_model, tmp_path):
    option_model, modes = option_model
    path = str(tmp_path / "nat.keras")
    option_model.save(path)
    loaded = keras.models.load_model(path)
    assert nat_modes(loaded) == modes
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    for name in ("tokens", "length"):
        np.testing.assert_allclose(
            np.asarray(loaded(inputs)[name]), np.asarray(option_model(inputs)[name]), atol=1e-6
        )


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="Unknown decoder_input 'copies'"):
        get_config("tiny", decoder_input="copies")
    with pytest.raises(ValueError, match="Unknown length_mode 'fixed'"):
        get_config("tiny", length_mode="fixed")
    with pytest.raises(ValueError, match="Unknown NAT translator preset 'huge'"):
        get_config("huge")
    with pytest.raises(ValueError, match="no NAT's backbone"):
        nat_modes(build_translator(translator_config("tiny")))


@pytest.mark.parametrize("module", [nat_backbone, nat_inference, nat_serving])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
