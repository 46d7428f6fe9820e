"""The exported folder: files, signatures, and the SavedModel served by TensorFlow alone.

The SavedModel is loaded in a fresh process where ``zoo`` and Keras cannot be imported (it
loads tf-text's SentencePiece op library by path, since ``import tensorflow_text`` imports
Keras for its own Keras layers), replays its warm-up file as TF Serving does at load, and runs
every request of ``CASES``: the SavedModel needs neither. XLA's dumps count what each stage
compiles. The same process then imports ``tensorflow_text`` as a TF user does and serves some
requests again. The translations must equal those of :func:`zoo.tasks.translate` on the
in-memory model.
"""

import base64
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import MAX_LENGTH
from tests.export.test_warmup import read_warmup_requests
from tests.harness import SAVED_MODEL_CLI_SHOW, load_in_fresh_process
from zoo.artifacts import serving_path
from zoo.data import UNK_ID, SentencePieceTokenizer
from zoo.decoding.text import BUCKETS
from zoo.tasks import translate
from zoo.models import Translator
from zoo.models.translator.serving import MAX_BEAM_SIZE, SIGNATURES

SENTENCES = [
    "A dog runs.",
    "Two men are talking in the street.",
    "A little girl climbing into a wooden playhouse.",
    "Red car.",
    "Ein Mann mit einem orangefarbenen Hut.",
]
MULTISCRIPT = ["A dog 🐶 runs 🏃‍♀️.", "一只狗在雪地里奔跑。", "Собака бежит по снегу.", "Ελληνικά ✓"]
LONG = "A dog runs. " * 100  # hundreds of tokens, truncated to MAX_LENGTH
LONGER = "A dog runs. " * 300  # the same first MAX_LENGTH tokens
TRANSLATED = SENTENCES + MULTISCRIPT + [LONG, LONGER]
INVALID = [b"A dog \xff runs.\xc3", b"\xc3\x28 two men", b"\x80\x80\xfe"]
REPAIRED = [text.decode("utf-8", errors="replace") for text in INVALID]
SHORT = ["A."]  # two tokens

# name -> (signature, inputs, beam_size or None); run by the fresh process.
CASES = {
    "default": ("serving_default", TRANSLATED, None),
    "greedy": ("translate_greedy", TRANSLATED, None),
    "beam_2": ("translate_beam", TRANSLATED, 2),
    "beam_default": ("translate_beam", SENTENCES, 4),
    "beam_0": ("translate_beam", SENTENCES[:2], 0),
    "beam_1": ("translate_beam", SENTENCES[:2], 1),
    "beam_huge": ("translate_beam", SENTENCES[:2], 10**6),
    "beam_max": ("translate_beam", SENTENCES[:2], MAX_BEAM_SIZE),
    "empty": ("serving_default", [""], None),
    "only_empty": ("translate_greedy", ["", "", ""], None),
    "only_empty_beam": ("translate_beam", ["", ""], 3),
    "empty_batch": ("serving_default", [], None),
    "empty_batch_greedy": ("translate_greedy", [], None),
    "empty_batch_beam": ("translate_beam", [], 2),
    "mixed": ("translate_greedy", ["", SENTENCES[0], "   ", SENTENCES[1]], None),
    "invalid_utf8": ("translate_greedy", INVALID, None),
    "invalid_utf8_beam": ("serving_default", INVALID, None),
    "xla": ("translate_xla", TRANSLATED, None),
    "greedy_xla": ("translate_greedy_xla", TRANSLATED, None),
    "mixed_xla": ("translate_greedy_xla", ["", SENTENCES[0], "   ", SENTENCES[1]], None),
    "empty_batch_xla": ("translate_xla", [], None),
    "invalid_utf8_xla": ("translate_xla", INVALID, None),
    # A request of one short sentence: each search's length follows its padded width.
    "short_greedy": ("translate_greedy", SHORT, None),
    "short_greedy_xla": ("translate_greedy_xla", SHORT, None),
    "short_beam": ("serving_default", SHORT, None),
    # Past the largest batch bucket (64): searched in parts of 64 rows.
    "split_greedy": ("translate_greedy", TRANSLATED * 7, None),
    "split_greedy_xla": ("translate_greedy_xla", TRANSLATED * 7, None),
}
# After the XLA warm-up, each side of every row bucket's edge (1, 8, 64; the arithmetic of every
# batch size is tests/decoding/test_buckets.py's), and past 64: split into parts of 64.
SWEEP_ROWS = (1, 2, 7, 8, 9, 63, 64, 65, 100, 130)
# One fresh process (each costs seconds of TensorFlow import) replays the warm-up file and serves
# CASES and the sweep without Keras, counting XLA's compiles, then USER_CASES after
# `import tensorflow_text`, then runs `saved_model_cli show --all` (the command is its module's
# main()).
USER_CASES = ("default", "greedy")
_SERVE_SCRIPT = SAVED_MODEL_CLI_SHOW + textwrap.dedent(
    """
    import base64, glob, json, os, sys
    saved_model, plan_path, report_path, sentencepiece_ops, dump = sys.argv[1:6]
    for name in ["zoo", "keras", "tf_keras"]:
        sys.modules[name] = None  # any import of it raises ImportError
    import tensorflow as tf
    tf.load_op_library(sentencepiece_ops)
    plan = json.load(open(plan_path))
    cases = plan["cases"]

    def strings(texts):
        return tf.constant([base64.b64decode(s) for s in texts], tf.string)

    def compiled():  # XLA dumps each program it compiles as module_NNNN.*
        return len({os.path.basename(p).split(".")[0]
                    for p in glob.glob(os.path.join(dump, "module_*"))})

    def serve(serving, names):
        outputs = {}
        for name in names:
            signature, inputs, beam_size = cases[name]
            kwargs = {"inputs": strings(inputs)}
            if beam_size is not None:
                kwargs["beam_size"] = tf.constant(beam_size, tf.int32)
            translations = serving.signatures[signature](**kwargs)
            outputs[name] = {
                "keys": sorted(translations),
                "shape": translations["translations"].shape.as_list(),
                "texts": [base64.b64encode(t).decode()
                          for t in translations["translations"].numpy()],
            }
        return outputs

    before = {name for name, module in sys.modules.items() if module is not None}
    serving = tf.saved_model.load(saved_model)
    for name, inputs in plan["warmup"]:  # as TF Serving replays the file at load
        specs = serving.signatures[name].structured_input_signature[1]
        assert set(inputs) == set(specs), (name, sorted(inputs), sorted(specs))
        serving.signatures[name](**{
            key: strings(value) if specs[key].dtype == tf.string
            else tf.constant(value, specs[key].dtype) for key, value in inputs.items()})
    compiles = {"warm": compiled()}
    outputs = serve(serving, cases)
    compiles["cases"] = compiled()
    for name, text, rows in plan["sweep"]:
        serving.signatures[name](inputs=strings([text] * rows))
    compiles["sweep"] = compiled()
    after = {name for name, module in sys.modules.items() if module is not None}
    del sys.modules["keras"], sys.modules["tf_keras"]  # zoo stays blocked
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    user = serve(tf.saved_model.load(saved_model), plan["user_cases"])
    json.dump(
        {
            "outputs": outputs,
            "user_outputs": user,
            "compiles": compiles,
            "signatures": sorted(serving.signatures),
            "imported_by_the_saved_model": sorted(after - before),
            "modules": sorted(after),
            "cli": saved_model_cli_show(saved_model),
        },
        open(report_path, "w"),
    )
    """
)


def _b64(text):
    return base64.b64encode(text if isinstance(text, bytes) else text.encode()).decode()


def _serve(export_dir, tmp_path, warmup):
    """Replay ``warmup``, then serve CASES, the sweep and USER_CASES, in a fresh process;
    return its report."""
    xla = sorted({name for name, _ in warmup if name.endswith("_xla")})
    texts = sorted({inputs["inputs"][0] for name, inputs in warmup if name in xla})
    plan = {
        "cases": {name: (signature, [_b64(t) for t in inputs], k)
                  for name, (signature, inputs, k) in CASES.items()},
        "warmup": [(name, {key: [_b64(t) for t in value] if value.dtype == object
                           else value.tolist() for key, value in inputs.items()})
                   for name, inputs in warmup],
        "sweep": [(name, _b64(text), rows) for name in xla for rows in SWEEP_ROWS
                  for text in texts],
        "user_cases": USER_CASES,
    }  # fmt: skip
    plan_path = tmp_path / "plan.json"
    report_path = tmp_path / "report.json"
    plan_path.write_text(json.dumps(plan))
    package = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    ops = os.path.join(package, "python", "ops", "_sentencepiece_tokenizer.so")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
    dump = tmp_path / "xla_dump"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}"
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_SCRIPT, serving_path(export_dir),
         str(plan_path), str(report_path), ops, str(dump)],
        capture_output=True, text=True, env=dict(env, TF_CPP_MIN_LOG_LEVEL="3"),
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"serving in a fresh process failed:\n{result.stderr[-4000:]}"
    report = json.loads(report_path.read_text())
    for output in [*report["outputs"].values(), *report["user_outputs"].values()]:
        # Strict decoding: every translation is valid UTF-8.
        output["texts"] = [base64.b64decode(t).decode("utf-8") for t in output["texts"]]
    return report


@pytest.fixture(scope="module")
def warmup(export_dir):
    """The requests of the export's warm-up file, read by protobuf's parser."""
    return read_warmup_requests(serving_path(export_dir))


@pytest.fixture(scope="module")
def served(export_dir, warmup, tmp_path_factory):
    return _serve(export_dir, tmp_path_factory.mktemp("serve"), warmup)


@pytest.fixture(scope="module")
def references(model, tokenizer):
    """The in-memory translations, by zoo.tasks.translate (XLA). One call per search, as each
    new batch shape compiles: SHORT and the repaired INVALID go with TRANSLATED, since every
    source here pads to MAX_LENGTH tokens, alone or not."""
    n = len(TRANSLATED)
    beam = translate(model, tokenizer, TRANSLATED + SHORT, beam_size=4, alpha=0.6)
    greedy = translate(model, tokenizer, TRANSLATED + SHORT + REPAIRED[:-1], method="greedy")
    return {
        "beam": beam[:n],
        "greedy": greedy[:n],
        "beam_2": translate(model, tokenizer, TRANSLATED, beam_size=2, alpha=0.6),
        "short_greedy": greedy[n : n + 1],
        "short_beam": beam[n:],
        "invalid_utf8": greedy[n + 1 :],
    }


def test_the_exported_files(export_dir, tokenizer):
    assert sorted(os.listdir(export_dir)) >= ["model.keras", "sentencepiece.model", "serving"]
    with open(os.path.join(export_dir, "sentencepiece.model"), "rb") as f:
        assert f.read() == tokenizer.model_proto
    assert os.path.isfile(os.path.join(serving_path(export_dir), "saved_model.pb"))


def test_model_keras_loads_in_a_fresh_process(model, export_dir):
    rng = np.random.default_rng(0)
    inputs = {
        "source": rng.integers(4, 400, (2, 7)).astype("int32"),
        "target_in": rng.integers(4, 400, (2, 5)).astype("int32"),
    }
    inputs["source"][1, 4:] = 0
    (loaded,) = load_in_fresh_process(os.path.join(export_dir, "model.keras"), inputs)
    np.testing.assert_allclose(loaded, np.asarray(model(inputs)), atol=1e-5)


def test_saved_model_cli_lists_the_signatures(served):
    assert served["cli"]["code"] == 0
    stdout = served["cli"]["stdout"]
    shown = {}
    for block in stdout.split("signature_def['")[1:]:
        name, body = block.split("']", 1)
        shown[name] = body.split("Method name is")[0]
    assert set(SIGNATURES) <= set(shown), stdout
    for name in SIGNATURES:
        inputs, outputs = shown[name].split("following output(s):")
        assert "inputs['inputs'] tensor_info:" in inputs and "DT_STRING" in inputs
        assert "shape: (-1)" in inputs
        assert "outputs['translations'] tensor_info:" in outputs and "DT_STRING" in outputs
        assert ("inputs['beam_size']" in inputs) == (name == "translate_beam")
    assert "DT_INT32" in shown["translate_beam"] and "shape: ()" in shown["translate_beam"]


def test_the_saved_model_runs_where_neither_zoo_nor_keras_can_be_imported(served):
    assert set(SIGNATURES) <= set(served["signatures"])
    assert sorted(served["outputs"]) == sorted(CASES)  # every case served there
    roots = {name.split(".")[0] for name in served["imported_by_the_saved_model"]}
    assert not roots & {"zoo", "keras", "tf_keras"}, served["imported_by_the_saved_model"]
    assert not [name for name in served["modules"] if name.split(".")[0] in ("zoo", "keras")]


def test_it_serves_the_same_after_import_tensorflow_text(served):
    # As a TF user loads it: tensorflow_text imported (with its Keras layers).
    for name in USER_CASES:
        assert served["user_outputs"][name]["texts"] == served["outputs"][name]["texts"], name


def test_after_the_xla_warm_up_no_request_compiles(served, warmup):
    """The export's XLA warm-up (16 source positions: one padded length) compiles every program
    of its _xla signatures; then CASES, and requests of batch sizes on each side of every row
    bucket's edge at every padded length, and of 100 and 130 (split into parts of 64), through
    both, compile nothing. Counted from XLA's dumps (a loaded signature has one concrete
    function; XLA compiles per shape beneath it)."""
    xla = sorted({name for name, _ in warmup if name.endswith("_xla")})
    lengths = len(BUCKETS.widths(MAX_LENGTH))
    programs = len(BUCKETS.rows) * lengths * 2  # batch buckets x lengths x signatures
    assert xla == ["translate_greedy_xla", "translate_xla"]
    assert len({inputs["inputs"][0] for name, inputs in warmup if name in xla}) == lengths
    assert len(warmup) == 3 + programs  # + 3 plain
    compiles = served["compiles"]
    assert compiles["warm"] >= programs, compiles  # each program compiled (a stage may be 2)
    # CASES' _xla requests, then 10 batch sizes a length: 0 compiles.
    assert compiles["cases"] == compiles["sweep"] == compiles["warm"], compiles


def test_translations_equal_translate_of_the_in_memory_model(served, references):
    outputs = {name: output["texts"] for name, output in served["outputs"].items()}
    assert all(output["keys"] == ["translations"] for output in served["outputs"].values())
    assert len(set(references["greedy"])) > 3, references["greedy"]  # not all alike
    assert outputs["greedy"] == references["greedy"]
    assert outputs["default"] == references["beam"]
    assert outputs["beam_2"] == references["beam_2"]
    assert outputs["beam_default"] == references["beam"][: len(SENTENCES)]
    # The XLA-compiled searches: the same translations.
    assert outputs["greedy_xla"] == references["greedy"]
    assert outputs["xla"] == references["beam"]
    # A translation that never ends (random weights) is as long in every path.
    assert outputs["short_greedy"] == outputs["short_greedy_xla"] == references["short_greedy"]
    assert outputs["short_beam"] == references["short_beam"]
    # 77 sentences, in parts of 64 rows: each one as in a batch of its own width.
    assert outputs["split_greedy"] == outputs["split_greedy_xla"] == references["greedy"] * 7


def test_beam_size_is_clamped(served):
    outputs = {name: output["texts"] for name, output in served["outputs"].items()}
    assert outputs["beam_0"] == outputs["beam_1"]
    assert outputs["beam_huge"] == outputs["beam_max"]


def test_empty_inputs_give_empty_translations(served, references):
    outputs = served["outputs"]
    assert outputs["empty"]["texts"] == [""]
    assert outputs["only_empty"]["texts"] == ["", "", ""]
    assert outputs["only_empty_beam"]["texts"] == ["", ""]
    for name in ("empty_batch", "empty_batch_greedy", "empty_batch_beam"):
        assert outputs[name]["shape"] == [0] and outputs[name]["texts"] == [], name
    greedy = references["greedy"]
    assert outputs["mixed"]["texts"] == ["", greedy[0], "", greedy[1]]
    assert outputs["mixed_xla"]["texts"] == ["", greedy[0], "", greedy[1]]
    assert outputs["empty_batch_xla"]["shape"] == [0]


def test_long_inputs_are_truncated(served, references, tokenizer):
    assert len(tokenizer.tokenize(tf.constant([LONG]))[0]) > 10 * MAX_LENGTH
    for name in ("default", "greedy", "beam_2", "xla"):
        texts = served["outputs"][name]["texts"]
        # Both read only their first MAX_LENGTH tokens, which are the same.
        assert texts[TRANSLATED.index(LONG)] == texts[TRANSLATED.index(LONGER)]


def test_invalid_utf8_is_replaced(tokenizer, served, references):
    assert all("\ufffd" in text for text in REPAIRED)
    # SentencePiece's normalization drops U+FFFD: the last input, nothing but invalid bytes,
    # has no tokens left, and translates to "".
    assert tokenizer.tokenize(tf.constant(REPAIRED[-1:])).row_lengths().numpy().tolist() == [0]
    expected = references["invalid_utf8"] + [""]  # translate() of the repaired inputs
    assert served["outputs"]["invalid_utf8"]["texts"] == expected
    assert len(served["outputs"]["invalid_utf8_beam"]["texts"]) == len(INVALID)
    outputs = served["outputs"]
    assert outputs["invalid_utf8_xla"]["texts"] == outputs["invalid_utf8_beam"]["texts"]


def test_other_scripts_and_emoji_pass_through_the_tokenizer(export_dir, served):
    exported = SentencePieceTokenizer(os.path.join(export_dir, "sentencepiece.model"))
    ids = exported.tokenize(tf.constant(MULTISCRIPT))
    assert not np.any(ids.flat_values.numpy() == UNK_ID)  # byte fallback, never <unk>
    roundtrip = [text.decode("utf-8") for text in exported.detokenize(ids).numpy()]
    assert roundtrip == MULTISCRIPT
    first = TRANSLATED.index(MULTISCRIPT[0])
    assert all(served["outputs"]["default"]["texts"][first : first + len(MULTISCRIPT)])


@pytest.fixture(scope="module")
def translator(model, tokenizer):
    """The session's model as a task model: one copy of the backbone for the refusals."""
    return Translator.from_backbone(model, tokenizer)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_input_length": MAX_LENGTH + 1}, "source positions"),
        ({"max_output_length": MAX_LENGTH + 1}, "target positions"),
        ({"max_input_length": 0}, "positive int"),
        ({"default_beam_size": 0}, "positive int"),
        ({"default_beam_size": MAX_BEAM_SIZE + 1}, "at most"),
        ({"alpha": float("nan")}, "alpha must be a finite number"),
    ],
)
def test_bad_settings_are_refused_before_writing(translator, tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        translator.export_serving(tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_a_vocabulary_of_another_size_is_refused(tokenizer, tmp_path):
    from zoo.models import build_translator, translator_config

    other = build_translator(translator_config("tiny", vocab_size=500, max_length=MAX_LENGTH))
    with pytest.raises(ValueError, match="vocab_size=500"):
        Translator.from_backbone(other, tokenizer).export_serving(tmp_path / "out")


def test_the_keras_file_has_no_optimizer_state(model, export_dir):
    import zipfile

    import h5py

    assert model.optimizer.built and model.optimizer.variables  # the state left out
    with zipfile.ZipFile(os.path.join(export_dir, "model.keras")) as archive:
        with archive.open("model.weights.h5") as f, h5py.File(f) as weights:
            assert "optimizer" not in weights
            assert "layers" in weights
