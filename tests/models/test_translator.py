import dataclasses
import os

import numpy as np
import pytest

from tests.harness import load_in_fresh_process
from zoo.models import TRANSLATOR_PRESETS, build_translator, translator_config

IDS = {
    "source": np.array([[5, 6, 7, 8, 0], [9, 10, 0, 0, 0]], "int32"),
    "target_in": np.array([[2, 11, 12, 0], [2, 13, 14, 15]], "int32"),
}


def test_presets_are_derived_and_overridable():
    assert set(TRANSLATOR_PRESETS) == {"tiny", "demo", "small", "deep_shallow", "base"}
    small = translator_config("small")
    assert (small.encoder_layers, small.d_model, small.ff_dim, small.num_heads) == (4, 128, 256, 4)
    fast = translator_config("deep_shallow")  # small's width, a deep encoder, one decoder block
    assert dataclasses.replace(fast, encoder_layers=4, decoder_layers=4) == small
    assert (fast.encoder_layers, fast.decoder_layers) == (7, 1)
    assert translator_config("small", d_model=64).d_model == 64
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.d_model = 7
    with pytest.raises(ValueError, match="Unknown translator preset"):
        translator_config("huge")


def test_shared_embedding_is_one_matrix_and_the_output_is_tied():
    model = build_translator(translator_config("tiny", vocab_size=50))
    embeddings = [w for w in model.weights if "token_embedding" in w.path]
    assert len(embeddings) == 1
    assert model(IDS).shape == (2, 4, 50)
    assert not any(layer.name == "output_projection" for layer in model.layers)


def test_untied_model_has_two_embeddings_and_a_projection():
    model = build_translator(translator_config("tiny", vocab_size=50, share_embeddings=False))
    names = {layer.name for layer in model.layers}
    assert {"source_embedding", "target_embedding", "output_projection"} <= names
    assert model(IDS).shape == (2, 4, 50)


def test_padding_in_the_source_does_not_change_the_logits():
    model = build_translator(translator_config("tiny", vocab_size=50))
    longer = dict(IDS, source=np.pad(IDS["source"], ((0, 0), (0, 3))))
    np.testing.assert_allclose(model(longer), model(IDS), atol=1e-5)


def test_keras_file_round_trip_in_a_fresh_process(tmp_path):
    model = build_translator(translator_config("tiny", vocab_size=50))
    path = str(tmp_path / "model.keras")
    model.save(path)
    (reloaded,) = load_in_fresh_process(path, IDS)
    np.testing.assert_allclose(reloaded, np.asarray(model(IDS)), atol=1e-5)
    assert os.path.getsize(path) > 0


@pytest.mark.parametrize("name", ["inference", "backbone", "preprocessor", "serving"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    module = importlib.import_module(f"zoo.models.translator.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
