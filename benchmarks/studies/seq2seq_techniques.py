"""The seq2seq techniques of issue 13, each on and off, at one fixed training budget.

Each row is one translator preset (``small`` by default; ``demo``, its 2+2-layer cut, is what
trains most in a few minutes on 2 cores) with one technique switched on in its config, trained
for the same number of epochs through ``zoo.training.train`` (XLA on) in its own workdir under
``workdirs/techniques-<preset>/``, then scored with beam 5 on val and test2016 (sacreBLEU,
lowercased) and for how often the rare source words (names, numbers:
:func:`zoo.evaluation.copying.rare_word_accuracy`) come out right on test2016. The settings of the shipped models are not
chosen here (that is the val-only sweep's job); this table says what each technique does at an
equal budget on this data, helpful or not.

The benchmark is resumable: a finished row (``techniques_result.json`` in its workdir) is
skipped; a stopped one resumes from its last finished epoch. The table in
``benchmarks/RESULTS.md`` is rewritten from the finished rows after every row.

Usage::

    python benchmarks/studies/seq2seq_techniques.py [--preset small] [--epochs 10] [--only NAME ...]
    python benchmarks/studies/seq2seq_techniques.py --quick   # tiny models, one epoch: a smoke run
"""

import argparse
import os
import sys

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import common  # noqa: E402  (benchmarks/common.py)
from zoo.data import load_multi30k  # noqa: E402
from zoo.evaluation.copying import rare_word_accuracy  # noqa: E402
from zoo.tasks.translation.evaluation import evaluate_translator  # noqa: E402
from zoo.tasks import get_task, load, translate  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TITLE = "Seq2seq techniques: the {preset} translator at an equal budget, each technique on"

# name -> the config fields that switch the technique on.
ROWS = {
    "plain": {},
    "additive cross attention": {"cross_attention_score": "additive"},
    "cosine cross attention": {"cross_attention_score": "cosine"},
    "transparent attention (mix of encoder layers)": {"cross_attention_layers": "mix"},
    "scheduled sampling (inverse sigmoid)": {"scheduled_sampling": "inverse_sigmoid"},
    "guided attention (weight 0.1, decay 0.999)": {
        "guided_attention_weight": 0.1, "guided_attention_decay": 0.999,
    },
    "copy mechanism (pointer-generator)": {"copy_mechanism": True},
}


def run_row(name, overrides, workdir, epochs, preset):
    """Train (or resume) one row and score it; return its result dict."""
    task = get_task("translator")
    config = task.get_config(preset, epochs=epochs, **overrides)
    seconds = common.train_clocked(task, config, workdir)
    _, model, tokenizer = load(workdir)
    result = {"name": name, "overrides": overrides, "preset": preset, "epochs": epochs,
              "minutes": round(seconds / 60, 1)}  # fmt: skip
    for split in ("val", "test2016"):
        scores = evaluate_translator(translate, model, tokenizer, split, os.path.join(workdir, "eval"))
        result[f"{split}_bleu"] = round(scores["bleu_lowercase"], 2)
    pairs = load_multi30k("test2016")
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    with open(os.path.join(workdir, "eval", "test2016.beam5.hyp.txt"), encoding="utf-8") as f:
        hypotheses = [line.rstrip("\n") for line in f]
    train_sources = [s for s, _ in task.training_data(config)]
    rare = rare_word_accuracy(sources, hypotheses, references, train_sources)
    result["rare_words"] = rare["rare_words"]
    result["rare_word_accuracy"] = round(100 * rare["rare_word_accuracy"], 1)
    return result


def publish(results, preset, epochs):
    rows = [
        [r["name"], r["epochs"], r["minutes"], r["val_bleu"], r["test2016_bleu"],
         f"{r['rare_word_accuracy']} ({r['rare_words']})"]
        for r in results
    ]  # fmt: skip
    header = [f"technique (on `{preset}`)", "epochs", "train minutes", "val BLEU", "test2016 BLEU",
              "rare words right, % (of n)"]
    notes = [
        "sacreBLEU 13a lowercased, beam 5, alpha 0.6; rare words: test2016 source words that "
        "the reference copies verbatim and that are numbers or seen at most once in the "
        "training sources",
        "XLA on; train minutes are wall-clock on this machine, shared with other work when it "
        "was; one seed per row, so differences under about 0.5 BLEU are noise",
    ]
    command = f"python benchmarks/studies/seq2seq_techniques.py --preset {preset} --epochs {epochs}"
    common.publish_table(TITLE.format(preset=preset), command, header, rows, notes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", help="the translator preset of every row")
    parser.add_argument("--epochs", type=int, default=10, help="the budget of every row")
    parser.add_argument("--only", nargs="+", choices=sorted(ROWS), help="these rows only")
    parser.add_argument("--list", action="store_true", help="print the rows and stop")
    parser.add_argument("--quick", action="store_true",
                        help="tiny models, one epoch, in a temporary folder; no table")
    args = parser.parse_args(argv)
    if args.list:
        for name, overrides in ROWS.items():
            print(f"{name}: {overrides}")
        return
    if args.quick:
        import tempfile

        root, preset, epochs = tempfile.mkdtemp(prefix="techniques-"), "tiny", 1
        publish_results = None
    else:
        preset, epochs = args.preset, args.epochs
        root = os.path.join(ROOT, "workdirs", f"techniques-{preset}")
        publish_results = lambda results: publish(results, preset, epochs)  # noqa: E731
    common.run_sweep(
        ROWS, root, "techniques_result.json",
        lambda name, overrides, workdir: run_row(name, overrides, workdir, epochs, preset),
        publish=publish_results, only=args.only,
    )  # fmt: skip


if __name__ == "__main__":
    main()
