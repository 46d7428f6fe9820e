"""The exported non-autoregressive translator: its SavedModel equals zoo.tasks.translate
(method "mask_predict") of the in-memory model, clamps the counts of a request, and loads with
TensorFlow and tf-text alone."""

import base64
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import MAX_LENGTH, VOCAB_SIZE
from zoo.artifacts import serving_path
from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
from zoo.tasks import translate
from zoo.decoding.nat import MAX_ITERATIONS, MAX_LENGTH_BEAM
from zoo.models.nat import NATTranslator, nat_counts
from zoo.models.nat.serving import NAT_SIGNATURES
from zoo.models import build_translator, translator_config
from zoo.models.nat import build_nat_translator, get_config, nat_modes
from zoo.tasks import get_task, load

SENTENCES = ["A dog runs.", "Two men are talking in the street.", "Red car.", "Ein Mann."]
LONG = "A dog runs. " * 100  # hundreds of tokens, truncated to MAX_LENGTH
LONGER = "A dog runs. " * 300  # the same first MAX_LENGTH tokens
INVALID = [b"A dog \xff runs.\xc3", b"\x80\x80\xfe"]  # the last has no token left
INPUTS = [s.encode() for s in SENTENCES + ["", LONG, LONGER]] + INVALID
# What translate() reads: the inputs as str, invalid UTF-8 replaced.
TEXTS = [s.decode("utf-8", errors="replace") for s in INPUTS]


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(5)
    return build_nat_translator(
        get_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH, share_embeddings=False)
    )


@pytest.fixture(scope="module")
def tokenizer(model, tmp_path_factory):
    """Made after the model's seed (tf.random.set_seed kills tf-text resources made before)."""
    texts = [s for pair in load_multi30k("val")[:500] for s in pair]
    prefix = tmp_path_factory.mktemp("nat_export_spm") / "joint"
    return SentencePieceTokenizer(train_sentencepiece(texts, prefix, vocab_size=VOCAB_SIZE))


@pytest.fixture(scope="module")
def export_dir(model, tokenizer, tmp_path_factory):
    return get_task("nat").export(model, tokenizer, tmp_path_factory.mktemp("export") / "nat")


@pytest.fixture(scope="module")
def serving(export_dir):
    return tf.saved_model.load(serving_path(export_dir))


def _run(serving, signature, inputs=INPUTS, **counts):
    kwargs = {name: tf.constant(value, tf.int32) for name, value in counts.items()}
    outputs = serving.signatures[signature](inputs=tf.constant(inputs, tf.string), **kwargs)
    assert list(outputs) == ["translations"]
    return [text.decode("utf-8") for text in outputs["translations"].numpy()]


def _translate(model, tokenizer, iterations, length_beam):
    return translate(
        model, tokenizer, TEXTS, method="mask_predict", iterations=iterations,
        length_beam=length_beam,
    )  # fmt: skip


def test_the_exported_files(export_dir, tokenizer, serving):
    assert sorted(os.listdir(export_dir)) == ["model.keras", "sentencepiece.model", "serving"]
    with open(os.path.join(export_dir, "sentencepiece.model"), "rb") as f:
        assert f.read() == tokenizer.model_proto
    assert sorted(serving.signatures) == sorted(NAT_SIGNATURES)


def test_the_saved_model_equals_translate(model, tokenizer, serving):
    # Refined counts; one pass through the SavedModel: the copy and max-length model below.
    expected = _translate(model, tokenizer, 4, 3)
    got = _run(serving, "translate_refined", iterations=4, length_beam=3)
    assert got == expected
    assert len(set(expected)) > 3, expected  # not all alike
    empty, long, longer = (INPUTS.index(s.encode()) for s in ("", LONG, LONGER))
    assert got[empty] == got[-1] == ""  # no tokens: nothing decoded
    assert got[long] == got[longer] != ""  # truncated to the same first MAX_LENGTH tokens
    assert "\ufffd" in TEXTS[-2] and got[-2]  # invalid UTF-8 replaced, then translated
    assert _run(serving, "serving_default") == expected  # the defaults
    assert _run(serving, "translate_xla") == expected  # the same, compiled by XLA
    assert _run(serving, "translate_xla", []) == []


def test_both_options_serve_as_translate_from_the_export_folder(tokenizer, tmp_path):
    """A copy model of the max length mode: its modes travel in model.keras (an export
    folder has no config.json), so the loaded model and the SavedModel decode as the model
    does, one pass at one length (predict refuses more; a request for more is clamped)."""
    keras.utils.set_random_seed(6)
    config = get_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH,
                        share_embeddings=False, decoder_input="copy", length_mode="max")
    model = build_nat_translator(config)
    export_dir = get_task("nat").export(model, tokenizer, tmp_path / "nat")
    assert nat_counts(model) == (1, 1)  # the defaults of serving_default and predict
    task, loaded, vocabulary = load(export_dir)
    assert nat_modes(loaded) == nat_modes(model)
    for got, weights in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(got, weights)
    # The loaded model is the model: its predict is translate() of the model (one compile).
    expected = task.predict(loaded, vocabulary, TEXTS)
    assert expected == _translate(loaded, vocabulary, 1, 1)
    assert len(set(expected)) > 3, expected
    assert expected[TEXTS.index("")] == "" and not any("\u2047" in t for t in expected)  # no mask
    for option in ("iterations", "length_beam"):
        with pytest.raises(ValueError, match=f"{option}=2: a model with"):
            task.predict(loaded, vocabulary, TEXTS[:1], **{option: 2})
    serving = tf.saved_model.load(serving_path(export_dir))
    assert _run(serving, "serving_default") == expected
    assert _run(serving, "translate_refined", iterations=4, length_beam=3) == expected
    assert _run(serving, "translate_xla") == expected


def test_the_counts_are_clamped(serving):
    def refined(iterations, length_beam):
        return _run(serving, "translate_refined", INPUTS[:3], iterations=iterations,
                    length_beam=length_beam)  # fmt: skip

    assert refined(0, -3) == refined(1, 1) != refined(MAX_ITERATIONS, MAX_LENGTH_BEAM)
    assert refined(10**6, 10**6) == refined(MAX_ITERATIONS, MAX_LENGTH_BEAM)
    assert _run(serving, "translate_refined", [], iterations=2, length_beam=2) == []


def test_bad_models_and_settings_are_refused_before_writing(model, tokenizer, tmp_path):
    translator = build_translator(translator_config("tiny", vocab_size=VOCAB_SIZE))
    with pytest.raises(ValueError, match="needs a NATBackbone"):
        NATTranslator.from_backbone(translator, tokenizer).export_serving(tmp_path / "out")
    with pytest.raises(ValueError, match="at most"):
        NATTranslator.from_backbone(model, tokenizer).export_serving(
            tmp_path / "out", default_length_beam=MAX_LENGTH_BEAM + 1)
    with pytest.raises(ValueError, match="positive int"):
        NATTranslator.from_backbone(model, tokenizer).export_serving(
            tmp_path / "out", default_iterations=0)
    assert not (tmp_path / "out").exists()


_SERVE_SCRIPT = textwrap.dedent(
    """
    import base64, json, sys
    sys.modules["zoo"] = None  # any import of zoo raises ImportError
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    saved_model, inputs = sys.argv[1], json.loads(sys.argv[2])
    serving = tf.saved_model.load(saved_model)
    inputs = tf.constant([base64.b64decode(s) for s in inputs])
    count = lambda n: tf.constant(n, tf.int32)
    outputs = [
        serving.signatures["serving_default"](inputs=inputs),
        serving.signatures["translate_refined"](
            inputs=inputs, iterations=count(2), length_beam=count(2)),
    ]
    print(json.dumps({
        "texts": [[t.decode("utf-8") for t in o["translations"].numpy()] for o in outputs],
        "zoo": sorted(name for name, m in sys.modules.items() if m and name.startswith("zoo")),
    }))
    """
)


def test_the_saved_model_loads_without_zoo(export_dir, serving, tmp_path):
    inputs = [INPUTS[0], INPUTS[4], INVALID[0]]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
    encoded = json.dumps([base64.b64encode(s).decode() for s in inputs])
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_SCRIPT, serving_path(export_dir), encoded],
        capture_output=True, text=True, env=dict(env, TF_CPP_MIN_LOG_LEVEL="3"),
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["zoo"] == []
    assert report["texts"] == [
        _run(serving, "serving_default", inputs),
        _run(serving, "translate_refined", inputs, iterations=2, length_beam=2),
    ]
