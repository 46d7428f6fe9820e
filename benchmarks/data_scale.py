"""The training data at scale (issue 53): memory and time to the first trained step through
`zoo train translator --preset small` on synthetic corpora of 30k, 1M and 5M pairs, and the
pipeline's own throughput next to what the XLA train step consumes.

The corpora are Multi30k's training pairs drawn at random (seeded), written as gzipped shards
of 1M lines under a temporary folder (never committed). For each size, in one run:

- ``zoo train`` given the shipped translator's ``--sentencepiece-model``: the peak resident
  memory and the seconds from the command's start to the end of its first trained step (the
  file scan, TensorFlow's start, the model's build and the first step's XLA compilation), and
  the next steps' rate;
- the same with the vocabulary learned from a sample of ``--vocab-sample-size`` sentences
  (the default 1M; at 30k pairs, all 60k sentences): what the SentencePiece trainer adds;
- the pipeline alone (the training dataset of the task, given the vocabulary): tokens per
  second, the padding included, that it makes.

Each ``zoo train`` runs in a child Python whose training callbacks add one that writes the
figures after the first steps and ends the process (os._exit): nothing else is changed.

    python benchmarks/data_scale.py [--sizes 30000 1000000 5000000] [--steps 10]
"""

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARD_LINES = 1_000_000
TITLE = "Data at scale: zoo train translator --preset small on 30k, 1M and 5M pairs"

# The child: zoo's own command, with one callback more; argv = figures file, steps, zoo argv.
_CHILD = """
import importlib, json, os, resource, sys, time
import keras
import zoo_cli

figures, steps, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
training = importlib.import_module("zoo.training.train")

class Clock(keras.callbacks.Callback):
    # The median step: a step that meets a new bucket shape compiles it first (XLA).
    def on_train_batch_end(self, batch, logs=None):
        now = time.time()
        if batch == 0:
            self.first, self.times = now, []
        else:
            self.times.append(now - self.last)
        self.last = now
        if batch == steps:
            median = sorted(self.times)[len(self.times) // 2]
            with open(figures, "w") as f:
                json.dump({"first_step_at": self.first, "steps_per_second": 1 / median,
                           "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
                          f)
            os._exit(0)

standard = training.standard_callbacks
training.standard_callbacks = lambda *a, **k: [Clock(), *standard(*a, **k)]
zoo_cli.main(argv)
"""


def make_corpus(folder, pairs, size, seed=0):
    """``size`` pairs drawn from ``pairs`` in gzipped shards; returns the two globs."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for shard, start in enumerate(range(0, size, SHARD_LINES)):
        drawn = [pairs[rng.randrange(len(pairs))] for _ in range(min(SHARD_LINES, size - start))]
        for side, language in ((0, "en"), (1, "de")):
            path = os.path.join(folder, f"train.{shard:02d}.{language}.gz")
            with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
                f.writelines(pair[side] + "\n" for pair in drawn)
    return os.path.join(folder, "train.*.en.gz"), os.path.join(folder, "train.*.de.gz")


def run_train(corpus, valid, workdir, steps, vocabulary=None):
    """One `zoo train` to its ``steps + 1``-th step: the figures of the child."""
    figures = workdir + ".json"
    argv = ["train", "translator", "--preset", "small", "--xla", "--workdir", workdir,
            "--bleu-sample", "0", "--epochs", "1", "--train", *corpus, "--valid", *valid]
    if vocabulary:
        argv += ["--sentencepiece-model", vocabulary]
    start = time.time()
    result = subprocess.run([sys.executable, "-c", _CHILD, figures, str(steps), *argv],
                            cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if not os.path.exists(figures):
        raise SystemExit(f"zoo train ended without its figures:\n{result.stderr[-3000:]}")
    with open(figures) as f:
        measured = json.load(f)
    measured["first_step_seconds"] = measured.pop("first_step_at") - start
    return measured


def pipeline_throughput(corpus, vocabulary_folder, seconds=20.0):
    """Tokens per second (padded positions of source and target) and batches per second of
    the task's training dataset alone, over ``seconds`` after its first batch."""
    from zoo.data import ParallelCorpus
    from zoo.tasks import get_task

    task = get_task("translator")
    config = task.get_config("small")
    vocabulary = task.load_vocabulary(vocabulary_folder)
    data = ParallelCorpus([corpus])
    dataset = task.dataset(config, vocabulary, data, training=True, jit_compile=True)
    iterator = iter(dataset.repeat())  # a small corpus runs out within the seconds
    next(iterator)
    tokens, batches, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        features, labels = next(iterator)
        tokens += int(features["source"].shape[0]) * (
            int(features["source"].shape[1]) + int(features["target_in"].shape[1]))
        batches += 1
    elapsed = time.perf_counter() - start
    return tokens / elapsed, batches / elapsed, tokens / batches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 1_000_000, 5_000_000])
    parser.add_argument("--steps", type=int, default=30, help="steps timed after the first")
    parser.add_argument("--no-learned", action="store_true",
                        help="skip the runs that learn the vocabulary")
    args = parser.parse_args(argv)

    import common
    from zoo.data import load_multi30k, multi30k_files

    pairs = load_multi30k("train")
    shipped = os.path.join(ROOT, "saved_models", "translator-en-de")
    vocabulary = os.path.join(shipped, "sentencepiece.model")
    valid = multi30k_files("val")
    rows, throughputs = [], {}
    with tempfile.TemporaryDirectory(prefix="zoo-data-scale-") as tmp:
        for size in args.sizes:
            began = time.monotonic()
            corpus = make_corpus(os.path.join(tmp, f"corpus-{size}"), pairs, size)
            made = time.monotonic() - began
            given = run_train(corpus, valid, os.path.join(tmp, f"given-{size}"), args.steps,
                              vocabulary)  # fmt: skip
            learned = None if args.no_learned else run_train(
                corpus, valid, os.path.join(tmp, f"learned-{size}"), args.steps)  # fmt: skip
            tokens, batches, per_batch = pipeline_throughput(corpus, shipped)
            throughputs[size] = tokens
            step_tokens = given["steps_per_second"] * per_batch
            row = [f"{size:,}", f"{given['peak_rss'] / 2**30:.2f}",
                   f"{given['first_step_seconds']:.1f}",
                   "-" if learned is None else f"{learned['peak_rss'] / 2**30:.2f}",
                   "-" if learned is None else f"{learned['first_step_seconds']:.1f}",
                   f"{tokens:,.0f}", f"{step_tokens:,.0f}", f"{tokens / step_tokens:.1f}x",
                   f"{made:.0f}"]  # fmt: skip
            rows.append(row)
            print(" | ".join(row), flush=True)
            for name in os.listdir(tmp):  # the corpus and the workdirs: disk back, one at a time
                subprocess.run(["rm", "-rf", os.path.join(tmp, name)], check=True)

    first, last = rows[0], rows[-1]
    notes = [
        "each `zoo train` in a child Python ended after its first trained step and "
        f"{args.steps} more; peak memory is the child's maximum resident set",
        "first step: from the command's start (TensorFlow's import, the scan of every file, "
        "the model, the first step's XLA compilation) to the end of its first trained step",
        f"ratios, {last[0]} pairs against {first[0]} (given the vocabulary): memory "
        f"{float(last[1]) / float(first[1]):.2f}x (target at most 1.3x), first step "
        f"{float(last[2]) / float(first[2]):.2f}x (target at most 2x)",
        "the shuffle buffer (100,000 pairs) is held at every size; the learned vocabulary "
        "adds the SentencePiece trainer's memory for its sample",
        "pipeline: the task's training dataset alone, padded source and target positions per "
        "second; the train step's: the median step's rate (a step that meets a new bucket "
        "shape compiles it first) times the pipeline's mean tokens per batch",
    ]
    header = ["pairs", "peak GiB (given)", "first step s (given)", "peak GiB (learned)",
              "first step s (learned)", "pipeline tokens/s", "train step tokens/s",
              "pipeline / step", "corpus made s"]  # fmt: skip
    common.publish_table(TITLE, "python benchmarks/data_scale.py", header, rows, notes)


if __name__ == "__main__":
    main()
