"""The shipped translator quantized to int8 (Keras's ``quantize("int8")``) against itself in
float32: test2016 BLEU, and sentences per second in process and through the plain served
signature, side by side in one run.

Quantized: every ``Dense`` of the blocks (int8 weights with a scale per output, the inputs
quantized per row at each call) and the token table, whose tied output projection runs as one
int8 matmul (``TokenAndPositionEmbedding``). Issue 67's target: BLEU within 0.3 of float32.

    python benchmarks/int8_translator.py             # about 10 minutes on 2 cores
    python benchmarks/int8_translator.py --sentences 200 --rounds 1
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Python puts this folder first on the path, where this file would stand for the package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

SHIPPED = os.path.join(ROOT, "saved_models", "translator-en-de")


def sentences_per_second(translate, sources, rounds):
    """The median over ``rounds`` of len(sources) / seconds, after a warm-up call (the
    compiles); and the lowest and highest."""
    translate(sources)
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        translate(sources)
        rates.append(len(sources) / (time.perf_counter() - start))
    return statistics.median(rates), min(rates), max(rates)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1000, help="of test2016 (all: 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    import zoo  # noqa: F401  (registers zoo's models for load_model)
    from zoo.artifacts import serving_path
    from zoo.data import load_multi30k
    from zoo.evaluation import corpus_bleu

    test = load_multi30k("test2016")[: args.sentences]
    sources, references = [s for s, _ in test], [r for _, r in test]
    models = {"float32": keras.models.load_model(os.path.join(SHIPPED, "model.keras"))}
    models["int8"] = keras.models.load_model(os.path.join(SHIPPED, "model.keras"))
    with warnings.catch_warnings():  # "layer X has no quantize method": the norms, dropouts
        warnings.simplefilter("ignore", UserWarning)
        models["int8"].quantize("int8")
    rows = {}
    for name, model in models.items():
        row = rows[name] = {}
        for method, kwargs in [("greedy", {}), ("beam", {"beam_size": 5})]:
            hypotheses = model.generate(sources, method=method, **kwargs)
            row[f"BLEU {method}"] = corpus_bleu(hypotheses, references)["bleu"]
        folder = model.export_serving(tempfile.mkdtemp())
        row["model.keras (MB)"] = os.path.getsize(os.path.join(folder, "model.keras")) / 1e6
        served = tf.saved_model.load(serving_path(folder))
        batch = sources[:64]
        searches = {
            "in process, greedy b64": lambda s, m=model: m.generate(s, method="greedy"),
            "in process, beam 4 b64": lambda s, m=model: m.generate(s, method="beam",
                                                                    beam_size=4),
            "plain served, greedy b64": lambda s, f=served.signatures["translate_greedy"]:
                f(inputs=tf.constant(s)),
        }  # fmt: skip
        for label, translate in searches.items():
            row[label] = sentences_per_second(translate, batch, args.rounds)
        print(f"{name}: done", file=sys.stderr, flush=True)

    print(f"test2016, {len(sources)} sentences; speed: sentences per second, the median of "
          f"{args.rounds} rounds on the first 64 (lowest-highest)")
    print("| | " + " | ".join(rows) + " | int8 ÷ float32 |")
    print("|---|" + "---|" * (len(rows) + 1))
    for key in rows["float32"]:
        values = [rows[name][key] for name in rows]
        if key.startswith("BLEU"):
            cells = [f"{v:.2f}" for v in values]
            change = f"{values[1] - values[0]:+.2f} BLEU"
        elif key.endswith("(MB)"):
            cells = [f"{v:.1f}" for v in values]
            change = f"{values[1] / values[0]:.2f}x"
        else:
            cells = [f"{v[0]:.1f} ({v[1]:.1f}-{v[2]:.1f})" for v in values]
            change = f"{values[1][0] / values[0][0]:.2f}x"
        print(f"| {key} | " + " | ".join(cells) + f" | {change} |")


if __name__ == "__main__":
    sys.exit(main())
