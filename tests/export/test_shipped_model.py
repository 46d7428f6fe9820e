"""The shipped translator in saved_models/: it is small and complete as shipped. (It
translates without zoo: test_shipped_serving.py, in one fresh Python with the other shipped
models.)"""

import os

from tests.harness import REPO_ROOT

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")


def test_the_shipped_translator_is_small_and_complete():
    names = ("MODEL_CARD.md", "model.keras", "sentencepiece.model", "serving/1/saved_model.pb")
    for name in names:
        assert os.path.exists(os.path.join(SHIPPED, name)), name
    size = sum(
        os.path.getsize(os.path.join(folder, f)) for folder, _, files in os.walk(SHIPPED) for f in files
    )
    assert size <= 30 * 2**20, f"the shipped model is {size / 2**20:.1f} MiB, over 30"
