"""Tagging throughput: the tagger's serving SavedModel against the Python path, same model.

The sentences of UD English-EWT test (2,077 sentences, 25,094 words), each its words joined by
one space, are tagged in batches of 64 consecutive sentences, two ways, timed alternately in
one run (the median of several rounds after a warm-up round; one round tags every sentence):

- serving: the ``serving_default`` signature of ``<model-dir>/serving``
  (:mod:`zoo.models.tagger.serving`), one call per batch of 64 sentence strings: whitespace
  split, vocabulary lookups, windows, the model and Viterbi decoding, all in one TensorFlow
  graph (plain graph mode, no XLA);
- Python: ``Tagger.tag_columns`` of the task model of ``<model-dir>/model.keras`` with
  ``batch_size=64``, one call per batch of the same 64 sentences (``str.split()``): the same
  preprocessing and decoding in a ``tf.function`` of its own (every head).

Both read the same words and give one tag per word; the benchmark checks that the tags are
the same, and the figure is the ratio of the throughputs, in tokens (words) tagged per second.

    python benchmarks/tagger_throughput.py [--model-dir saved_models/tagger-en-ewt] [--quick]

``--model-dir`` is a folder of ``Tagger.export_serving`` (``zoo export tagger``): ``model.keras``,
``vocabulary.json`` and ``serving/1/`` (the highest version is read).
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)
from common import replace_section  # noqa: E402,F401  (also used by the tests as bench.replace_section)

import zoo  # noqa: E402, F401  (registers the layers for load_model)
from zoo.artifacts import MODEL_FILE, TAGGER_VOCABULARY_FILE, latest_serving_path  # noqa: E402
from zoo.data import TaggerVocabulary, load_ud_english_ewt  # noqa: E402

TITLE = "Tagger throughput: serving SavedModel vs Tagger.tag (UD English-EWT test, batch 64)"
SERVING = "serving SavedModel (graph)"
PYTHON = "Tagger.tag_columns (Python, its own tf.function)"
BATCH = 64


def load_tagger(model_dir):
    """``(keras_model, vocabulary, serving_function)`` of an exported tagger folder."""
    missing = [
        name
        for name in (MODEL_FILE, TAGGER_VOCABULARY_FILE)
        if not os.path.exists(os.path.join(model_dir, name))
    ]
    serving_dir = latest_serving_path(model_dir)
    if serving_dir is None:
        missing.append("serving/N/saved_model.pb")
    if missing:
        raise FileNotFoundError(
            f"{model_dir} lacks {', '.join(missing)}: pass --model-dir, a folder written by "
            "zoo export tagger (model.keras, vocabulary.json, serving/1/)."
        )
    model = keras.models.load_model(os.path.join(model_dir, MODEL_FILE), compile=False)
    vocabulary = TaggerVocabulary.load(os.path.join(model_dir, TAGGER_VOCABULARY_FILE))
    serving = tf.saved_model.load(serving_dir)
    return model, vocabulary, serving.signatures["serving_default"]


def batches_of(texts, batch_size):
    return [texts[start : start + batch_size] for start in range(0, len(texts), batch_size)]


def serving_tags(function, batch):
    """The tags of one batch of sentence strings, through the SavedModel: a list of lists."""
    outputs = function(sentences=tf.constant(batch))
    tags, lengths = outputs["tags"].numpy(), outputs["lengths"].numpy()
    return [[t.decode() for t in row[:n]] for row, n in zip(tags, lengths)]


def python_tags(model, vocabulary, batch):
    """The UPOS tags of one batch of sentence strings, through the task model (batch 64)."""
    return model.tag_columns([text.split() for text in batch], batch_size=BATCH)["upos"]


def measure_throughput(model, vocabulary, serving, texts, batch_size=BATCH, rounds=5, warmup=1):
    """Tokens (words) per second of the SavedModel and the Python path on ``texts``, alternately.

    Args:
        model, vocabulary: the Keras tagger and its vocabulary (the Python path).
        serving: the SavedModel's ``serving_default`` function.
        texts: sentences, each a string of space-separated words.
        batch_size: sentences per call of either path.
        rounds: timed rounds; each tags every sentence once with each path.
        warmup: untimed rounds per path first (tracing, caches).

    Returns:
        A dict: ``"words"`` (per round), ``"seconds"`` and ``"tokens_per_second"`` (dicts by
        path name, the median over rounds), ``"ratio"`` (serving over Python throughput),
        ``"agreement"`` (the share of words whose two tags are equal).
    """
    batches = batches_of(list(texts), batch_size)
    words = sum(len(text.split()) for text in texts)

    def run_serving():
        return [tags for batch in batches for tags in serving_tags(serving, batch)]

    def run_python():
        return [tags for batch in batches for tags in python_tags(model, vocabulary, batch)]

    by_serving, by_python = run_serving(), run_python()
    lengths = [len(text.split()) for text in texts]
    for name, tags in ((SERVING, by_serving), (PYTHON, by_python)):
        if [len(t) for t in tags] != lengths:
            raise RuntimeError(f"{name} did not give one tag per word.")
    same = sum(a == b for x, y in zip(by_serving, by_python) for a, b in zip(x, y))
    seconds = common.time_alternating(
        {SERVING: run_serving, PYTHON: run_python}, steps=1, rounds=rounds, warmup=warmup
    )
    per_second = {name: words / s for name, s in seconds.items()}
    return {
        "words": words,
        "seconds": seconds,
        "tokens_per_second": per_second,
        "ratio": per_second[SERVING] / per_second[PYTHON],
        "agreement": same / words if words else 1.0,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default="saved_models/tagger-en-ewt")
    parser.add_argument("--quick", action="store_true",
                        help="the first 512 test sentences, 3 rounds; nothing is recorded")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)

    print(common.machine_description())
    model, vocabulary, serving = load_tagger(args.model_dir)
    sentences = load_ud_english_ewt("test")
    rounds = args.rounds
    if args.quick:
        sentences, rounds = sentences[:512], 3
    texts = [" ".join(sentence.words) for sentence in sentences]
    result = measure_throughput(model, vocabulary, serving, texts, rounds=rounds)

    rows = []
    for name in (SERVING, PYTHON):
        seconds = result["seconds"][name]
        rows.append([
            name, f"{seconds:.2f}", f"{1000 * seconds / len(texts):.2f}",
            f"{result['tokens_per_second'][name]:,.0f}",
            f"{result['ratio']:.2f}x" if name == SERVING else "",
        ])
    header = ["path", "s / pass", "ms / sentence", "tokens/s", "serving / Python"]
    table = common.markdown_table(header, rows)
    print("\n".join(table))
    print(f"tags equal on {result['agreement']:.2%} of {result['words']:,} words")
    if not (args.quick or args.no_record):
        common.append_results(  # in place of the section of an earlier run
            TITLE,
            "python benchmarks/tagger_throughput.py --model-dir " + args.model_dir,
            table,
            notes=[
                f"model: {args.model_dir} ({model.count_params():,} parameters, window "
                f"{model.preprocessor.window} words)",
                f"{len(texts):,} sentences, {result['words']:,} words, in batches of {BATCH} "
                "consecutive sentences (space-joined words; the Python path splits them again)",
                "serving: one serving_default call per batch (plain graph mode, XLA off); Python: "
                f"one Tagger.tag_columns(batch_size={BATCH}) call per batch (every head; its own "
                "tf.function, XLA off)",
                f"median of {rounds} alternating rounds (one round = every sentence) after "
                "1 warm-up round per path; tokens/s = words / seconds per round",
                f"tags equal on {result['agreement']:.2%} of the words",
            ],
        )


if __name__ == "__main__":
    main()
