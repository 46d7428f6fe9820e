"""saved_models/README.md tells the truth: each documented REST request fits its signature
(names, dtypes, shapes), the SavedModel answers it with the documented response, and
models.config points at the shipped base paths."""

import json
import os
import re
import textwrap

from tests.harness import REPO_ROOT, serve_without_zoo

SAVED_MODELS = os.path.join(REPO_ROOT, "saved_models")
README = os.path.join(SAVED_MODELS, "README.md")
_BLOCK = re.compile(r"<!-- (request|response) ([\w-]+) -->\n```json\n(.*?)```", re.DOTALL)

# Runs each request as TF Serving's REST API reads it: every input converted to its
# signature's dtype, the inputs' ranks checked against the signature, and the outputs written
# back as the REST response (a single output without its name).
_SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    loaded = {}
    for index, (folder, request) in enumerate(json.loads(sys.argv[1])):
        if folder not in loaded:
            loaded[folder] = tf.saved_model.load(folder)
        signature = loaded[folder].signatures[request["signature_name"]]
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
        body = next(iter(outputs.values())) if len(outputs) == 1 else outputs
        print(index, "|", json.dumps({"outputs": body}))
    assert "zoo" not in sys.modules
    """
)


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


def test_every_signature_of_every_shipped_model_is_documented():
    documented = {(model, request["signature_name"]) for model, request, _ in _documented()}
    assert documented == {
        ("translator-en-de", "serving_default"), ("translator-en-de", "translate_greedy"),
        ("translator-en-de", "translate_beam"), ("nat-en-de", "serving_default"),
        ("nat-en-de", "translate_refined"), ("tagger-en-ewt", "serving_default"),
    }  # fmt: skip


def test_each_documented_request_gets_the_documented_response():
    pairs = _documented()
    jobs = [(os.path.join(SAVED_MODELS, model, "serving", "1"), request)
            for model, request, _ in pairs]  # fmt: skip
    lines = serve_without_zoo(_SCRIPT, json.dumps(jobs))
    assert len(lines) == len(pairs)
    for index, (model, request, response) in enumerate(pairs):
        assert json.loads(lines[str(index)]) == response, (model, request["signature_name"])


def test_the_model_config_names_each_shipped_base_path():
    with open(os.path.join(SAVED_MODELS, "models.config")) as f:
        config = f.read()
    paths = dict(re.findall(r'name: "(\w+)"\s+base_path: "/models/([\w/-]+)"', config))
    assert paths == {"translator": "translator-en-de/serving", "nat": "nat-en-de/serving",
                     "tagger": "tagger-en-ewt/serving"}  # fmt: skip
    for path in paths.values():
        assert os.path.isfile(os.path.join(SAVED_MODELS, path, "1", "saved_model.pb")), path
