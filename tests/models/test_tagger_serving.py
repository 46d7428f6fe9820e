"""The exported tagger: files, the signature, and the SavedModel served by TensorFlow alone.

The SavedModels are loaded in a fresh process where neither ``zoo`` nor Keras nor tf-text can
be imported, which runs every request of ``CASES``: the SavedModel needs none of them. The
tags must equal those of ``Tagger.tag_columns`` on the in-memory model, with the same
window, on ``sentence.split()`` of the UTF-8-repaired sentence. The graph's pieces are checked
against Python references (tests/models/tagger_reference.py).
"""

import base64
import doctest
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import SAVED_MODEL_CLI_SHOW
from tests.models.tagger_reference import encode, tag_sentences, tagging_windows
from tests.models.test_tagger_task import (
    MAX_LENGTH,
    ewt,
    ewt_vocabulary,
    long_sentence,
    random_tagger,
    trained_tagger,
)
from zoo.artifacts import serving_path
from zoo.data import UPOS_TAGS, TaggerVocabulary
from zoo.models import Tagger, TaggerPreprocessor, build_tagger
from zoo.tasks.tagging.config import get_config as tagger_config  # a run's: it trains
from zoo.models.tagger import preprocessor as preprocessor_module
from zoo.models.tagger import serving as serving_module
from zoo.models.tagger.preprocessor import PYTHON_WHITESPACE, window_plan
from zoo.models.tagger.serving import TaggerServing


def export_tagger(model, vocabulary, output_dir, window=None):
    return Tagger.from_backbone(model, vocabulary, window=window).export_serving(output_dir)


def serving_of(model, vocabulary, window=None):
    tagger = Tagger.from_backbone(model, vocabulary, window=window, copy=False)
    return TaggerServing(tagger.backbone, tagger.preprocessor)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _dev_sentences():
    """About 50 EWT dev sentences: the first 30, and others with non-ASCII characters, words
    longer than the character window (8 characters between the markers) and capitals."""
    dev = ewt("dev")
    chosen = list(dev[:30])
    chosen += [s for s in dev[30:] if any(ord(c) > 127 for w in s.words for c in w)][:8]
    chosen += [s for s in dev[30:] if sum(len(w) > 12 for w in s.words) >= 2][:6]
    chosen += [s for s in dev[30:] if sum(w.isupper() and len(w) > 2 for w in s.words) >= 2][:6]
    return [" ".join(s.words) for s in chosen]


_LONG_SOURCE = ewt("dev")[:12]
DEV = _dev_sentences()
LONG = [" ".join(long_sentence(_LONG_SOURCE, n)) for n in (3 * MAX_LENGTH + 5, MAX_LENGTH,
                                                           MAX_LENGTH + 1, 5 * MAX_LENGTH)]  # fmt: skip
TRICKY = [
    "THE CAT SAT ON THE MAT .",
    "Ünïcödé wörds : ÀÉÎ straße İstanbul ΟΔΟΣ σοφός Ǆemal",
    "a\u00a0b\u3000c\td\ne\x1cf  g\u2029h \x85i",  # Unicode whitespace, as str.split() has it
    "Th\x00E c\x00at sat",  # NUL inside words
    "A dog 🐶 runs 🏃‍♀️ , 一只狗 .",
    "Supercalifragilisticexpialidocious internationalization ANTIDISESTABLISHMENTARIANISM",
    "   leading and trailing   ",
]
INVALID = [b"A dog \xff runs.\xc3", b"\xc3\x28 two men", b"\x80\x80\xfe", b"The \xe2\x82 cat"]
TAGGED = DEV + LONG + TRICKY

# name -> (the exported model, its inputs); run by the fresh process.
CASES = {
    "dev": ("upos", TAGGED),
    "empty": ("upos", [""]),
    "only_empty": ("upos", ["", "  \t\n ", "\u3000"]),
    "empty_batch": ("upos", []),
    "mixed": ("upos", ["", DEV[0], "   ", DEV[1], LONG[0]]),
    "invalid_utf8": ("upos", INVALID),
    "xpos": ("xpos", DEV[:20] + LONG[:1] + TRICKY + [""]),
    "xpos_empty_batch": ("xpos", []),
}

# One fresh process (each costs seconds of TensorFlow import): it serves every case of CASES
# where zoo, Keras and tf-text cannot be imported; then imports Keras and zoo (which registers
# its layers) and loads each model.keras; then runs `saved_model_cli show --all` on the XPOS
# export (the command is its module's main()).
_FRESH_SCRIPT = SAVED_MODEL_CLI_SHOW + textwrap.dedent(
    """
    import base64, json, os, sys
    requests_path, report_path = sys.argv[1:3]
    blocked = ["zoo", "keras", "tf_keras", "tensorflow_text"]
    for name in blocked:
        sys.modules[name] = None  # any import of it raises ImportError
    import tensorflow as tf
    before = {name for name, module in sys.modules.items() if module is not None}
    requests = json.load(open(requests_path))
    loaded = {key: tf.saved_model.load(path) for key, path in requests["models"].items()}
    outputs = {}
    for name, (key, inputs) in requests["cases"].items():
        signature = loaded[key].signatures["serving_default"]
        result = signature(sentences=tf.constant([base64.b64decode(s) for s in inputs], tf.string))
        outputs[name] = {
            "shapes": {k: v.shape.as_list() for k, v in result.items()},
            "dtypes": {k: v.dtype.name for k, v in result.items()},
            # Strict decoding: every string output is valid UTF-8.
            "values": {
                k: v.numpy().tolist() if v.dtype != tf.string
                else [[s.decode("utf-8") for s in row] for row in v.numpy()]
                for k, v in result.items()
            },
        }
    after = {name for name, module in sys.modules.items() if module is not None}

    for name in blocked:
        del sys.modules[name]
    os.environ["KERAS_BACKEND"] = requests["keras_backend"]
    sys.path.insert(0, requests["repo_root"])
    import numpy as np
    import keras
    import zoo  # registers the zoo layers
    data = np.load(requests["reload_inputs"])
    for key, path in requests["keras_files"].items():
        reloaded = keras.models.load_model(path)({"words": data["words"], "chars": data["chars"]})
        reloaded = reloaded if isinstance(reloaded, dict) else {"output": reloaded}
        np.savez(f"{key}.npz", **{k: keras.ops.convert_to_numpy(v) for k, v in reloaded.items()})

    json.dump(
        {
            "outputs": outputs,
            "signatures": {key: sorted(m.signatures) for key, m in loaded.items()},
            "imported_by_the_saved_model": sorted(after - before),
            "modules": sorted(after),
            "cli": saved_model_cli_show(requests["models"]["xpos"]),
        },
        open(report_path, "w"),
    )
    """
)


def _b64(text):
    return base64.b64encode(text if isinstance(text, bytes) else text.encode()).decode()


def _run_fresh_process(exported, vocabulary, tmp_path):
    """Run ``_FRESH_SCRIPT`` on the exports ``{"upos": folder, "xpos": folder}``; return its
    report, with the inputs of the model.keras reloads (``"reload_inputs"``) and their outputs
    (``"reloaded"``)."""
    inputs = encode(vocabulary, [s.split() for s in DEV if len(s.split()) <= MAX_LENGTH][:6])
    np.savez(tmp_path / "inputs.npz", **inputs)
    requests = {
        "models": {key: serving_path(path) for key, path in exported.items()},
        "cases": {name: (key, [_b64(t) for t in texts]) for name, (key, texts) in CASES.items()},
        "keras_files": {key: os.path.join(path, "model.keras") for key, path in exported.items()},
        "reload_inputs": str(tmp_path / "inputs.npz"),
        "keras_backend": keras.backend.backend(),
        "repo_root": REPO_ROOT,
    }
    requests_path, report_path = tmp_path / "requests.json", tmp_path / "report.json"
    requests_path.write_text(json.dumps(requests))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_SCRIPT, str(requests_path), str(report_path)],
        capture_output=True, text=True, env=dict(env, TF_CPP_MIN_LOG_LEVEL="3"), cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, f"the fresh process failed:\n{result.stderr[-4000:]}"
    report = json.loads(report_path.read_text())
    report["reload_inputs"] = inputs
    report["reloaded"] = {key: dict(np.load(tmp_path / f"{key}.npz")) for key in exported}
    return report


def _split(text):
    """What the SavedModel tags: the words of the UTF-8-repaired sentence."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text.split()


def _unpad(output, key):
    values, lengths = output["values"][key], output["values"]["lengths"]
    for row, length in zip(values, lengths):
        assert all(value == "" for value in row[length:]), row  # padded with ""
    return [row[:length] for row, length in zip(values, lengths)]


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def vocabulary():
    return ewt_vocabulary()


@pytest.fixture(scope="module")
def tagger():
    return trained_tagger()


@pytest.fixture(scope="module")
def xpos_tagger(vocabulary):
    """A tiny tagger with softmax UPOS and XPOS heads and learned positions; random weights."""
    return random_tagger(
        vocabulary, 5, use_crf=False, position="learned", num_xpos_tags=vocabulary.num_xpos_tags
    )


@pytest.fixture(scope="module")
def exported(tagger, xpos_tagger, vocabulary, tmp_path_factory):
    root = tmp_path_factory.mktemp("export_tagger")
    return {
        "upos": export_tagger(tagger, vocabulary, root / "tagger"),
        "xpos": export_tagger(xpos_tagger, vocabulary, str(root / "xpos_tagger")),
    }


@pytest.fixture(scope="module")
def served(exported, vocabulary, tmp_path_factory):
    # The tagger's graph has no tf-text op (tests/export/test_op_audit.py).
    return _run_fresh_process(exported, vocabulary, tmp_path_factory.mktemp("serve"))


# ---------------------------------------------------------------- the graph's pieces
def test_the_whitespace_is_pythons():
    assert [c for c in map(chr, range(0x110000)) if c.isspace()] == list(PYTHON_WHITESPACE)


def _assert_window_plan_equals_tagging_windows(lengths, window):
    plan = [t.numpy().tolist() for t in window_plan(tf.constant(lengths, tf.int64), window)]
    expected = [
        (b, start, first, end)
        for b, n in enumerate(lengths)
        for start, first, end in tagging_windows(n, window)
    ]
    assert list(zip(*plan)) == expected


@pytest.mark.parametrize("window", range(1, 10))
def test_window_plan_equals_tagging_windows(window):
    _assert_window_plan_equals_tagging_windows(list(range(0, 5 * window + 3)), window)


@pytest.mark.parametrize("window", [10, 15, 16, 31, 64, 255, 256])
def test_window_plan_equals_tagging_windows_for_wide_windows(window):
    # Every length around one, two and three windows, some far longer, in a shuffled batch.
    lengths = [n for k in (0, 1, 2, 3) for n in range(max(k * window - 5, 0), k * window + 6)]
    lengths += [window // 2, 5 * window + 1, 1000, 0, 1]
    lengths = [lengths[i] for i in np.random.default_rng(window).permutation(len(lengths))]
    _assert_window_plan_equals_tagging_windows(lengths, window)


@pytest.mark.parametrize("lowercase, max_word_length", [(True, 10), (False, 10), (True, 9)])
def test_the_graph_encodes_words_as_the_vocabulary_does(lowercase, max_word_length):
    words = sorted({w for s in ewt("dev")[:300] for w in s.words})
    tricky = ["ΟΔΟΣ", "οδος", "İSTANBUL", "Straße", "STRASSE", "A\x00B", "\x00", "Ǆ", "🏃‍♀️",
              "x" * 30, "ab", "abcdefghij", "abcdefghijk", "ﬃ", "\ufffd", "Ünïcödé"]  # fmt: skip
    # Words that lowercasing must find: final sigma, dotted I, NUL inside.
    vocab_words = ["the", "οδος", "i̇stanbul", "a\x00b", "ǆ", "straße", "ünïcödé", "ΟΔΟΣ", "The"]
    vocab_words = list(dict.fromkeys(vocab_words + words[::3]))
    chars = sorted({c for w in words + tricky for c in w})[::2]  # half the characters unknown
    vocabulary = TaggerVocabulary(vocab_words, chars, lowercase=lowercase,
                                  max_word_length=max_word_length)  # fmt: skip
    preprocessor = TaggerPreprocessor(vocabulary)
    everything = words + tricky
    word_ids, char_ids = preprocessor.encode(tf.constant(everything))
    expected = encode(vocabulary, [everything])
    np.testing.assert_array_equal(word_ids.numpy(), expected["words"][0])
    np.testing.assert_array_equal(char_ids.numpy(), expected["chars"][0])
    found = {w for w, i in zip(everything, word_ids.numpy()) if i > 1}  # not OOV
    assert {"ΟΔΟΣ", "οδος", "A\x00B", "Ǆ", "Ünïcödé"} & found == (
        {"ΟΔΟΣ", "οδος", "A\x00B", "Ǆ", "Ünïcödé"} if lowercase else {"ΟΔΟΣ", "οδος"}
    )
    assert ("İSTANBUL" in found) == lowercase
    assert "STRASSE" not in found and "\x00" not in found


# Letters with case (ASCII, ß, dotted I, sigma and final sigma, the titlecase digraph, a ligature,
# non-BMP capitals with and without a lowercase: Deseret, mathematical bold), a combining accent,
# an apostrophe, NUL, caseless letters, an emoji, U+FFFD and punctuation.
_ALPHABET = list("aAbBzZßİΣσςǄǅǆÉéﬃ\U00010400\U00010428\U0001d400\u0301'\x00一ä\U0001f436\ufffd-.")


@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
@pytest.mark.parametrize("max_word_length", range(3, 9))  # room for 1 to 6 characters
def test_random_words_encode_in_the_graph_as_in_python(max_word_length, lowercase):
    rng = np.random.default_rng(max_word_length)
    lengths = [*range(1, 2 * max_word_length + 4)] * 12
    words = ["".join(rng.choice(_ALPHABET, size=n)) for n in lengths]
    words += ["", "\x00", "Σ", "ΑΣ", "ΑΣ\x00Β", "A\x00Σ", "\U00010400" * 9]
    known = [w.lower() if lowercase else w for w in words[::2]]
    chars = [c for c in _ALPHABET if rng.random() < 0.5]  # the others are unknown characters
    vocabulary = TaggerVocabulary(list(dict.fromkeys(known)), chars, lowercase=lowercase,
                                  max_word_length=max_word_length)  # fmt: skip
    word_ids, char_ids = TaggerPreprocessor(vocabulary).encode(tf.constant(words))
    expected = encode(vocabulary, [words])
    np.testing.assert_array_equal(word_ids.numpy(), expected["words"][0])
    np.testing.assert_array_equal(char_ids.numpy(), expected["chars"][0])
    assert (expected["words"][0] > 1).sum() >= len(known) // 2  # many words are found


@pytest.mark.parametrize("long_word", ["ab" + "c" * 99_996 + "ba", "A\x00" * 50_000],
                         ids=["100k characters", "50k NULs"])
def test_many_words_beside_one_very_long_word_encode_in_bounded_memory(long_word):
    """Found by benchmarks/serving_fuzz.py: the graph once used a ragged tensor's row ids
    (broadcasting, ragged boolean_mask and reduce_join do), which TensorFlow builds in N x the
    longest row: 16 GB for these requests, and minutes; now a few MB and well under a second."""
    vocabulary = TaggerVocabulary(["a"], list("abc"), max_word_length=6, lowercase=True)
    words = ["a"] * 20_000 + [long_word]
    word_ids, char_ids = TaggerPreprocessor(vocabulary).encode(tf.constant(words))
    assert word_ids.shape == (20_001,) and char_ids.shape == (20_001, 6)
    expected = encode(vocabulary, [words[-2:]])
    np.testing.assert_array_equal(word_ids.numpy()[-2:], expected["words"][0])
    np.testing.assert_array_equal(char_ids.numpy()[-2:], expected["chars"][0])


def test_empty_vocabularies_encode_everything_as_unknown():
    vocabulary = TaggerVocabulary([], [], max_word_length=10)
    config = tagger_config("tiny", max_length=MAX_LENGTH, **vocabulary.config_overrides())
    serving = serving_of(build_tagger(config), vocabulary)
    word_ids, char_ids = TaggerPreprocessor(vocabulary).encode(tf.constant(["a", "bc"]))
    assert word_ids.numpy().tolist() == [1, 1]
    assert char_ids.numpy()[:, :4].tolist() == [[2, 1, 3, 0], [2, 1, 1, 3]]
    outputs = serving.tag(tf.constant(["a bc", ""]))
    assert outputs["lengths"].numpy().tolist() == [2, 0]


# ---------------------------------------------------------------- the exported folder
def test_the_exported_files(exported, vocabulary):
    for path in exported.values():
        assert sorted(os.listdir(path)) == ["model.keras", "serving", "vocabulary.json"]
        assert os.path.isfile(os.path.join(serving_path(path), "saved_model.pb"))
        assert TaggerVocabulary.load(os.path.join(path, "vocabulary.json")) == vocabulary


def test_model_keras_reloads_in_a_fresh_process(served, tagger, xpos_tagger):
    for key, model in (("upos", tagger), ("xpos", xpos_tagger)):
        loaded = served["reloaded"][key]
        expected = model(served["reload_inputs"])
        expected = expected if isinstance(expected, dict) else {"output": expected}
        assert sorted(loaded) == sorted(expected), key
        for name, value in expected.items():
            np.testing.assert_allclose(
                loaded[name], keras.ops.convert_to_numpy(value), atol=1e-5, err_msg=key
            )


def test_the_keras_file_has_no_optimizer_state(exported, tagger):
    assert tagger.optimizer is not None and tagger.optimizer.built  # it was trained
    with zipfile.ZipFile(os.path.join(exported["upos"], "model.keras")) as archive:
        with archive.open("model.weights.h5") as f, h5py.File(f) as weights:
            assert "optimizer" not in weights
            assert "layers" in weights


def test_saved_model_cli_lists_the_signature(served):
    # The XPOS export has every output; the served outputs of the UPOS export show its three.
    assert served["cli"]["code"] == 0
    stdout = served["cli"]["stdout"]
    assert "signature_def['serving_default']" in stdout, stdout
    body = stdout.split("signature_def['serving_default']")[1].split("Method name is")[0]
    inputs, outputs = body.split("following output(s):")
    assert "inputs['sentences'] tensor_info:" in inputs
    assert "DT_STRING" in inputs and "shape: (-1)" in inputs
    blocks = {b.split("']")[0]: b for b in outputs.split("outputs['")[1:]}
    assert sorted(blocks) == ["lengths", "tags", "tokens", "xpos_tags"], outputs
    assert "DT_INT32" in blocks["lengths"] and "shape: (-1)" in blocks["lengths"]
    for name in ("tags", "tokens", "xpos_tags"):
        assert "DT_STRING" in blocks[name] and "shape: (-1, -1)" in blocks[name]


# ---------------------------------------------------------------- serving
def test_the_saved_model_needs_neither_zoo_nor_keras(served):
    both = ["serving_default", "tag_tokens"]
    assert served["signatures"] == {"upos": both, "xpos": both}
    blocked = {"zoo", "keras", "tf_keras", "tensorflow_text"}
    roots = {name.split(".")[0] for name in served["imported_by_the_saved_model"]}
    assert not roots & blocked, served["imported_by_the_saved_model"]
    assert not [name for name in served["modules"] if name.split(".")[0] in blocked]
    assert sorted(served["outputs"]) == sorted(CASES)  # every case served there


def test_tags_equal_tag_sentences_of_the_in_memory_model(served, tagger, vocabulary):
    output = served["outputs"]["dev"]
    assert output["dtypes"] == {"lengths": "int32", "tags": "string", "tokens": "string"}
    words = [_split(text) for text in TAGGED]
    longest = max(len(w) for w in words)
    assert output["shapes"] == {"lengths": [len(TAGGED)], "tags": [len(TAGGED), longest],
                                "tokens": [len(TAGGED), longest]}  # fmt: skip
    assert output["values"]["lengths"] == [len(w) for w in words]
    assert _unpad(output, "tokens") == words
    expected = tag_sentences(tagger, vocabulary, words)
    tags = _unpad(output, "tags")
    assert len({tag for sentence in expected for tag in sentence}) > 5  # the tags vary
    assert set(tag for sentence in tags for tag in sentence) <= set(UPOS_TAGS)
    assert tags == expected


def test_long_sentences_get_a_tag_per_token_from_the_windows(served, tagger, vocabulary):
    output = served["outputs"]["dev"]
    tags = _unpad(output, "tags")
    for text in LONG:
        words = text.split()
        tagged = tags[TAGGED.index(text)]
        assert len(tagged) == len(words)
        assert tagged == tag_sentences(tagger, vocabulary, [words], window=MAX_LENGTH)[0]
    longest = LONG[3].split()
    assert len(longest) == 5 * MAX_LENGTH
    # Windows, not one pass: the model has no more than MAX_LENGTH positions to give.
    assert len(tagging_windows(len(longest), MAX_LENGTH)) > 5


def test_empty_sentences_have_no_tags(served, tagger, vocabulary):
    outputs = served["outputs"]
    assert outputs["empty"]["values"] == {"lengths": [0], "tags": [[]], "tokens": [[]]}
    assert outputs["empty"]["shapes"]["tags"] == [1, 0]
    assert outputs["only_empty"]["values"]["lengths"] == [0, 0, 0]
    assert outputs["only_empty"]["shapes"]["tags"] == [3, 0]
    for name in ("empty_batch", "xpos_empty_batch"):
        shapes = outputs[name]["shapes"]
        assert shapes["lengths"] == [0] and shapes["tags"] == [0, 0], name
    mixed = outputs["mixed"]
    texts = CASES["mixed"][1]
    assert mixed["values"]["lengths"] == [len(t.split()) for t in texts]
    expected = tag_sentences(tagger, vocabulary, [t.split() for t in texts])
    assert _unpad(mixed, "tags") == expected
    assert expected[0] == [] == expected[2]


def test_invalid_utf8_is_replaced(served, tagger, vocabulary):
    output = served["outputs"]["invalid_utf8"]
    words = [_split(text) for text in INVALID]
    assert all("\ufffd" in "".join(w) for w in words)
    assert _unpad(output, "tokens") == words
    assert _unpad(output, "tags") == tag_sentences(tagger, vocabulary, words)


def test_the_xpos_head_is_served(served, xpos_tagger, vocabulary):
    output = served["outputs"]["xpos"]
    assert sorted(output["values"]) == ["lengths", "tags", "tokens", "xpos_tags"]
    words = [_split(text) for text in CASES["xpos"][1]]
    xpos = tag_sentences(xpos_tagger, vocabulary, words, head="xpos")
    upos = tag_sentences(xpos_tagger, vocabulary, words)
    assert _unpad(output, "xpos_tags") == xpos
    assert _unpad(output, "tags") == upos
    assert set(tag for sentence in xpos for tag in sentence) <= set(vocabulary.xpos_tags)
    assert output["shapes"]["xpos_tags"] == output["shapes"]["tags"]


@pytest.mark.parametrize(
    "window, match",
    [(MAX_LENGTH + 1, "more than the model's max_length"), (0, "positive int")],
)
def test_bad_settings_are_refused_before_writing(tagger, vocabulary, tmp_path, window, match):
    with pytest.raises(ValueError, match=match):
        export_tagger(tagger, vocabulary, tmp_path / "out", window=window)
    assert not (tmp_path / "out").exists()


def test_another_vocabulary_is_refused_before_writing(tagger, vocabulary, tmp_path):
    other = TaggerVocabulary(vocabulary.words[:-1], vocabulary.chars, max_word_length=10)
    with pytest.raises(ValueError, match="not its vocabulary"):
        export_tagger(tagger, other, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_smaller_window_is_served(tagger, vocabulary):
    serving = serving_of(tagger, vocabulary, window=5)
    texts = [LONG[0], DEV[0], ""]
    outputs = serving.tag(tf.constant(texts))
    expected = tag_sentences(tagger, vocabulary, [t.split() for t in texts], window=5)
    tags = [[t.decode() for t in row[:n]] for row, n in
            zip(outputs["tags"].numpy(), outputs["lengths"].numpy())]  # fmt: skip
    assert tags == expected
    assert tags != tag_sentences(tagger, vocabulary, [t.split() for t in texts])  # other windows


def test_docstring_examples_run():
    result = doctest.testmod(serving_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# ---------------------------------------------------------------- lemma scripts in the graph
LEMMA_PAIRS = [
    ("walked", "walk"), ("Dogs", "dog"), ("Paris", "Paris"), ("US", "US"), ("eBay", "eBay"),
    ("went", "go"), ("gemacht", "machen"), ("Häuser", "Haus"), ("ΟΔΟΣ", "οδός"),
    ("γάτες", "γάτα"), ("кошки", "кошка"), ("I", "I"), ("_", "_"), ("2000", "2000"),
    ("McDonald's", "McDonald"), ("iPhones", "iPhone"), ("New York", "New York"),
]  # fmt: skip


def test_lemma_scripts_apply_in_the_graph_as_in_python():
    """Every script of LEMMA_PAIRS on every form (most do not fit, some cut all of it): the
    graph's lemma is the Python one, or the form where the Python script does not apply."""
    from zoo.data.lemma_scripts import apply_lemma_script, lemma_script

    scripts = sorted({lemma_script(form, lemma) for form, lemma in LEMMA_PAIRS})
    forms = [form for form, _ in LEMMA_PAIRS] + ["", "a", "Ab", "ÉCOLE"]
    words = [form for form in forms for _ in scripts]
    ids = [i for _ in forms for i in range(len(scripts))]
    table = preprocessor_module._script_table(scripts)
    served = preprocessor_module._apply_scripts(tf.constant(words), tf.constant(ids, tf.int32),
                                                table)  # fmt: skip
    expected = []
    for word, i in zip(words, ids):
        lemma = apply_lemma_script(word, scripts[i])
        expected.append(word if lemma is None else lemma)
    assert [s.decode() for s in served.numpy()] == expected


def test_one_lowercasing_equals_str_lower_where_letters_depend_on_context():
    """Training, tag and the SavedModel look words up through one lowercasing, the graph's
    (tf.strings.lower, NULs kept); it equals str.lower, which built the vocabulary, on the
    letters that depend on their context or expand: Greek final sigma, Turkish dotted I,
    German sharp s."""
    words = ["ΟΔΟΣ", "ΟΔΟΣ.", "ΣΟΦΟΣ", "Σ", "ΑΣ\x00Β", "İstanbul", "İ", "STRAẞE", "Straße", "ẞ"]
    lowered = preprocessor_module.lowercase(tf.constant(words)).numpy()
    assert [word.decode() for word in lowered] == [word.lower() for word in words]
    vocabulary = TaggerVocabulary.build([words, words], min_count=2, max_word_length=10)
    word_ids, _ = TaggerPreprocessor(vocabulary).encode(tf.constant(words))
    assert (word_ids.numpy() > 1).all()  # every word found, none OOV
