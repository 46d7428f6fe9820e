"""The shipped tagger in saved_models/: complete, and its card has its scores. (It tags EWT test
with TensorFlow alone: test_shipped_serving.py, in one fresh Python with the other shipped
models.)"""

import json
import os

from tests.harness import REPO_ROOT

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "tagger-en-ewt")


def test_the_shipped_tagger_is_complete_and_its_card_has_its_scores():
    for name in ("MODEL_CARD.md", "model.keras", "vocabulary.json", "serving/1/saved_model.pb",
                 "eval/test.json", "config.json"):
        assert os.path.exists(os.path.join(SHIPPED, name)), name
    with open(os.path.join(SHIPPED, "eval", "test.json")) as f:
        accuracy = json.load(f)["upos"]["accuracy"]
    with open(os.path.join(SHIPPED, "MODEL_CARD.md")) as f:
        assert f"{accuracy:.2f}" in f.read()
