"""Training throughput under MirroredStrategy with 1 and 2 logical CPU devices (issue 14).

The CPU is split into two logical devices before TensorFlow starts; the `small` translator
trains on the same global batch (64 pairs of 32 source and 32 target tokens) under
``one_device`` and under ``mirrored`` (two replicas of 32 pairs), timed alternately in one run.
On one machine's cores the two replicas share the same threads, so the ratio is the
distributed path's overhead (splitting the batch, the all-reduce of the gradients), not a
speed-up.

    python benchmarks/mirrored_throughput.py [--rounds 5] [--steps 5]
"""

import argparse
import os
import sys
import warnings

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import tensorflow as tf  # noqa: E402

_CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_CPU, [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

from zoo.tasks import get_task  # noqa: E402
from zoo.training.strategy import get_strategy  # noqa: E402

BATCH, LENGTH = 64, 32
TITLE = "Training throughput under MirroredStrategy: 1 against 2 logical CPU devices"


def step_function(strategy_name, config):
    """A zero-argument callable that runs one training step under the strategy and blocks."""
    task = get_task("translator")
    strategy = get_strategy(strategy_name)
    with strategy.scope():
        model = task.compile_model(task.build_model(config), config, jit_compile=False)
    rng = np.random.default_rng(0)
    source = rng.integers(4, config.vocab_size, (BATCH, LENGTH)).astype("int32")
    target = rng.integers(4, config.vocab_size, (BATCH, LENGTH + 1)).astype("int32")
    inputs = {"source": source, "target_in": target[:, :-1]}
    dataset = tf.data.Dataset.from_tensors((inputs, target[:, 1:])).repeat()
    with warnings.catch_warnings():  # fit's note that a tf.data input is not shuffled by it
        warnings.filterwarnings("ignore", message=".*shuffle=True. was passed")
        model.fit(dataset, steps_per_epoch=2, epochs=1, verbose=0)  # builds and traces
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    train = model.train_function

    def step():
        logs = train(iterator)
        float(np.asarray(logs["loss"]))  # waits for the step

    return step, strategy.num_replicas_in_sync


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    config = get_task("translator").get_config("small", vocab_size=8000, dropout=0.1)
    steps, replicas = {}, {}
    for name in ("one_device", "mirrored"):
        steps[name], replicas[name] = step_function(name, config)
    seconds = common.time_alternating(steps, args.steps, args.rounds)
    tokens = BATCH * 2 * LENGTH
    rows = [[name, replicas[name], f"{1000 * seconds[name]:.0f}",
             f"{tokens / seconds[name]:,.0f}", f"{seconds[name] / seconds['one_device']:.2f}"]
            for name in steps]  # fmt: skip
    common.publish_table(
        TITLE,
        f"python benchmarks/mirrored_throughput.py --rounds {args.rounds} --steps {args.steps}",
        ["strategy", "replicas", "ms per step", "tokens per second", "time / one_device"],
        rows,
        notes=[f"the `small` translator, global batch {BATCH} pairs of {LENGTH}+{LENGTH} "
               f"tokens, median of {args.rounds} alternating rounds of {args.steps} steps; "
               "both replicas run on the same CPU cores"],
    )
    for row in rows:
        print(" | ".join(map(str, row)))


if __name__ == "__main__":
    main()
