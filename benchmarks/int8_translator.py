"""The shipped translator quantized to int8 (Keras's ``quantize("int8")``) against itself in
float32: test2016 BLEU, and sentences per second in process and through the plain served
signature, side by side in one run.

Quantized: every ``Dense`` of the blocks (int8 weights with a scale per output, the inputs
quantized per row at each call) and the token table, whose tied output projection runs as one
int8 matmul (``TokenAndPositionEmbedding``). Issue 67's target: BLEU within 0.3 of float32. The
two are timed alternately, round by round (``common.time_alternating``), on the same batch.

    python benchmarks/int8_translator.py             # about 10 minutes on 2 cores
    python benchmarks/int8_translator.py --sentences 200 --rounds 1
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Python puts this folder first on the path, where this file would stand for the package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

SHIPPED = os.path.join(ROOT, "saved_models", "translator-en-de")
SEARCHES = ("in process, greedy b64", "in process, beam 4 b64", "plain served, greedy b64")


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

    sys.path.insert(0, HERE)
    import common

    test = load_multi30k("test2016")[: args.sentences]
    sources, references = [s for s, _ in test], [r for _, r in test]
    models = {"float32": keras.models.load_model(os.path.join(SHIPPED, "model.keras"))}
    models["int8"] = keras.models.load_model(os.path.join(SHIPPED, "model.keras"))
    models["int8"].quantize("int8")
    rows, steps = {}, {}
    batch = sources[:64]
    for name, model in models.items():
        row = rows[name] = {}
        for method, kwargs in [("greedy", {}), ("beam", {"beam_size": 5})]:
            hypotheses = model.generate(sources, method=method, **kwargs)
            row[f"BLEU {method}"] = corpus_bleu(hypotheses, references)["bleu"]
        folder = model.export_serving(tempfile.mkdtemp())
        row["model.keras (MB)"] = os.path.getsize(os.path.join(folder, "model.keras")) / 1e6
        served = tf.saved_model.load(serving_path(folder)).signatures["translate_greedy"]
        searches = (lambda m=model: m.generate(batch, method="greedy"),
                    lambda m=model: m.generate(batch, method="beam", beam_size=4),
                    lambda f=served: f(inputs=tf.constant(batch)))  # fmt: skip
        for label, step in zip(SEARCHES, searches):
            steps[(label, name)] = step
        print(f"{name}: scored and exported", file=sys.stderr, flush=True)
    seconds = common.time_alternating(steps, steps=1, rounds=args.rounds, warmup=1)
    for (label, name), time_taken in seconds.items():
        rows[name][label] = len(batch) / time_taken

    print(f"test2016, {len(sources)} sentences; speed: sentences per second on the first 64, "
          f"the median of {args.rounds} rounds (int8 and float32 alternately)")
    table = []
    for key in rows["float32"]:
        old, new = rows["float32"][key], rows["int8"][key]
        if key.startswith("BLEU"):
            table.append([key, f"{old:.2f}", f"{new:.2f}", f"{new - old:+.2f} BLEU"])
        else:
            table.append([key, f"{old:.1f}", f"{new:.1f}", f"{new / old:.2f}x"])
    print("\n".join(common.markdown_table(["", "float32", "int8", "int8 ÷ float32"], table)))


if __name__ == "__main__":
    sys.exit(main())
