"""The shipped tagger in saved_models/: complete, and it tags EWT test with TensorFlow alone."""

import json
import os
import subprocess
import sys
import textwrap

from tests.harness import REPO_ROOT
from zoo.artifacts import serving_path
from zoo.data import load_ud_english_ewt

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "tagger-en-ewt")

_SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import tensorflow as tf

    serving = tf.saved_model.load(sys.argv[1])
    tags = []
    for batch in json.loads(sys.stdin.read()):
        out = serving.signatures["serving_default"](sentences=tf.constant(batch))
        tags += [[t.decode() for t in row[:n]]
                 for row, n in zip(out["tags"].numpy(), out["lengths"].numpy())]
    print(json.dumps(tags))
    assert "zoo" not in sys.modules and "tensorflow_text" not in sys.modules
    """
)


def test_the_shipped_tagger_is_complete_and_its_card_has_its_scores():
    for name in ("MODEL_CARD.md", "model.keras", "vocabulary.json", "serving/1/saved_model.pb",
                 "eval/test.json", "config.json"):
        assert os.path.exists(os.path.join(SHIPPED, name)), name
    with open(os.path.join(SHIPPED, "eval", "test.json")) as f:
        accuracy = json.load(f)["upos"]["accuracy"]
    with open(os.path.join(SHIPPED, "MODEL_CARD.md")) as f:
        assert f"{accuracy:.2f}" in f.read()


def test_the_shipped_tagger_tags_without_zoo_or_tf_text():
    test = load_ud_english_ewt("test")[:300]
    long = [w for s in test for w in s.words][:600]  # beyond the 256-word window
    texts = [" ".join(s.words) for s in test]
    # Two requests: a batch is padded to its longest sentence's windows, so the long one goes
    # with a short one and the empty string, not with all 300 (3 s more here).
    batches = [texts, [texts[0], "", " ".join(long)]]
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, serving_path(SHIPPED)],
        input=json.dumps(batches), capture_output=True, text=True, timeout=300, cwd="/",
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tags = json.loads(result.stdout.splitlines()[-1])
    assert tags[-3] == tags[0] and tags[-2] == [] and len(tags[-1]) == 600
    gold = [t for s in test for t in s.upos]
    predicted = [t for sentence in tags[:-3] for t in sentence]
    assert len(predicted) == len(gold)
    accuracy = sum(g == p for g, p in zip(gold, predicted)) / len(gold)
    assert accuracy > 0.93, accuracy  # 95.3% on the whole test split (its MODEL_CARD)
