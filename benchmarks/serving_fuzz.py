"""Fuzz the shipped SavedModels as TF Serving would call them (issue 14).

Hypothesis generates batches of 0, 1 or many inputs: empty strings, any Unicode (control
characters, right-to-left scripts, emoji, unassigned code points), inputs of up to 100,000
characters, and bytes that are not UTF-8. Each batch goes through the ``serving_default``
signature of every shipped SavedModel (loaded with TensorFlow and TensorFlow Text only). A
batch passes when the call returns, gives one output per input (valid UTF-8), and takes at most
``SECONDS_PER_INPUT`` per input (one second for an empty batch).

``python benchmarks/serving_fuzz.py [--inputs 10000]`` runs until that many inputs have gone
through the models (about a third each) and writes its table to ``benchmarks/RESULTS.md``;
``tests/export/test_shipped_serving.py`` runs the same check with a few examples.
"""

import argparse
import os
import sys
import time

from zoo_cli import quiet_native_logs

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "translator-en-de": "translations",
    "nat-en-de": "translations",
    "tagger-en-ewt": "lengths",  # one length per sentence; tags and tokens are padded rows
}
SECONDS_PER_INPUT = 10.0
LONGEST = 100_000  # characters

_RIGHT_TO_LEFT = st.characters(min_codepoint=0x0590, max_codepoint=0x08FF)  # Hebrew, Arabic
_EMOJI = st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF)
_CONTROL = st.characters(codec=None, categories=["Cc", "Cf", "Zl", "Zp"])
_WORDS = st.sampled_from(["A", "dog", "runs", "in", "the", "snow", ".", "Zwei", "Männer", " "])


def _long(piece):
    """``piece`` repeated to up to LONGEST characters (hypothesis draws short texts itself)."""
    return st.builds(lambda text, n: (text * n)[:LONGEST], piece, st.integers(1, LONGEST))


_TEXT = st.one_of(
    st.just(""),
    st.text(),  # any code point but surrogates
    st.lists(_WORDS, max_size=30).map(" ".join),
    st.text(st.one_of(_RIGHT_TO_LEFT, _EMOJI, _CONTROL)),
    _long(st.text(min_size=1, max_size=8)),
)
# One input as the bytes of a tf.string: UTF-8 text, or bytes that are not (cut code points,
# stray continuation bytes, anything).
INPUT = st.one_of(_TEXT.map(lambda text: text.encode("utf-8")), st.binary(max_size=64))
# Batches of 0, 1 and many.
BATCH = st.one_of(st.just([]), st.lists(INPUT, min_size=1, max_size=1), st.lists(INPUT, max_size=48))


def load_signatures():
    """``{model: (serving_default, the output to count)}`` of the shipped SavedModels."""
    found = {}
    for name, output in MODELS.items():
        folder = os.path.join(ROOT, "saved_models", name, "serving", "1")
        found[name] = (tf.saved_model.load(folder).signatures["serving_default"], output)
    return found


def check_batch(signature, output, batch):
    """Run one batch; assert one valid output per input in bounded time; return the seconds."""
    positional, named = signature.structured_input_signature  # a signature has named inputs
    (name,) = named or [spec.name for spec in positional]
    start = time.perf_counter()
    outputs = signature(**{name: tf.constant(batch, dtype=tf.string, shape=[len(batch)])})
    seconds = time.perf_counter() - start
    counted = outputs[output].numpy()
    assert counted.shape == (len(batch),), (counted.shape, len(batch))
    for value in outputs.values():
        assert value.shape[:1] == (len(batch),), (value.shape, len(batch))
        if value.dtype == tf.string:
            for text in np.asarray(value).ravel():
                text.decode("utf-8")  # raises on invalid UTF-8
    limit = SECONDS_PER_INPUT * max(1, len(batch))
    assert seconds <= limit, f"{seconds:.1f} s for {len(batch)} inputs (limit {limit:.0f} s)"
    return seconds


def fuzz(signatures, max_examples, round_seed=0, record=None):
    """Run ``max_examples`` generated batches (the same ones for a given ``round_seed``)
    through each model; ``record(model, batch, seconds)`` sees each passed batch."""
    for model, (signature, output) in signatures.items():

        @seed(round_seed)
        @settings(max_examples=max_examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(batch=BATCH)
        def run(batch):
            seconds = check_batch(signature, output, batch)
            if record:
                record(model, batch, seconds)

        run()


def main(argv=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs in all (default 10000)")
    args = parser.parse_args(argv)
    signatures = load_signatures()
    stats = {model: {"batches": 0, "inputs": 0, "seconds": 0.0, "worst": 0.0, "longest": 0}
             for model in signatures}  # fmt: skip

    def record(model, batch, seconds):
        row = stats[model]
        row["batches"] += 1
        row["inputs"] += len(batch)
        row["seconds"] += seconds
        row["worst"] = max(row["worst"], seconds / max(1, len(batch)))
        row["longest"] = max([row["longest"], *map(len, batch)])

    round_seed = 0
    while sum(row["inputs"] for row in stats.values()) < args.inputs:
        fuzz(signatures, max_examples=100, round_seed=round_seed, record=record)
        round_seed += 1
        print({model: row["inputs"] for model, row in stats.items()}, flush=True)
    rows = [[model, row["batches"], row["inputs"], row["longest"], f"{row['seconds']:.0f}",
             f"{row['worst']:.2f}"] for model, row in stats.items()]  # fmt: skip
    common.publish_table(
        "Serving fuzz: the shipped SavedModels on generated input",
        "python benchmarks/serving_fuzz.py --inputs " + str(args.inputs),
        ["SavedModel (serving_default)", "batches", "inputs", "longest input (bytes)",
         "seconds in all", "worst seconds per input"],
        rows,
        notes=[f"every batch passed: one valid UTF-8 output per input, at most "
               f"{SECONDS_PER_INPUT:.0f} s per input; batches of 0, 1 and up to 48 inputs"],
    )
    for row in rows:
        print(" | ".join(map(str, row)))


if __name__ == "__main__":
    main()
