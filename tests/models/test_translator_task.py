"""The translator in keras-hub's shape: backbone, preprocessor and task model."""

import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import REPO_ROOT, fit_built
from zoo.data import BOS_ID, EOS_ID, load_multi30k, make_translation_dataset, train_sentencepiece
from zoo.decoding.text import _COMPILED
from zoo.layers import TokenAndPositionEmbedding
from zoo.models import Translator, TranslatorBackbone, TranslatorPreprocessor, translator_config
from zoo.models.translator import attention_weights, translator_layers

PAIRS = load_multi30k("val")[:64]


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    texts = [s for pair in load_multi30k("val") for s in pair]
    return train_sentencepiece(texts, tmp_path_factory.mktemp("sp") / "sp", vocab_size=400)


@pytest.fixture(scope="module")
def translator(vocabulary):
    keras.utils.set_random_seed(0)
    return Translator.from_architecture("tiny", vocabulary, max_length=24)


def test_the_backbone_config_is_its_architecture():
    config = translator_config("tiny", vocab_size=50, cross_attention_layers=(0,))
    backbone = TranslatorBackbone.from_architecture(config)
    saved = backbone.get_config()
    assert saved["vocab_size"] == 50 and saved["cross_attention_layers"] == [0]
    assert not {"learning_rate", "epochs", "batch_tokens", "shuffle_buffer"} & set(saved)
    rebuilt = TranslatorBackbone.from_config(saved)
    rebuilt.set_weights(backbone.get_weights())
    ids = {"source": np.array([[5, 6, 0]]), "target_in": np.array([[2, 7]])}
    np.testing.assert_allclose(rebuilt(ids), backbone(ids), atol=1e-6)
    assert rebuilt.architecture == backbone.architecture == config  # the config it was built from
    # The searches read the layers by role, not by their names.
    assert translator_layers(backbone) is backbone.roles
    assert backbone.roles.encoder_outputs[0].name == "encoder_output_0"


def test_a_bad_architecture_is_refused_by_name():
    with pytest.raises(ValueError, match="cross_attention"):
        TranslatorBackbone(vocab_size=50, cross_attention="sideways")


def test_the_preprocessor_packs_as_the_training_pipeline_does(vocabulary):
    preprocessor = TranslatorPreprocessor(vocabulary, max_length=12)
    sources, targets = [s for s, _ in PAIRS[:8]], [t for _, t in PAIRS[:8]]
    x, y, weights = preprocessor(sources, targets)
    tokens = preprocessor.tokenizer.tokenize(tf.constant(sources)).to_list()
    assert [[i for i in row if i] for row in x["source"].numpy().tolist()] == [
        row[:12] for row in tokens
    ]
    assert set(x["target_in"][:, 0].numpy()) == {BOS_ID}
    lengths = np.sum(y.numpy() != 0, axis=1)
    assert all(y.numpy()[i, n - 1] == EOS_ID for i, n in enumerate(lengths))
    np.testing.assert_array_equal(weights.numpy(), (y.numpy() != 0).astype("float32"))
    # The same examples as the training pipeline's, row by row.
    pipeline = make_translation_dataset(PAIRS[:8], preprocessor.tokenizer, batch_tokens=4096,
                                        max_length=12, shuffle=False, long_pairs="truncate")

    def rows(features, labels):
        return {tuple(tuple(int(i) for i in row if i) for row in (s, t, o)) for s, t, o in
                zip(features["source"].numpy(), features["target_in"].numpy(), labels.numpy())}

    expected = set().union(*(rows(f, l) for f, l in pipeline))
    assert rows(x, y) == expected


def test_generate_is_strings_in_strings_out(translator):
    outputs = translator.generate(["A dog runs.", ""], method="greedy")
    assert len(outputs) == 2 and all(isinstance(text, str) for text in outputs)
    assert outputs[1] == ""
    assert isinstance(translator.generate("A dog runs.", method="greedy"), str)
    with pytest.raises(ValueError, match="sampler"):
        translator.compile(sampler="nucleus")


def test_fit_on_string_pairs_lowers_the_loss(translator):
    data = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in PAIRS], [t for _, t in PAIRS])
    ).batch(16)
    translator.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = fit_built(translator, data, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.9 * losses[0], losses


def test_load_model_alone_in_a_fresh_process_gives_a_translator(translator, tmp_path):
    translator.save(tmp_path / "model.keras")
    expected = translator.generate(["A dog runs.", "Two men."], method="greedy")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(tmp_path / "model.keras", alone)
    script = (
        "import sys, keras, zoo\n"
        "m = keras.models.load_model(sys.argv[1])\n"
        "print(type(m).__name__)\n"
        "print('\\n'.join(m.generate(['A dog runs.', 'Two men.'], method='greedy')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(alone / "model.keras")],
                            capture_output=True, text=True, cwd=str(alone), check=True)  # fmt: skip
    assert result.stdout.splitlines() == ["Translator", *expected]


def test_from_preset_names_the_shipped_translator_and_reads_folders(tmp_path):
    link = os.path.join(REPO_ROOT, "zoo", "models", "translator", "presets",
                        "translator-en-de.keras")  # fmt: skip
    assert os.path.realpath(link) == os.path.realpath(
        os.path.join(REPO_ROOT, "saved_models", "translator-en-de", "model.keras")
    )
    with pytest.raises(ValueError, match="neither a shipped model"):
        Translator.from_preset("translator-xx-yy")
    with pytest.raises(FileNotFoundError, match="no model"):
        Translator.from_preset(str(tmp_path))


def test_an_int8_translator_translates_and_its_keras_file_keeps_it_int8(translator, tmp_path):
    """``quantize("int8")``: int8 weights, the tied table's too; the searches compiled before
    on the float weights are dropped; its weights take a byte each; its file loads int8,
    translating as the quantized model does."""
    sentences = [source for source, _ in PAIRS[:8]]
    path = str(tmp_path / "float.keras")
    translator.save(path)
    quantized = keras.models.load_model(path)
    quantized.generate(sentences, method="greedy")  # compiled on the float weights
    assert quantized.backbone in _COMPILED
    with pytest.warns(UserWarning) as said:  # one warning, not one per layer left in float
        quantized.quantize("int8")
    said = [str(warning.message) for warning in said]
    assert [m for m in said if "left the layers of these kinds in float" in m] == said[-1:]
    assert "LayerNormalization" in said[-1] and not [m for m in said if "does not have" in m]
    assert quantized.backbone not in _COMPILED
    int8 = quantized.generate(sentences, method="greedy")
    weight_bytes = [sum(w.nbytes for w in model.backbone.get_weights())
                    for model in (translator, quantized)]  # fmt: skip
    assert weight_bytes[1] < 0.4 * weight_bytes[0], weight_bytes  # 1 byte a weight, not 4
    quantized.save(tmp_path / "int8.keras")
    loaded = keras.models.load_model(tmp_path / "int8.keras")
    embedding = next(layer for layer in loaded.backbone._flatten_layers()
                     if isinstance(layer, TokenAndPositionEmbedding))  # fmt: skip
    assert embedding.token_embedding.quantization_mode == "int8"
    assert loaded.generate(sentences, method="greedy") == int8
    # Some layers only (Keras's filters): the file loads with the others still float.
    partial = keras.models.load_model(path)
    partial.quantize("int8", filters=lambda layer: "decoder_block" in (layer.path or ""))
    partial.save(tmp_path / "partial.keras")
    loaded = keras.models.load_model(tmp_path / "partial.keras")
    modes = [{layer.path: layer.quantization_mode for layer in model.backbone._flatten_layers()}
             for model in (partial, loaded)]  # fmt: skip
    assert modes[0] == modes[1] and {"int8", None} == set(modes[0].values())
    assert loaded.generate(sentences, method="greedy") == partial.generate(sentences,
                                                                           method="greedy")


def test_the_shipped_translator_loads_by_name_and_translates():
    translator = Translator.from_preset("translator-en-de")
    assert translator.generate(["A dog runs."], method="greedy")[0].startswith("Ein Hund")


def test_every_attention_map_is_exposed_with_its_pieces(translator):
    weights, source, target = translator.attention_weights("A dog runs.", "Ein Hund rennt.")
    blocks = len(translator.backbone.roles.encoder_blocks)
    assert {k: len(v) for k, v in weights.items()} == {
        "encoder_self": blocks, "decoder_self": len(translator.backbone.roles.decoder_blocks),
        "cross": len(translator.backbone.roles.decoder_blocks)}
    heads = translator.backbone.get_config()["num_heads"]
    S, T = len(source), len(target)
    assert target[0] == "<s>"
    assert weights["encoder_self"][0].shape == (heads, S, S)
    assert weights["decoder_self"][0].shape == (heads, T, T)
    assert weights["cross"][0].shape == (heads, T, S)
    for maps in weights.values():  # each row a distribution
        np.testing.assert_allclose(maps[-1].sum(-1), 1.0, atol=1e-5)
    # The decoder's self attention is causal: nothing above the diagonal.
    assert np.all(np.triu(weights["decoder_self"][0][0], k=1) == 0)
    # The cross attention is the one the pictures have always read.
    ids = translator.preprocessor(["A dog runs."], ["Ein Hund rennt."])[0]
    reference = attention_weights(translator.backbone, ids["source"], ids["target_in"])["cross"]
    np.testing.assert_allclose(weights["cross"][-1], np.asarray(reference[-1])[0], atol=1e-6)
