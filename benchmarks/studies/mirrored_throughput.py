"""Training throughput under MirroredStrategy with 1 and 2 logical CPU devices (issue 14), and
under MultiWorkerMirroredStrategy on 2 worker processes (issue 40).

The CPU is split into two logical devices before TensorFlow starts; the `small` translator
trains on the same global batch (64 pairs of 32 source and 32 target tokens) under
``one_device`` and under ``mirrored`` (two replicas of 32 pairs), timed alternately in one run.
Then two worker processes of this script (``--worker``, each with its ``TF_CONFIG`` on
loopback) train the same batch under ``multi_worker`` (one replica of 32 pairs each), timed
after the others: processes cannot alternate. On one machine's cores the replicas and the
workers share the same threads, so each ratio is the distributed path's overhead (splitting
the batch, the all-reduce of the gradients, for the workers over gRPC), not a speed-up.

    python benchmarks/studies/mirrored_throughput.py [--rounds 5] [--steps 5]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import warnings

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import tensorflow as tf  # noqa: E402

WORKER = "--worker" in sys.argv  # a multi_worker process: one device, TF_CONFIG from the parent
if not WORKER:
    _CPU = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(_CPU, [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

from zoo.tasks import get_task  # noqa: E402
from zoo.training.strategy import fit_across_workers, get_strategy  # noqa: E402

BATCH, LENGTH = 64, 32
TITLE = "Training throughput under MirroredStrategy: 1 against 2 logical CPU devices"


def step_function(strategy_name, config):
    """A zero-argument callable that runs one training step under the strategy and blocks."""
    task = get_task("translator")
    strategy = get_strategy(strategy_name)
    with strategy.scope():
        model = task.compile_model(task.build_model(config), config, jit_compile=False)
        fit_across_workers(model, strategy)  # as train() does
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


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_two_workers(args):
    """Median seconds per step of the chief of two ``--worker`` processes of this script."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    command = [sys.executable, os.path.abspath(__file__), "--worker",
               "--rounds", str(args.rounds), "--steps", str(args.steps)]  # fmt: skip
    workers = []
    for index in range(2):
        task = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(task))
        workers.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
    try:
        outputs = [worker.communicate(timeout=1800)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    if any(worker.returncode for worker in workers):
        raise SystemExit("a multi_worker process failed (its error is above)")
    return json.loads(outputs[0].splitlines()[-1])["seconds"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = get_task("translator").get_config("small", vocab_size=8000, dropout=0.1)
    if args.worker:
        step, _ = step_function("multi_worker", config)
        seconds = common.time_alternating({"worker": step}, args.steps, args.rounds)["worker"]
        print(json.dumps({"seconds": seconds}))
        return
    steps, replicas = {}, {}
    for name in ("one_device", "mirrored"):
        steps[name], replicas[name] = step_function(name, config)
    seconds = common.time_alternating(steps, args.steps, args.rounds)
    seconds["multi_worker (2 processes)"] = time_two_workers(args)
    replicas["multi_worker (2 processes)"] = 2
    tokens = BATCH * 2 * LENGTH
    rows = [[name, replicas[name], f"{1000 * seconds[name]:.0f}",
             f"{tokens / seconds[name]:,.0f}", f"{seconds[name] / seconds['one_device']:.2f}"]
            for name in seconds]  # fmt: skip
    common.publish_table(
        TITLE,
        f"python benchmarks/studies/mirrored_throughput.py --rounds {args.rounds} "
        f"--steps {args.steps}",
        ["strategy", "replicas", "ms per step", "tokens per second", "time / one_device"],
        rows,
        notes=[f"the `small` translator, global batch {BATCH} pairs of {LENGTH}+{LENGTH} "
               f"tokens, median of {args.rounds} alternating rounds of {args.steps} steps; "
               "both replicas run on the same CPU cores; the two multi_worker processes "
               "share them too, timed after the others (one process each: no alternating), "
               "the chief's median"],
    )
    for row in rows:
        print(" | ".join(map(str, row)))


if __name__ == "__main__":
    main()
