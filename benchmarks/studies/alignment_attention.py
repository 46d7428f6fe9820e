"""Plain, guided, location-aware and monotonic cross attention on a monotonic task, at one budget.

Each row is the transliterator (``zoo train transliterator``: the translator on the rule-made
character task of :mod:`zoo.data.transliteration`) with one way of shaping its cross attention,
trained for the same epochs through ``zoo.training.train`` (XLA on) in its own workdir under
``workdirs/alignment-<preset>/``, then scored with greedy search on ``test`` (the training
lengths, 4 to 24 characters) and ``long`` (36 to 64 characters, longer than any trained): the
share of outputs entirely right and the character error rate. The picture
``benchmarks/studies/alignment_attention.png`` shows each row's cross attention (the last decoder
block, the mean over heads) on the first long phrase, the gold output teacher-forced.

Resumable: a finished row (``alignment_result.json`` in its workdir) is skipped; a stopped one
resumes from its last finished epoch. The table in ``benchmarks/RESULTS.md`` is rewritten from
the finished rows after every row.

Usage::

    python benchmarks/studies/alignment_attention.py [--preset small] [--epochs 8] [--only NAME ...]
    python benchmarks/studies/alignment_attention.py --quick   # tiny models, one epoch: a smoke run
"""

import argparse
import json
import os
import sys

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import common  # noqa: E402  (benchmarks/common.py)
from zoo.data import BOS_ID, load_transliteration  # noqa: E402
from zoo.models.translator import attention_weights  # noqa: E402
from zoo.tasks import get_task, load  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TITLE = "Cross attention on a monotonic task: the {preset} transliterator at an equal budget"
PICTURE = os.path.join(ROOT, "benchmarks", "studies", "alignment_attention.png")

# name -> the config fields of the row.
ROWS = {
    "plain": {},
    "guided (weight 0.1, decay 0.999)": {
        "guided_attention_weight": 0.1, "guided_attention_decay": 0.999,
    },
    "location-aware": {"cross_attention": "location_aware"},
    "monotonic": {"cross_attention": "monotonic"},
}


def run_row(name, overrides, workdir, epochs, preset, train_pairs=None):
    """Train (or resume) one row and score it; return its result dict."""
    task = get_task("transliterator")
    config = task.get_config(preset, epochs=epochs, **overrides)
    extra = {} if train_pairs is None else {"train_data": load_transliteration("train")[:train_pairs]}
    seconds = common.train_clocked(task, config, workdir, **extra)
    _, model, vocabulary = load(workdir)
    result = {"name": name, "overrides": overrides, "preset": preset, "epochs": epochs,
              "minutes": round(seconds / 60, 1)}  # fmt: skip
    for split in ("test", "long"):
        task.evaluate(model, vocabulary, split, os.path.join(workdir, "eval"))
        with open(os.path.join(workdir, "eval", f"{split}.greedy.scores.json")) as f:
            scores = json.load(f)
        result[f"{split}_exact"] = round(100 * scores["exact"], 1)
        result[f"{split}_cer"] = round(100 * scores["cer"], 2)
    return result


def attention_map(workdir, pair):
    """The last decoder block's cross attention (mean over heads) on ``pair``, teacher-forced:
    ``(T, S)``, with the source and target pieces."""
    _, model, vocabulary = load(workdir)
    source = vocabulary.tokenize(tf.constant([pair[0]])).to_tensor()
    target = vocabulary.tokenize(tf.constant([pair[1]])).to_tensor()
    target_in = tf.concat([tf.constant([[BOS_ID]], target.dtype), target], axis=1)
    weights = np.asarray(attention_weights(model, source, target_in)["cross"][-1])[0].mean(0)
    return weights


def draw(root, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.viz import plot_attention_map

    pair = load_transliteration("long")[0]
    done = [name for name in rows if os.path.exists(os.path.join(root, common.slug(name),
                                                                 "alignment_result.json"))]
    if not done:
        return
    figure, axes = plt.subplots(1, len(done), figsize=(5 * len(done), 5.5), squeeze=False)
    for ax, name in zip(axes[0], done):
        weights = attention_map(os.path.join(root, common.slug(name)), pair)
        plot_attention_map(weights, ax=ax, title=name)
    figure.suptitle(f"long phrase, {len(pair[0])} characters: {pair[0][:40]}...")
    figure.tight_layout()
    figure.savefig(PICTURE, dpi=80)
    plt.close(figure)


def publish(results, preset, epochs):
    rows = [
        [r["name"], r["epochs"], r["minutes"], r["test_exact"], r["test_cer"], r["long_exact"],
         r["long_cer"]]
        for r in results
    ]  # fmt: skip
    header = [f"cross attention (`{preset}` transliterator)", "epochs", "train minutes",
              "test exact %", "test CER %", "long exact %", "long CER %"]  # fmt: skip
    notes = [
        "greedy search; exact: outputs entirely right; CER: character edits per reference "
        "character; test: 1,000 phrases of the training lengths (4-24 characters), long: 500 "
        "of 36-64 characters, longer than any trained",
        "XLA on; train minutes are wall-clock on this machine; one seed per row",
        "attention pictures (the first long phrase, teacher-forced): "
        "benchmarks/studies/alignment_attention.png",
    ]
    command = (f"python benchmarks/studies/alignment_attention.py --preset {preset} "
               f"--epochs {epochs}")
    common.publish_table(TITLE.format(preset=preset), command, header, rows, notes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", help="the transliterator preset")
    parser.add_argument("--epochs", type=int, default=8, help="the budget of every row")
    parser.add_argument("--only", nargs="+", choices=sorted(ROWS), help="these rows only")
    parser.add_argument("--quick", action="store_true",
                        help="tiny models, one epoch on 2,000 pairs, in a temporary folder; "
                        "no table, no picture")
    args = parser.parse_args(argv)
    if args.quick:
        import tempfile

        root, preset, epochs, pairs = tempfile.mkdtemp(prefix="alignment-"), "tiny", 1, 2000
        publish_results = None
    else:
        preset, epochs, pairs = args.preset, args.epochs, None
        root = os.path.join(ROOT, "workdirs", f"alignment-{preset}")

        def publish_results(results):
            publish(results, preset, epochs)
            draw(root, ROWS)

    common.run_sweep(
        ROWS, root, "alignment_result.json",
        lambda name, overrides, workdir: run_row(name, overrides, workdir, epochs, preset, pairs),
        publish=publish_results, only=args.only,
    )  # fmt: skip


if __name__ == "__main__":
    main()
