"""Dropout's cost: zoo's hashed mask against keras.random.dropout, alone and in a train step.

1. One dropout (rate 0.1) of a million float32 elements, drawn ten times from a SeedGenerator in
   one compiled function, with XLA on and off, against the same function without dropout.
2. The train step of the translator's `small` preset with the shipped translator's dropouts
   (0.3 residual, 0.1 on attention and on the feed-forward activations), XLA on and off, on a
   batch of 128 pairs of 32 tokens: zoo's dropout, Keras's (every zoo layer's dropout swapped
   for keras.random.dropout while that model is traced), and none.

All candidates are timed alternately in one run; the table gives ms and ratios.

    python benchmarks/dropout.py [--rounds 5] [--steps 3]
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import publish_table, time_alternating  # noqa: E402

import zoo.layers.attention.clustered  # noqa: E402
import zoo.layers.attention.local  # noqa: E402
import zoo.layers.attention.scaled_dot_product  # noqa: E402
import zoo.layers.attention.sinkhorn  # noqa: E402
import zoo.layers.dropout  # noqa: E402
import zoo.layers.position.relative  # noqa: E402
from zoo.tasks import get_task  # noqa: E402

TITLE = "Dropout: zoo's hashed mask against keras.random.dropout"
# Every module-level name through which a zoo layer calls the dropout function.
CALL_SITES = [
    (zoo.layers.dropout, "dropout"),
    (zoo.layers.attention.scaled_dot_product, "random_dropout"),
    (zoo.layers.attention.local, "random_dropout"),
    (zoo.layers.attention.clustered, "dropout"),
    (zoo.layers.attention.sinkhorn, "dropout"),
    (zoo.layers.position.relative, "dropout"),
]


def keras_dropout(inputs, rate, seed=None, noise_shape=None):
    return keras.random.dropout(inputs, rate, noise_shape=noise_shape, seed=seed)


def with_dropout(function, step):
    """``step`` run with ``function`` at every call site (a first call traces the model)."""
    saved = [getattr(module, name) for module, name in CALL_SITES]

    def run():
        for module, name in CALL_SITES:
            setattr(module, name, function)
        try:
            return step()
        finally:
            for (module, name), original in zip(CALL_SITES, saved):
                setattr(module, name, original)

    return run


def one_million(xla):
    """name -> step: ten rate-0.1 dropouts of a (256, 32, 128) tensor in one function."""
    x = tf.random.normal((256, 32, 128))

    def make(function):
        generator = keras.random.SeedGenerator(1)

        @tf.function(jit_compile=xla)
        def ten(x):
            total = 0.0
            for _ in range(10):
                total += tf.reduce_sum(function(x, 0.1, seed=generator))
                x = x + 1.0
            return total

        return lambda: ten(x).numpy()

    return {"zoo": make(zoo.layers.dropout.dropout), "keras": make(keras_dropout),
            "none": make(lambda x, rate, seed: x * 1.0)}  # fmt: skip


def train_steps(xla):
    """name -> step: one train step of the small translator, as shipped (dropout 0.3)."""
    task = get_task("translator")
    rng = np.random.default_rng(0)
    tokens = lambda: tf.constant(rng.integers(4, 8000, (128, 32)), tf.int32)  # noqa: E731
    x, y = {"source": tokens(), "target_in": tokens()}, tokens()
    steps = {}
    for name, rates in [("zoo", (0.3, 0.1, 0.1)), ("keras", (0.3, 0.1, 0.1)), ("none", (0, 0, 0))]:
        keras.utils.set_random_seed(0)
        config = task.get_config("small", dropout=rates[0], attention_dropout=rates[1],
                                 activation_dropout=rates[2])  # fmt: skip
        model = task.compile_model(task.build_model(config), config, jit_compile=xla)
        step = lambda model=model: model.train_on_batch(x, y)  # noqa: E731
        steps[name] = with_dropout(keras_dropout, step) if name == "keras" else step
    return steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for what, candidates in [("1M elements x 10, XLA", one_million(True)),
                             ("1M elements x 10, no XLA", one_million(False)),
                             ("small translator train step, XLA", train_steps(True)),
                             ("small translator train step, no XLA", train_steps(False))]:  # fmt: skip
        seconds = time_alternating(candidates, args.steps, args.rounds)
        ms = {name: 1000 * s for name, s in seconds.items()}
        rows.append([what, f"{ms['zoo']:.1f}", f"{ms['keras']:.1f}", f"{ms['none']:.1f}",
                     f"{ms['keras'] / ms['zoo']:.2f}x",
                     f"{(ms['zoo'] - ms['none']) / (ms['keras'] - ms['none']):.2f}"])  # fmt: skip
        print(rows[-1], flush=True)
    publish_table(
        TITLE, "python benchmarks/dropout.py",
        ["what", "zoo ms", "keras ms", "no dropout ms", "keras / zoo",
         "zoo's dropout cost / keras's"],
        rows,
        notes=[f"median of {args.rounds} alternating rounds of {args.steps} calls after 2 "
               "warm-up calls (the first compiles)",
               "the cost of a dropout is its time minus the same function's without dropout",
               "keras: keras.random.dropout (TensorFlow's stateless random ops, a seed known at "
               "run time); zoo: zoo.layers.dropout (a hash of each element's index)"],
    )  # fmt: skip


if __name__ == "__main__":
    main()
