"""The NAT in keras-hub's shape: its backbone and its task model."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.data import load_multi30k, train_sentencepiece
from zoo.models import NATBackbone, NATTranslator, TranslatorPreprocessor, nat_config


def test_the_backbone_config_is_its_architecture():
    backbone = NATBackbone.from_architecture(nat_config("tiny", vocab_size=50, decoder="ctc"))
    saved = backbone.get_config()
    assert saved["decoder"] == "ctc" and saved["vocab_size"] == 50
    assert not {"learning_rate", "copy_mechanism", "scheduled_sampling"} & set(saved)
    rebuilt = NATBackbone.from_config(saved)
    rebuilt.set_weights(backbone.get_weights())
    ids = {"source": np.array([[5, 6, 7, 0]])}
    np.testing.assert_allclose(rebuilt(ids)["tokens"], backbone(ids)["tokens"], atol=1e-6)
    with pytest.raises(ValueError, match="decoder"):
        NATBackbone(vocab_size=50, decoder="sideways")


def test_generate_after_load_model_and_no_fit_on_strings(tmp_path):
    texts = [s for pair in load_multi30k("val") for s in pair]
    vocabulary = train_sentencepiece(texts, tmp_path / "sp", vocab_size=400)
    backbone = NATBackbone.from_architecture(nat_config("tiny", vocab_size=400))
    nat = NATTranslator(backbone, TranslatorPreprocessor(vocabulary, max_length=48))
    # A preprocessor that reads more than the backbone's 48 positions would feed it sources
    # it cannot read.
    with pytest.raises(ValueError, match="reads 128 source tokens, more than the 48 that"):
        NATTranslator(backbone, TranslatorPreprocessor(vocabulary))
    expected = nat.generate(["A dog runs.", ""], iterations=2)
    nat.save(tmp_path / "nat.keras")
    loaded = keras.models.load_model(tmp_path / "nat.keras")
    assert type(loaded) is NATTranslator
    assert loaded.generate(["A dog runs.", ""], iterations=2) == expected
    assert expected[1] == ""
    # int8: its file loads int8 and translates as the quantized model does.
    with pytest.warns(UserWarning, match="left the layers of these kinds in float"):
        loaded.quantize("int8")
    int8 = loaded.generate(["A dog runs.", "Two men."], iterations=2)
    loaded.save(tmp_path / "int8.keras")
    reloaded = keras.models.load_model(tmp_path / "int8.keras")
    assert "int8" in {layer.quantization_mode for layer in reloaded.backbone._flatten_layers()}
    assert reloaded.generate(["A dog runs.", "Two men."], iterations=2) == int8
    with pytest.raises(NotImplementedError, match="zoo train nat"):
        loaded.compile()
        loaded.fit(tf.data.Dataset.from_tensor_slices((["A dog."], ["Ein Hund."])).batch(1))


def test_the_shipped_nat_loads_by_name_and_translates():
    nat = NATTranslator.from_preset("nat-en-de")
    assert nat.generate(["A dog runs."])[0].startswith("Ein Hund")
