"""The shipped non-autoregressive translator in saved_models/: complete, in its teacher's
vocabulary, and it translates with TensorFlow and TensorFlow Text alone."""

import filecmp
import os
import textwrap

from tests.harness import REPO_ROOT, assert_dog_in_the_snow, serve_without_zoo
from zoo.artifacts import serving_path

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "nat-en-de")
TEACHER = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")

_SCRIPT = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    serving = tf.saved_model.load(sys.argv[1])
    inputs = tf.constant(["A dog is running in the snow.", ""])
    out = serving.signatures["serving_default"](inputs=inputs)["translations"].numpy()
    print("serving_default", "|", out[0].decode(), "|", out[1].decode())
    refined = serving.signatures["translate_refined"]
    out = refined(inputs=inputs, iterations=tf.constant(1), length_beam=tf.constant(1))
    out = out["translations"].numpy()
    print("one pass", "|", out[0].decode(), "|", out[1].decode())
    assert "zoo" not in sys.modules
    """
)


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


def test_the_shipped_nat_translates_without_zoo():
    lines = serve_without_zoo(_SCRIPT, serving_path(SHIPPED))
    assert_dog_in_the_snow(lines, ("serving_default", "one pass"))
