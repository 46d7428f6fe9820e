"""The one place where the tf.distribute strategy is chosen, and what it means for a run's files.

Under ``multi_worker`` every worker runs the same ``zoo train`` command (``TF_CONFIG`` tells each
its role). Only the chief writes the workdir; the others wait for the chief's vocabulary, read it,
and keep their own training state in a folder of their own (:func:`worker_dir`). The workdir
must be on a filesystem that every worker sees.
"""

import hashlib
import os
import tempfile
import time

import tensorflow as tf

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


def get_strategy(name="auto"):
    """A ``tf.distribute.Strategy`` by name: one flag from a CPU to N GPUs to several workers.

    Args:
        name: ``auto`` (mirrored over all GPUs when there are several, else TensorFlow's
            default strategy: no distribution, the first GPU or the CPU), ``one_device``
            (``OneDeviceStrategy``: the first GPU, else the CPU), ``mirrored`` (every local
            GPU; with none, every logical CPU device), ``multi_worker``
            (``MultiWorkerMirroredStrategy``; the cluster comes from the ``TF_CONFIG``
            environment variable) or ``tpu``
            (``TPUStrategy``; the TPU comes from the environment, as on Colab or a Cloud TPU VM).

    Returns:
        The strategy. Build and compile the model inside ``strategy.scope()``. Create it
        before any other TensorFlow work: ``multi_worker`` must configure the collective ops
        first.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; choose from {STRATEGIES}.")
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        if len(gpus) <= 1:
            # Not OneDeviceStrategy: it feeds fit through a multi-device iterator, whose
            # per-device datasets autotune, and freeing each epoch's iterator then waits for the
            # autotuning thread (see README, "Scaling out").
            return tf.distribute.get_strategy()
        name = "mirrored"
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    if name == "mirrored":
        # MirroredStrategy() alone takes the GPUs or one CPU; a CPU split into logical devices
        # (as the tests do, to run the distributed path here) gives one replica per device.
        devices = gpus or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy):
    """Whether this process writes the run's files: yes, except on a multi-worker cluster's
    workers other than the chief (the ``chief`` task, or worker 0 when there is none)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    resolver = strategy.cluster_resolver
    if resolver.task_type is None:  # no TF_CONFIG: a cluster of one
        return True
    if "chief" in resolver.cluster_spec().as_dict():
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


def worker_dir(workdir, strategy):
    """The folder where a non-chief worker keeps its training state: in the temporary folder,
    named after the workdir and the worker, so that a rerun finds its backup again."""
    resolver = strategy.cluster_resolver
    key = hashlib.sha1(os.path.abspath(workdir).encode()).hexdigest()[:12]
    name = f"zoo-{key}-{resolver.task_type}-{resolver.task_id}"
    return os.path.join(tempfile.gettempdir(), name)


def distributable(dataset, strategy):
    """``dataset`` with the shard policy of ``strategy``: under ``multi_worker`` each worker
    takes every N-th batch (``AutoShardPolicy.DATA``), since the data is read from memory,
    not from files that could be split among the workers."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return dataset
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def wait_for_file(path, timeout, poll=0.5):
    """Wait until ``path`` exists (written atomically by the chief); raise ``TimeoutError``
    naming it after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{path}: the chief worker has not written it in {timeout:.0f} s; is the chief "
                "running, and is the workdir on a filesystem every worker sees?"
            )
        time.sleep(poll)
