"""Tagger quality sweep: which settings reach the best dev UPOS accuracy (issue 11).

Each row is the `small` tagger with a few fields changed, trained for the same number of epochs
through ``zoo.training.train`` (XLA on) in its own workdir under ``workdirs/tagger-sweep/``,
then scored on UD English-EWT **dev only**, overall and on OOV words: test is never read here,
so the settings are chosen on dev. The weights scored are the ones the tagger keeps (the EMA
weights of the epoch with the best dev accuracy). OOV words are the tagger's weak point (about
81 % of them right), so the rows try richer character features (several convolution widths,
so that the 4- and 5-letter suffixes fit one filter) and a second, XPOS head (49 finer tags:
the same words, more signal).

The sweep is resumable as the translator's: a row whose workdir holds its scores is skipped,
a stopped row resumes from its last finished epoch. The table in ``benchmarks/RESULTS.md`` is
rewritten from all finished rows after every row.

Usage::

    python benchmarks/studies/tagger_sweep.py [--epochs 16] [--only NAME ...] [--list]
"""

import os
import sys

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import common  # noqa: E402  (benchmarks/common.py)
from zoo.tasks.tagging.evaluation import evaluate_tagger  # noqa: E402
from zoo.tasks import get_task, load  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEEP_DIR = os.path.join(ROOT, "workdirs", "tagger-sweep")
TITLE = "Tagger sweep: dev UPOS accuracy of training settings (small shape, equal epochs)"

_WIDTHS = {"char_kernel_size": (2, 3, 4, 5), "char_filters": 64}  # 4 x 64 = 256 features, as now

# name -> fields of the `small` preset that change (zoo.models.tagger.TaggerConfig).
ROWS = {
    "small as shipped": {},
    "character widths 2-5": _WIDTHS,
    "character widths 2-5, XPOS head": {**_WIDTHS, "num_xpos_tags": 1},  # the vocabulary sets 49
    "character widths 2-5, XPOS head, word dropout 0.1": {**_WIDTHS, "num_xpos_tags": 1,
                                                           "word_dropout": 0.1},
}


def run_row(name, overrides, workdir, epochs):
    """Train (or resume) one row and score it on dev; return its result dict."""
    task = get_task("tagger")
    config = task.get_config("small", epochs=epochs, **overrides)
    seconds = common.train_clocked(task, config, workdir, clock_file="sweep_seconds.json")
    _, model, vocabulary = load(workdir)
    report = evaluate_tagger(model, vocabulary, "dev", os.path.join(workdir, "eval"))["upos"]
    return {
        "name": name,
        "overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()},
        "epochs": epochs,
        "minutes": round(seconds / 60, 1),
        "parameters": model.count_params(),
        "dev_accuracy": round(report["accuracy"], 2),
        "dev_oov_accuracy": round(report["oov_accuracy"], 2),
    }


def publish(results, epochs):
    rows = [[r["name"], r["epochs"], r["minutes"], f"{r['parameters']:,}", r["dev_accuracy"],
             r["dev_oov_accuracy"]] for r in results]
    header = ["settings (on `small`)", "epochs", "train minutes", "parameters",
              "dev UPOS accuracy", "dev UPOS accuracy on OOV words"]
    notes = [
        "UD English-EWT dev (25,147 words), the kept weights (EMA, best dev epoch); test is "
        "not read",
        "XLA on; train minutes are wall-clock on this machine, validation included, shared "
        "with other work when it was",
    ]
    command = f"python benchmarks/studies/tagger_sweep.py --epochs {epochs}"
    common.publish_table(TITLE, command, header, rows, notes)


def main(argv=None):
    common.sweep_main(__doc__.splitlines()[0], ROWS, SWEEP_DIR, run_row, publish,
                      default_epochs=16, argv=argv)


if __name__ == "__main__":
    main()
