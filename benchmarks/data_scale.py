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
  second, the padding included, that it makes;
- the seconds to the pipeline's first batch, fresh and resumed from the middle of an epoch:
  the batches already trained are rebuilt and skipped (``skip_done``), the cost a resume adds.

Each ``zoo train`` runs in a child Python whose training callbacks add one that writes the
figures after the first steps and ends the process (os._exit): nothing else is changed.

    python benchmarks/data_scale.py [--sizes 30000 1000000 5000000] [--steps 10]
"""

import argparse
import gzip
import json
import os
import random
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


# The child that learns the vocabulary as `zoo train` does; argv = figures file, the two globs.
# The peak resident set is reset (Linux's clear_refs) once the sample is drawn, so that the
# trainer's own peak is read apart from what came before it.
_SENTENCEPIECE_CHILD = """
import json, os, resource, sys, tempfile, time
from zoo.data import ParallelCorpus
from zoo.tasks import get_task

def status(field):  # kB in /proc/self/status
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

task = get_task("translator")
config = task.get_config("small")
data = ParallelCorpus([(sys.argv[2], sys.argv[3])])
start = time.perf_counter()
texts = data.sample_sentences(config.vocab_sample_size)
sampled, before = time.perf_counter() - start, status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
start = time.perf_counter()
from zoo.data import train_sentencepiece
train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), vocab_size=config.vocab_size,
                    character_coverage=1.0)
with open(sys.argv[1], "w") as f:
    json.dump({"sentences": len(texts), "text_bytes": sum(len(t.encode()) for t in texts),
               "sample_seconds": sampled, "rss_before": before,
               "trainer_peak": status("VmHWM:"), "trainer_seconds": time.perf_counter() - start}, f)
"""


def sentencepiece_memory(corpus, folder):
    """What learning the vocabulary holds: the sample and the SentencePiece trainer's peak."""
    figures = os.path.join(folder, "sentencepiece.json")
    result = subprocess.run([sys.executable, "-c", _SENTENCEPIECE_CHILD, figures, *corpus],
                            cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if not os.path.exists(figures):
        raise SystemExit(f"the vocabulary child ended without its figures:\n{result.stderr[-3000:]}")
    with open(figures) as f:
        return json.load(f)


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
    the task's training dataset alone, over ``seconds`` after its first batch, and its mean
    tokens and pairs per batch."""
    from zoo.data import ParallelCorpus
    from zoo.tasks import get_task

    task = get_task("translator")
    config = task.get_config("small")
    vocabulary = task.load_vocabulary(vocabulary_folder)
    data = ParallelCorpus([corpus])
    dataset = task.dataset(config, vocabulary, data, training=True, jit_compile=True)
    iterator = iter(dataset.repeat())  # a small corpus runs out within the seconds
    next(iterator)
    tokens, batches, pairs, start = 0, 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        features, labels = next(iterator)
        pairs += int(features["source"].shape[0])
        tokens += int(features["source"].shape[0]) * (
            int(features["source"].shape[1]) + int(features["target_in"].shape[1]))
        batches += 1
    elapsed = time.perf_counter() - start
    return tokens / elapsed, batches / elapsed, tokens / batches, pairs / batches


def _window_count(data, shuffle_buffer):
    """The windows of an epoch of the unweighted corpus ``data``
    (:meth:`zoo.data.ParallelCorpus.windows`: ``CYCLE`` pieces each)."""
    from zoo.data.parallel_corpus import CYCLE

    piece = -(-shuffle_buffer // CYCLE)
    pieces = sum(-(-record.lines // piece) for _, record, _ in data.shards)
    return -(-pieces // CYCLE)


def resume_seconds(corpus, vocabulary_folder):
    """Seconds from a training dataset to its first batch: fresh (epoch 1 from its start),
    and resumed from the middle of epoch 1 as a backup there resumes: in the middle window,
    after half of its batches (counted beforehand by making that window alone, untimed), the
    windows before never made. Returns (fresh, resumed, the window, its windows, batches of
    it skipped), and the seconds resumed at the start of that window (the pieces read, none
    of its batches made again)."""
    from zoo.data import DataPosition, ParallelCorpus
    from zoo.tasks import get_task

    task = get_task("translator")
    config = task.get_config("small")
    vocabulary = task.load_vocabulary(vocabulary_folder)
    data = ParallelCorpus([corpus])
    windows = _window_count(data, config.shuffle_buffer)
    middle = windows // 2

    def dataset(done, window):
        position = DataPosition()
        position.set(1, done, window)
        return position, task.dataset(config, vocabulary, data, training=True,
                                      jit_compile=True, epoch=position)  # fmt: skip

    position, counting = dataset(1, (middle, 0))  # the middle window's batches, counted
    made = 0
    for _ in counting:
        row = position.log[(made + 1) % position.LOG_SIZE].numpy()
        if row[2] != middle:
            break
        made += 1
    skip = made // 2
    seconds = {}
    for name, done, window in (("fresh", 0, None), ("resumed", 1 + skip, (middle, skip)),
                               ("window start", 1, (middle, 0))):
        _, ds = dataset(done, window)
        start = time.perf_counter()
        next(iter(ds))
        seconds[name] = time.perf_counter() - start
    return (seconds["fresh"], seconds["resumed"], middle, windows, skip,
            seconds["window start"])


def backup_cost(vocabulary_folder, repeats=3):
    """The backup that every ``--backup-every`` step writes, for ``--preset small``: its
    files' megabytes (the latest; the one before is kept beside it) and the median seconds
    to write it."""
    from zoo.data import DataPosition
    from zoo.tasks import get_task
    from zoo.training.callbacks import ResumableBackup

    task = get_task("translator")
    config = task.get_config("small")
    config = task.resolve_config(config, task.load_vocabulary(vocabulary_folder))
    model = task.compile_model(task.build_model(config), config)
    model.optimizer.build(model.trainable_variables)
    with tempfile.TemporaryDirectory() as folder:
        backup = ResumableBackup(folder, DataPosition(), save_every=1)
        backup.set_model(model)
        backup._epoch, backup._done = 1, 1
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            backup._save_model()
            times.append(time.perf_counter() - start)
        latest = [backup._weights_path, backup._training_metadata_path]
        size = sum(os.path.getsize(path) for path in latest)
    return size / 1e6, sorted(times)[len(times) // 2]


RESUME_TITLE = "Data at scale: a resume's first batch at 1M, 5M and 20M pairs"


def resume_table(sizes):
    """The first batch of a fresh and of a mid-epoch resumed training dataset, by size."""
    import common
    from zoo.data import load_multi30k

    pairs = load_multi30k("train")
    shipped = os.path.join(ROOT, "saved_models", "translator-en-de")
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-data-scale-") as tmp:
        for size in sizes:
            began = time.monotonic()
            corpus = make_corpus(os.path.join(tmp, f"corpus-{size}"), pairs, size)
            made = time.monotonic() - began
            fresh, resumed, window, windows, skip, start = resume_seconds(corpus, shipped)
            rows.append([f"{size:,}", f"{fresh:.1f}", f"{resumed:.1f}",
                         f"{resumed / fresh:.2f}x", f"{window + 1} of {windows}, after {skip}",
                         f"{start:.1f}", f"{made:.0f}"])  # fmt: skip
            print(" | ".join(rows[-1]), flush=True)
            subprocess.run(["rm", "-rf", corpus[0].rsplit("/", 1)[0]], check=True)
    megabytes, seconds = backup_cost(shipped)
    notes = [
        "first batch: seconds from the task's training dataset (`--preset small`, the shipped "
        "vocabulary, shuffle windows of 100,000 pairs) to its first batch; fresh is epoch 1 "
        "from its start, resumed is epoch 1 from where a backup in its middle window, after "
        "half of that window's batches, resumes (`DataPosition.window_of`): the windows "
        "before are not read, the batches done of its own window are made again and dropped",
        "target: resumed within 2x of fresh at every size",
        "at that window's start: the same window resumed before any of its batches, so that "
        "the difference with the resume is the batches of its window made again; the rest "
        "is reading the window's 4 pieces, each from the start of its gzipped shard of 1M "
        "lines (tf.data reads a file from its start), which a fresh start pays too, more or "
        "less as its pieces lie deep in their shards",
        f"the backup (`--preset small`, weights and optimizer state, the data position): "
        f"{megabytes:.1f} MB, written in {seconds:.2f} s (median of 3); the position adds "
        "two numbers to its metadata",
        "the corpora: Multi30k's training pairs drawn at random (seeded), gzipped shards of "
        "1M lines in a temporary folder, never committed; `corpus made s` is their writing",
    ]
    header = ["pairs", "first batch s (fresh)", "first batch s (mid-epoch resume)",
              "resume / fresh", "resumed in window", "first batch s (at that window's start)",
              "corpus made s"]  # fmt: skip
    common.publish_table(RESUME_TITLE, "python benchmarks/data_scale.py --resume-only "
                         + " ".join(str(size) for size in sizes), header, rows, notes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 1_000_000, 5_000_000])
    parser.add_argument("--steps", type=int, default=30, help="steps timed after the first")
    parser.add_argument("--no-learned", action="store_true",
                        help="skip the runs that learn the vocabulary")
    parser.add_argument("--sentencepiece-only", type=int, metavar="PAIRS",
                        help="measure only what learning the vocabulary holds, on a corpus of "
                             "PAIRS pairs (a table of its own)")
    parser.add_argument("--resume-only", type=int, nargs="+", metavar="PAIRS",
                        help="measure only a resume's first batch, at these sizes (a table of "
                             "its own)")
    args = parser.parse_args(argv)
    if args.resume_only:
        return resume_table(args.resume_only)
    if args.sentencepiece_only:
        return sentencepiece_table(args.sentencepiece_only)

    import common
    from zoo.data import load_multi30k, multi30k_files

    pairs = load_multi30k("train")
    shipped = os.path.join(ROOT, "saved_models", "translator-en-de")
    vocabulary = os.path.join(shipped, "sentencepiece.model")
    valid = multi30k_files("val")
    rows, measured = [], []  # the table's cells, and the figures the notes compare
    with tempfile.TemporaryDirectory(prefix="zoo-data-scale-") as tmp:
        for size in args.sizes:
            began = time.monotonic()
            corpus = make_corpus(os.path.join(tmp, f"corpus-{size}"), pairs, size)
            made = time.monotonic() - began
            given = run_train(corpus, valid, os.path.join(tmp, f"given-{size}"), args.steps,
                              vocabulary)  # fmt: skip
            learned = None if args.no_learned else run_train(
                corpus, valid, os.path.join(tmp, f"learned-{size}"), args.steps)  # fmt: skip
            tokens, batches, per_batch, pairs_per_batch = pipeline_throughput(corpus, shipped)
            fresh, resumed, window, windows, _, _ = resume_seconds(corpus, shipped)
            measured.append({"size": size, "rss": given["peak_rss"], "fresh": fresh,
                             "resumed": resumed, "first_step": given["first_step_seconds"]})
            step_tokens = given["steps_per_second"] * per_batch
            row = [f"{size:,}", f"{given['peak_rss'] / 2**30:.2f}",
                   f"{given['first_step_seconds']:.1f}",
                   "-" if learned is None else f"{learned['peak_rss'] / 2**30:.2f}",
                   "-" if learned is None else f"{learned['first_step_seconds']:.1f}",
                   f"{tokens:,.0f}", f"{step_tokens:,.0f}", f"{tokens / step_tokens:.1f}x",
                   f"{fresh:.1f}", f"{resumed:.1f} (window {window + 1} of {windows})",
                   f"{made:.0f}"]  # fmt: skip
            rows.append(row)
            print(" | ".join(row), flush=True)
            for name in os.listdir(tmp):  # the corpus and the workdirs: disk back, one at a time
                subprocess.run(["rm", "-rf", os.path.join(tmp, name)], check=True)

    first, last = measured[0], measured[-1]
    notes = [
        "each `zoo train` in a child Python ended after its first trained step and "
        f"{args.steps} more; peak memory is the child's maximum resident set",
        "first step: from the command's start (TensorFlow's import, the scan of every file, "
        "the model, the first step's XLA compilation) to the end of its first trained step",
        f"ratios, {last['size']:,} pairs against {first['size']:,} (given the vocabulary): "
        f"memory {last['rss'] / first['rss']:.2f}x (target at most 1.3x), first step "
        f"{last['first_step'] / first['first_step']:.2f}x (target at most 2x)",
        "the shuffle buffer (100,000 pairs) is held at every size; the learned vocabulary "
        "adds the SentencePiece trainer's memory for its sample",
        "pipeline: the task's training dataset alone, padded source and target positions per "
        "second; the train step's: the median step's rate (a step that meets a new bucket "
        "shape compiles it first) times the pipeline's mean tokens per batch",
        "first batch: seconds from the training dataset to its first batch, fresh and resumed "
        "from the middle of an epoch (in its middle window, after half of that window's "
        "batches; the windows before are not read): see the resume table",
        f"a resume from the middle of an epoch at {last['size']:,} pairs waits "
        f"{last['resumed']:.1f} s for its first batch against {last['fresh']:.1f} s fresh",
    ]
    header = ["pairs", "peak GiB (given)", "first step s (given)", "peak GiB (learned)",
              "first step s (learned)", "pipeline tokens/s", "train step tokens/s",
              "pipeline / step", "first batch s (fresh)", "first batch s (mid-epoch resume)",
              "corpus made s"]  # fmt: skip
    common.publish_table(TITLE, "python benchmarks/data_scale.py", header, rows, notes)


def sentencepiece_table(size):
    import common
    from zoo.data import load_multi30k

    with tempfile.TemporaryDirectory(prefix="zoo-data-scale-") as tmp:
        corpus = make_corpus(os.path.join(tmp, "corpus"), load_multi30k("train"), size)
        measured = sentencepiece_memory(corpus, tmp)
    row = [f"{size:,}", f"{measured['sentences']:,}", f"{measured['text_bytes'] / 2**20:.0f}",
           f"{measured['sample_seconds']:.0f}", f"{measured['rss_before'] / 2**30:.2f}",
           f"{measured['trainer_peak'] / 2**30:.2f}",
           f"{(measured['trainer_peak'] - measured['rss_before']) / 2**20:,.0f}",
           f"{measured['trainer_seconds']:.0f}"]  # fmt: skip
    print(" | ".join(row), flush=True)
    header = ["pairs", "sentences sampled", "sample MiB (UTF-8)", "sampling s",
              "resident GiB with the sample", "peak GiB while training SentencePiece",
              "trainer adds MiB", "trainer s"]  # fmt: skip
    notes = [
        "the translator's vocabulary as `zoo train` learns it: a uniform sample of "
        "`--vocab-sample-size` sentences (1M) drawn in one streaming pass, then SentencePiece's "
        "trainer (unigram, the small preset's vocab_size) in the same process",
        "the peak resident set is reset once the sample is drawn (Linux `clear_refs`): the "
        "trainer's peak is read apart from the Python process, TensorFlow and the sample",
    ]
    common.publish_table("Data at scale: what learning the vocabulary holds",
                         f"python benchmarks/data_scale.py --sentencepiece-only {size}",
                         header, [row], notes)  # fmt: skip


if __name__ == "__main__":
    main()
