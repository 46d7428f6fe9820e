"""The shipped SavedModels as TF Serving serves them: saved_models/README.md's REST bodies and
models.config, and generated input (benchmarks/serving_fuzz.py, a few examples here;
`python benchmarks/serving_fuzz.py` runs 10,000 inputs and records the result). The
SavedModels are loaded once, with TensorFlow and TensorFlow Text only."""

import importlib.util
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

from tests.harness import REPO_ROOT

SAVED_MODELS = os.path.join(REPO_ROOT, "saved_models")
README = os.path.join(SAVED_MODELS, "README.md")
_BLOCK = re.compile(r"<!-- (request|response) ([\w-]+) -->\n```json\n(.*?)```", re.DOTALL)

_spec = importlib.util.spec_from_file_location(
    "serving_fuzz", os.path.join(REPO_ROOT, "benchmarks", "serving_fuzz.py")
)
serving_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serving_fuzz)


@pytest.fixture(scope="module")
def saved():
    return {name: tf.saved_model.load(os.path.join(SAVED_MODELS, name, "serving", "1"))
            for name in serving_fuzz.MODELS}  # fmt: skip


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


def _rest_predict(saved_model, request):
    """The REST response of TF Serving's columnar API: each input converted to its signature's
    dtype (its rank checked), a single output given without its name."""
    signature = saved_model.signatures[request["signature_name"]]
    specs = signature.structured_input_signature[1]
    assert set(request["inputs"]) == set(specs), (sorted(request["inputs"]), sorted(specs))
    inputs = {}
    for name, value in request["inputs"].items():
        tensor = tf.constant(value, dtype=specs[name].dtype)
        assert specs[name].shape.is_compatible_with(tensor.shape), (name, specs[name])
        inputs[name] = tensor
    outputs = {
        name: json.loads(json.dumps(np.asarray(value).tolist(), default=bytes.decode))
        for name, value in signature(**inputs).items()
    }
    return {"outputs": next(iter(outputs.values())) if len(outputs) == 1 else outputs}


def test_every_signature_of_every_shipped_model_is_documented():
    documented = {(model, request["signature_name"]) for model, request, _ in _documented()}
    assert documented == {
        ("translator-en-de", "serving_default"), ("translator-en-de", "translate_greedy"),
        ("translator-en-de", "translate_beam"), ("translator-en-de", "translate_xla"),
        ("translator-en-de", "translate_greedy_xla"), ("nat-en-de", "serving_default"),
        ("nat-en-de", "translate_refined"), ("nat-en-de", "translate_xla"),
        ("tagger-en-ewt", "serving_default"), ("tagger-en-ewt", "tag_tokens"),
    }  # fmt: skip


def test_each_documented_request_gets_the_documented_response(saved):
    for model, request, response in _documented():
        assert _rest_predict(saved[model], request) == response, (model, request)


def test_the_model_config_names_each_shipped_base_path():
    with open(os.path.join(SAVED_MODELS, "models.config")) as f:
        config = f.read()
    paths = dict(re.findall(r'name: "(\w+)"\s+base_path: "/models/([\w/-]+)"', config))
    assert paths == {"translator": "translator-en-de/serving", "nat": "nat-en-de/serving",
                     "tagger": "tagger-en-ewt/serving"}  # fmt: skip
    for path in paths.values():
        assert os.path.isfile(os.path.join(SAVED_MODELS, path, "1", "saved_model.pb")), path


# ---------------------------------------------------------------- generated input
def test_generated_batches_give_one_valid_output_per_input_in_bounded_time(saved):
    seen = {}

    def record(model, batch, seconds):
        seen.setdefault(model, []).append(len(batch))

    signatures = {name: (saved[name].signatures["serving_default"], output)
                  for name, output in serving_fuzz.MODELS.items()}  # fmt: skip
    serving_fuzz.fuzz(signatures, max_examples=4, record=record)
    assert set(seen) == set(serving_fuzz.MODELS)
    for sizes in seen.values():  # hypothesis drew real batches, not only empty ones
        assert len(sizes) == 4 and sum(sizes) > 0


def test_the_check_fails_on_a_model_that_drops_an_input():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def drops_the_last(inputs):
        return {"translations": inputs[:-1]}

    with pytest.raises(AssertionError):
        serving_fuzz.check_batch(drops_the_last.get_concrete_function(), "translations", [b"a", b"b"])


def test_every_shipped_model_warms_up_its_plain_signatures(saved):
    """Each SavedModel carries TF Serving's warm-up file: one request per plain signature, none
    for an _xla one (a server without XLA would fail the model's load); each request runs."""
    from tests.export.test_warmup import replay_warmup

    for name, loaded in saved.items():
        requests = replay_warmup(os.path.join(SAVED_MODELS, name, "serving", "1"), loaded)
        plain = sorted(s for s in loaded.signatures if not s.endswith("_xla"))
        assert sorted(signature for signature, _ in requests) == plain, name
