"""Translator quality sweep: which training settings reach the best val BLEU (issue 11).

Each row is the `small` translator with a few fields changed, trained for the same number of
epochs through ``zoo.training.train`` (XLA on) in its own workdir under ``workdirs/sweep/``,
then scored on **val only** (sacreBLEU, beam 5): the last epoch's weights, and the average of the
last 5 epochs' weights (``zoo average``). test2016 is never read here: the settings are chosen
on val, and the shipped model is judged on test sets this sweep has not seen.

The sweep is resumable: a row whose workdir already holds its scores is skipped; a row that
was stopped resumes from its last finished epoch (BackupAndRestore). Each finished row writes
``sweep_result.json`` in its workdir; the table in ``benchmarks/RESULTS.md`` is rewritten from
all finished rows after every row.

Usage::

    python benchmarks/studies/translator_sweep.py [--epochs 30] [--only NAME ...] [--list]
"""

import os
import sys

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import common  # noqa: E402  (benchmarks/common.py)
from zoo.tasks.translation.evaluation import evaluate_translator  # noqa: E402
from zoo.tasks import get_task, load, translate  # noqa: E402
from zoo.training.average import average_checkpoints  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEEP_DIR = os.path.join(ROOT, "workdirs", "sweep")
TITLE = "Translator sweep: val BLEU of training settings (small shape, equal epochs)"
AVERAGE_LAST = 5

# name -> fields of the `small` preset that change. Dropout 0.3 on residuals with dropout on
# the attention weights and the feed-forward activations is the setting of small-corpus
# transformers (fairseq's IWSLT recipe); the others vary one lever at a time from it.
ROWS = {
    "small (dropout 0.1)": {},
    "dropout 0.3": {"dropout": 0.3, "attention_dropout": 0.1, "activation_dropout": 0.1},
    "dropout 0.3, lr 2e-3, warm-up 2000": {
        "dropout": 0.3, "attention_dropout": 0.1, "activation_dropout": 0.1,
        "learning_rate": 2e-3, "warmup_steps": 2000,
    },
    "dropout 0.3, 10k vocabulary": {
        "dropout": 0.3, "attention_dropout": 0.1, "activation_dropout": 0.1, "vocab_size": 10000,
    },
}


def run_row(name, overrides, workdir, epochs):
    """Train (or resume) one row and score it on val; return its result dict."""
    task = get_task("translator")
    config = task.get_config("small", epochs=epochs, **overrides)
    seconds = common.train_clocked(task, config, workdir, clock_file="sweep_seconds.json")
    _, model, tokenizer = load(workdir)
    last = evaluate_translator(translate, model, tokenizer, "val", os.path.join(workdir, "eval-last"))
    averaged, _ = average_checkpoints(workdir, AVERAGE_LAST)
    mean = evaluate_translator(translate, averaged, tokenizer, "val", os.path.join(workdir, "eval-avg"))
    return {
        "name": name,
        "overrides": overrides,
        "epochs": epochs,
        "minutes": round(seconds / 60, 1),
        "val_bleu_last": round(last["bleu_lowercase"], 2),
        "val_bleu_avg": round(mean["bleu_lowercase"], 2),
        "val_bleu_avg_cased": round(mean["bleu"], 2),
    }


def publish(results, epochs):
    rows = [
        [r["name"], r["epochs"], r["minutes"], r["val_bleu_last"], r["val_bleu_avg"],
         r["val_bleu_avg_cased"]]
        for r in results
    ]
    header = ["settings (on `small`)", "epochs", "train minutes", "val BLEU, last epoch",
              f"val BLEU, last {AVERAGE_LAST} averaged", "same, cased"]
    notes = [
        "sacreBLEU 13a lowercased on Multi30k val (1,014 pairs), beam 5, alpha 0.6; the last "
        "column is cased; test2016 is not read",
        "XLA on; train minutes are wall-clock on this machine, shared with other work "
        "when it was",
    ]
    command = f"python benchmarks/studies/translator_sweep.py --epochs {epochs}"
    common.publish_table(TITLE, command, header, rows, notes)


def main(argv=None):
    common.sweep_main(__doc__.splitlines()[0], ROWS, SWEEP_DIR, run_row, publish,
                      default_epochs=30, argv=argv)


if __name__ == "__main__":
    main()
