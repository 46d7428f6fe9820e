"""The shipped non-autoregressive translator in saved_models/: complete and in its teacher's
vocabulary. (It translates with TensorFlow and TensorFlow Text alone: test_shipped_serving.py,
in one fresh Python with the other shipped models.)"""

import filecmp
import os

from tests.harness import REPO_ROOT

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "nat-en-de")
TEACHER = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")


def test_the_shipped_nat_is_small_complete_and_in_its_teachers_vocabulary():
    names = ("MODEL_CARD.md", "model.keras", "sentencepiece.model", "config.json",
             "serving/1/saved_model.pb")  # fmt: skip
    for name in names:
        assert os.path.exists(os.path.join(SHIPPED, name)), name
    size = sum(
        os.path.getsize(os.path.join(folder, f)) for folder, _, files in os.walk(SHIPPED) for f in files
    )
    assert size <= 30 * 2**20, f"the shipped model is {size / 2**20:.1f} MiB, over 30"
    # Distilled from the shipped translator: the same vocabulary, so it can rescore.
    assert filecmp.cmp(os.path.join(SHIPPED, "sentencepiece.model"),
                       os.path.join(TEACHER, "sentencepiece.model"), shallow=False)  # fmt: skip
