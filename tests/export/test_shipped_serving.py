"""The shipped SavedModels as TF Serving serves them: saved_models/README.md's REST bodies and
models.config, their warm-up files, and generated input (benchmarks/serving_fuzz.py, a few
examples here; `python benchmarks/serving_fuzz.py` runs 10,000 inputs and records the result).

The SavedModels are loaded once, in a fresh Python that does not import zoo, as beside a
server: the tagger with TensorFlow alone, which tags EWT test there; then, after
`import tensorflow_text`, the translators. That process runs every check on the models and
reports; the tests read its report."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.export.test_warmup import read_warmup_requests
from tests.harness import REPO_ROOT, assert_dog_in_the_snow
from zoo.data import load_ud_english_ewt
from zoo.export.warmup import MAX_WARMUP_RECORDS

SAVED_MODELS = os.path.join(REPO_ROOT, "saved_models")
README = os.path.join(SAVED_MODELS, "README.md")
FUZZ = os.path.join(REPO_ROOT, "benchmarks", "serving_fuzz.py")
_BLOCK = re.compile(r"<!-- (request|response) ([\w-]+) -->\n```json\n(.*?)```", re.DOTALL)

_spec = importlib.util.spec_from_file_location("serving_fuzz", FUZZ)
serving_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serving_fuzz)

EWT_TEST = 300  # the first sentences of EWT test, tagged in the fresh process


# ---------------------------------------------------------------- saved_models/README.md
def _documented():
    """[(model folder, request, response)] in the README's order."""
    with open(README, encoding="utf-8") as f:
        blocks = _BLOCK.findall(f.read())
    assert blocks and len(blocks) % 2 == 0, "requests and responses come in pairs"
    pairs = []
    for (kind, model, request), (kind2, model2, response) in zip(blocks[::2], blocks[1::2]):
        assert (kind, kind2, model) == ("request", "response", model2), (kind, kind2, model, model2)
        pairs.append((model, json.loads(request), json.loads(response)))
    return pairs


# ---------------------------------------------------------------- the fresh process
# One Python (each costs seconds of TensorFlow's import) for every check on the three models.
# A failing check is reported with its traceback, and the others still run.
_SERVE = textwrap.dedent(
    """
    import importlib.util, json, os, sys, traceback
    import numpy as np
    import tensorflow as tf

    saved_models, fuzz_path = sys.argv[1:3]
    plan = json.loads(sys.stdin.read())
    report = {}

    def load(name):
        return tf.saved_model.load(os.path.join(saved_models, name, "serving", "1"))

    def check(name, function):
        try:
            report[name] = function()
        except Exception:
            report[name] = {"error": traceback.format_exc()}

    saved = {"tagger-en-ewt": load("tagger-en-ewt")}

    def tag():
        tags = []
        for batch in plan["tag"]:
            out = saved["tagger-en-ewt"].signatures["serving_default"](sentences=tf.constant(batch))
            tags += [[t.decode() for t in row[:n]]
                     for row, n in zip(out["tags"].numpy(), out["lengths"].numpy())]
        return tags

    check("tags", tag)
    assert "zoo" not in sys.modules and "tensorflow_text" not in sys.modules
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    saved.update({name: load(name) for name in ("translator-en-de", "nat-en-de")})

    def translate():
        inputs = tf.constant(["A dog is running in the snow.", ""])
        translator, nat = saved["translator-en-de"], saved["nat-en-de"]
        out = {name: translator.signatures[name](inputs=inputs)
               for name in ("serving_default", "translate_greedy")}
        out["nat serving_default"] = nat.signatures["serving_default"](inputs=inputs)
        out["nat one pass"] = nat.signatures["translate_refined"](
            inputs=inputs, iterations=tf.constant(1), length_beam=tf.constant(1))
        return {name: " | ".join(t.decode() for t in translations["translations"].numpy())
                for name, translations in out.items()}

    def call(saved_model, name, inputs):
        # As TF Serving's REST API: each input converted to its signature's dtype (its rank
        # checked); the outputs as JSON.
        signature = saved_model.signatures[name]
        specs = signature.structured_input_signature[1]
        assert set(inputs) == set(specs), (name, sorted(inputs), sorted(specs))
        tensors = {}
        for key, value in inputs.items():
            tensors[key] = tf.constant(value, dtype=specs[key].dtype)
            assert specs[key].shape.is_compatible_with(tensors[key].shape), (key, specs[key])
        return {key: json.loads(json.dumps(np.asarray(value).tolist(), default=bytes.decode))
                for key, value in signature(**tensors).items()}

    def rest_predict(model, request):
        outputs = call(saved[model], request["signature_name"], request["inputs"])
        return {"outputs": next(iter(outputs.values())) if len(outputs) == 1 else outputs}

    def warm_up():  # as TF Serving replays each file at load: every request must run
        replayed = {}
        for model, requests in plan["warmup"].items():
            for name, inputs in requests:
                assert call(saved[model], name, inputs), (model, name)
            replayed[model] = [name for name, _ in requests]
        return replayed

    def fuzz():
        spec = importlib.util.spec_from_file_location("serving_fuzz", fuzz_path)
        serving_fuzz = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(serving_fuzz)
        seen = {}

        def record(model, batch, seconds):
            seen.setdefault(model, []).append(len(batch))

        signatures = {name: (saved[name].signatures["serving_default"], output)
                      for name, output in serving_fuzz.MODELS.items()}
        serving_fuzz.fuzz(signatures, max_examples=4, record=record)
        return seen

    check("translations", translate)
    check("responses", lambda: [rest_predict(model, request)
                                for model, request in plan["documented"]])
    check("warmed_up", warm_up)
    check("fuzzed", fuzz)
    report["signatures"] = {name: sorted(model.signatures) for name, model in saved.items()}
    assert "zoo" not in sys.modules
    print(json.dumps(report))
    """
)


def _strings(array):
    """A warm-up request's input as JSON: its strings as text (the files hold UTF-8)."""
    if array.dtype == object:
        array = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array)
    return array.tolist()


@pytest.fixture(scope="module")
def ewt_test():
    return load_ud_english_ewt("test")[:EWT_TEST]


@pytest.fixture(scope="module")
def served(ewt_test):
    """The fresh process's report: ``tags`` of EWT_TEST sentences and then of three more (the
    first again, "", one of 600 words), ``translations`` (``{name: "output | output of ''"}``),
    the README's ``responses``, the ``warmed_up`` requests, the batch sizes ``fuzzed``, and
    the ``signatures``; a check that failed is ``{"error": traceback}``."""
    long = [w for s in ewt_test for w in s.words][:600]  # beyond the 256-word window
    texts = [" ".join(s.words) for s in ewt_test]
    warmup = {}
    for name in serving_fuzz.MODELS:
        requests = read_warmup_requests(os.path.join(SAVED_MODELS, name, "serving", "1"))
        assert 1 <= len(requests) <= MAX_WARMUP_RECORDS, name
        warmup[name] = [(signature, {key: _strings(value) for key, value in inputs.items()})
                        for signature, inputs in requests]  # fmt: skip
    plan = {
        # Two requests: a batch is padded to its longest sentence's windows, so the long one
        # goes with a short one and the empty string, not with all 300 (3 s more here).
        "tag": [texts, [texts[0], "", " ".join(long)]],
        "documented": [(model, request) for model, request, _ in _documented()],
        "warmup": warmup,
    }
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, SAVED_MODELS, FUZZ],
        input=json.dumps(plan), capture_output=True, text=True, timeout=600, cwd="/",
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def _passed(report, name):
    value = report[name]
    assert not (isinstance(value, dict) and "error" in value), value.get("error")
    return value


def test_every_signature_of_every_shipped_model_is_documented():
    documented = {(model, request["signature_name"]) for model, request, _ in _documented()}
    assert documented == {
        ("translator-en-de", "serving_default"), ("translator-en-de", "translate_greedy"),
        ("translator-en-de", "translate_beam"), ("translator-en-de", "translate_xla"),
        ("translator-en-de", "translate_greedy_xla"), ("nat-en-de", "serving_default"),
        ("nat-en-de", "translate_refined"), ("nat-en-de", "translate_xla"),
        ("tagger-en-ewt", "serving_default"), ("tagger-en-ewt", "tag_tokens"),
    }  # fmt: skip


def test_each_documented_request_gets_the_documented_response(served):
    responses = _passed(served, "responses")
    for (model, request, response), got in zip(_documented(), responses, strict=True):
        assert got == response, (model, request)


def test_the_model_config_names_each_shipped_base_path():
    with open(os.path.join(SAVED_MODELS, "models.config")) as f:
        config = f.read()
    paths = dict(re.findall(r'name: "(\w+)"\s+base_path: "/models/([\w/-]+)"', config))
    assert paths == {"translator": "translator-en-de/serving", "nat": "nat-en-de/serving",
                     "tagger": "tagger-en-ewt/serving"}  # fmt: skip
    for path in paths.values():
        assert os.path.isfile(os.path.join(SAVED_MODELS, path, "1", "saved_model.pb")), path


# ---------------------------------------------------------------- generated input
def test_generated_batches_give_one_valid_output_per_input_in_bounded_time(served):
    seen = _passed(served, "fuzzed")
    assert set(seen) == set(serving_fuzz.MODELS)
    for sizes in seen.values():  # hypothesis drew real batches, not only empty ones
        assert len(sizes) == 4 and sum(sizes) > 0


def test_the_check_fails_on_a_model_that_drops_an_input():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def drops_the_last(inputs):
        return {"translations": inputs[:-1]}

    with pytest.raises(AssertionError):
        serving_fuzz.check_batch(drops_the_last.get_concrete_function(), "translations", [b"a", b"b"])


def test_every_shipped_model_warms_up_its_plain_signatures(served):
    """Each SavedModel carries TF Serving's warm-up file: one request per plain signature, none
    for an _xla one (a server without XLA would fail the model's load); each request runs."""
    warmed_up = _passed(served, "warmed_up")
    for name, signatures in served["signatures"].items():
        plain = sorted(s for s in signatures if not s.endswith("_xla"))
        assert sorted(warmed_up[name]) == plain, name


# ---------------------------------------------------------------- without zoo
def test_the_shipped_translator_translates_without_zoo(served):
    translations = _passed(served, "translations")
    assert_dog_in_the_snow(translations, ("serving_default", "translate_greedy"))


def test_the_shipped_nat_translates_without_zoo(served):
    translations = _passed(served, "translations")
    assert_dog_in_the_snow(translations, ("nat serving_default", "nat one pass"))


def test_the_shipped_tagger_tags_without_zoo_or_tf_text(served, ewt_test):
    tags = _passed(served, "tags")
    assert tags[-3] == tags[0] and tags[-2] == [] and len(tags[-1]) == 600
    gold = [t for s in ewt_test for t in s.upos]
    predicted = [t for sentence in tags[:-3] for t in sentence]
    assert len(predicted) == len(gold)
    accuracy = sum(g == p for g, p in zip(gold, predicted)) / len(gold)
    assert accuracy > 0.93, accuracy  # 95.3% on the whole test split (its MODEL_CARD)
