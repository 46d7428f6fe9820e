"""Shared benchmark plumbing: machine description, alternating timing, RESULTS.md rows."""

import datetime
import os
import platform
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def machine_description():
    """Cores, CPU model, TensorFlow and Keras versions: the context of every figure."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"backend {keras.backend.backend()}"
    )


def measure_matmul_peak(size=2048, repeats=5):
    """The machine's measured fp32 matmul throughput (FLOP/s), XLA-compiled, median of repeats."""
    a = tf.random.normal((size, size))
    b = tf.random.normal((size, size))
    matmul = tf.function(lambda x, y: tf.matmul(x, y), jit_compile=True)
    matmul(a, b).numpy()  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).numpy()
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def time_alternating(candidates, steps, rounds, warmup=2):
    """Time each candidate's step function, alternating between them round by round.

    Args:
        candidates: dict name -> zero-argument callable that runs one step and blocks.
        steps: steps per candidate per round.
        rounds: how many alternating rounds.
        warmup: untimed steps per candidate first (compilation, caches).

    Returns:
        dict name -> median seconds per step over the rounds.
    """
    for step in candidates.values():
        for _ in range(warmup):
            step()
    per_round = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, step in candidates.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            per_round[name].append((time.perf_counter() - start) / steps)
    return {name: statistics.median(times) for name, times in per_round.items()}


def append_results(title, command, table_lines, notes=()):
    """Append a dated, machine-stamped table to benchmarks/RESULTS.md, in place of the
    section of the same title (an earlier run of the same benchmark, kept in git's history)."""
    replace_section(title, RESULTS)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = [f"## {title}", "", f"- command: `{command}`", f"- when: {stamp}",
             f"- machine: {machine_description()}"]
    block += [f"- {note}" for note in notes]
    block += [""] + list(table_lines) + ["", ""]
    with open(RESULTS, "a") as f:
        f.write("\n".join(block))


def replace_section(title, path):
    """Remove the ``## {title}`` section (to the next ``## `` heading) from ``path``, if any."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = f.read().split("\n")
    kept, skipping = [], False
    for line in lines:
        if line.startswith("## "):
            skipping = line == f"## {title}"
        if not skipping:
            kept.append(line)
    text = "\n".join(kept).rstrip("\n")
    with open(path, "w") as f:
        # Sections end with a blank line, as append_results writes them, so the next one starts
        # on a line of its own.
        f.write(text + "\n\n" if text else "")


def publish_table(title, command, header, rows, notes=()):
    """Replace the ``## {title}`` section of benchmarks/RESULTS.md with this table."""
    append_results(title, command, markdown_table(header, rows), notes)


def slug(name):
    """A folder name for a row name."""
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").replace("--", "-")


def run_sweep(rows, root, result_file, run_row, publish=None, only=None):
    """Train and score each named row of ``rows`` (name -> config overrides) in its own workdir
    ``root/<slug>``: ``run_row(name, overrides, workdir)`` returns the row's result dict, kept in
    ``result_file`` there, so a stopped sweep resumes and redoes no finished row. After every
    row, ``publish`` gets the results of all finished rows, in the order of ``rows``."""
    import json

    def result_path(name):
        return os.path.join(root, slug(name), result_file)

    for name in only or rows:
        print(f"== {name}", flush=True)
        path = result_path(name)
        if not os.path.exists(path):
            result = run_row(name, rows[name], os.path.dirname(path))
            with open(path, "w") as f:
                json.dump(result, f, indent=2)
        with open(path) as f:
            print(f.read(), flush=True)
        if publish:
            results = []
            for finished in filter(os.path.exists, map(result_path, rows)):
                with open(finished) as f:
                    results.append(json.load(f))
            publish(results)


def sweep_main(description, rows, root, run_row, publish, default_epochs, argv=None):
    """The command line of a quality sweep (``--epochs``, ``--only``, ``--list``): run
    :func:`run_sweep` over ``rows`` in ``root`` with ``run_row(name, overrides, workdir,
    epochs)``, and ``publish(results, epochs)`` after every row."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=default_epochs)
    parser.add_argument("--only", nargs="+", choices=sorted(rows), help="these rows only")
    parser.add_argument("--list", action="store_true", help="print the rows and stop")
    args = parser.parse_args(argv)
    if args.list:
        for name, overrides in rows.items():
            print(f"{name}: {overrides}")
        return
    run_sweep(
        rows, root, "sweep_result.json",
        lambda name, overrides, workdir: run_row(name, overrides, workdir, args.epochs),
        publish=lambda results: publish(results, args.epochs), only=args.only,
    )  # fmt: skip


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def random_tokens(rng, batch, length, vocab):
    return rng.integers(1, vocab, size=(batch, length)).astype(np.int32)


def train_clocked(task, config, workdir, clock_file="train_seconds.json", **train_kwargs):
    """``zoo.training.train`` (XLA on; for the translators, no per-epoch BLEU) that keeps the
    wall-clock seconds it has spent, over every resumed run, in ``workdir/clock_file``; returns
    the total."""
    import json

    from zoo.tasks import get_task
    from zoo.tasks.translation import TranslationTask
    from zoo.training import train

    clock_path = os.path.join(workdir, clock_file)
    seconds = 0.0
    if os.path.exists(clock_path):
        with open(clock_path) as f:
            seconds = json.load(f)["seconds"]
    start = time.monotonic()
    try:
        defaults = {"jit_compile": True, "verbose": 2}
        if isinstance(get_task(task), TranslationTask):  # the translators' option (and NAT's)
            defaults["bleu_sample_size"] = 0
        train(task, config, workdir, **{**defaults, **train_kwargs})
    finally:  # a stopped run keeps the time it has spent
        os.makedirs(workdir, exist_ok=True)
        seconds += time.monotonic() - start
        with open(clock_path, "w") as f:
            json.dump({"seconds": seconds}, f)
    return seconds
