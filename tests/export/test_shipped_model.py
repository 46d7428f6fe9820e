"""The shipped translator in saved_models/: it loads as shipped and it translates."""

import os
import textwrap

from tests.harness import REPO_ROOT, assert_dog_in_the_snow, serve_without_zoo
from zoo.artifacts import serving_path

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")

_SCRIPT = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    serving = tf.saved_model.load(sys.argv[1])
    inputs = tf.constant(["A dog is running in the snow.", ""])
    for name in ("serving_default", "translate_greedy"):
        out = serving.signatures[name](inputs=inputs)["translations"].numpy()
        print(name, "|", out[0].decode(), "|", out[1].decode())
    assert "zoo" not in sys.modules
    """
)


def test_the_shipped_translator_is_small_and_complete():
    names = ("MODEL_CARD.md", "model.keras", "sentencepiece.model", "serving/1/saved_model.pb")
    for name in names:
        assert os.path.exists(os.path.join(SHIPPED, name)), name
    size = sum(
        os.path.getsize(os.path.join(folder, f)) for folder, _, files in os.walk(SHIPPED) for f in files
    )
    assert size <= 30 * 2**20, f"the shipped model is {size / 2**20:.1f} MiB, over 30"


def test_the_shipped_translator_translates_without_zoo():
    lines = serve_without_zoo(_SCRIPT, serving_path(SHIPPED))
    assert_dog_in_the_snow(lines, ("serving_default", "translate_greedy"))
