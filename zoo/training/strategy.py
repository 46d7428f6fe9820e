"""The one place where the tf.distribute strategy is chosen, and what it means for a run's files.

Under ``multi_worker`` every worker runs the same ``zoo train`` command (``TF_CONFIG`` tells each
its role). Only the chief writes the workdir; the others wait for the chief's vocabulary, read it,
and keep their own training state in a folder of their own (:func:`worker_dir`). The workdir
must be on a filesystem that every worker sees.
"""

import hashlib
import os
import re
import tempfile
import time

import keras
import tensorflow as tf

from zoo.data.epoch_order import DataPart
from zoo.training.options import STRATEGIES


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


def check_distributed_options(strategy, jit_compile, accumulation_steps):
    """Refuse, before any training, the options that fail under ``strategy`` once it has more
    than one replica (``mirrored``, ``multi_worker``), with what to do instead.

    - Gradient accumulation: Keras's optimizer applies the accumulated update inside a
      conditional, where tf.distribute cannot all-reduce (``merge_call`` in control flow).
    - XLA on CPUs: TensorFlow implements no XLA collectives for CPU devices; GPUs have them.
    """
    if strategy.num_replicas_in_sync <= 1 or isinstance(strategy, tf.distribute.TPUStrategy):
        return
    if accumulation_steps > 1:
        raise ValueError(
            f"gradient_accumulation_steps={accumulation_steps} does not run under a strategy of "
            f"{strategy.num_replicas_in_sync} replicas (Keras applies the accumulated update "
            "in a conditional, where tf.distribute cannot all-reduce): raise --batch-tokens "
            "instead, the replicas already add their batches up"
        )
    if jit_compile and not tf.config.list_logical_devices("GPU"):
        raise ValueError(
            "--xla does not run under a strategy of several replicas on CPUs (TensorFlow has "
            "no XLA all-reduce for CPU devices): drop --xla, or train on GPUs"
        )


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


def worker_dir(workdir, task_type, task_id):
    """The folder where a non-chief worker (``task_type``, ``task_id`` of ``TF_CONFIG``) keeps
    its training state: in the temporary folder, named after the workdir and the worker, so
    that a rerun finds its backup again."""
    key = hashlib.sha1(os.path.abspath(workdir).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"zoo-{key}-{task_type}-{task_id}")


def distributable(dataset, strategy):
    """``dataset`` with the shard policy of ``strategy``: under ``multi_worker`` each worker
    builds the whole pipeline and takes its share of each batch (``AutoShardPolicy.DATA``).
    A dataset already distributed (:func:`per_worker`) is returned as it is."""
    if isinstance(dataset, tf.distribute.DistributedDataset):
        return dataset
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return dataset
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def per_worker(make, strategy):
    """The distributed dataset of which each worker builds its own part: ``make(part)``
    (part a :class:`zoo.data.DataPart`) returns that worker's dataset, batched for one
    replica. Each replica takes one batch of its worker's per step, so no worker reads or
    tokenizes another's data. The parts' batch counts may differ: once a worker's part is
    done, TensorFlow gives its replicas empty batches (zero loss, zero gradient) until
    every part is (``get_next`` with partial batches, as ``multi_worker`` enables); the
    epoch ends with the longest part."""

    def worker_dataset(context):
        return make(DataPart(context.input_pipeline_id, context.num_input_pipelines,
                             strategy.num_replicas_in_sync))  # fmt: skip

    return strategy.distribute_datasets_from_function(worker_dataset)


def lost_peer(error, workdir):
    """The ``ConnectionError`` to raise for a TensorFlow ``error`` that says a peer of the
    cluster stopped (it sent no heartbeat, so the collective ops were aborted), or None for
    any other error. The backup stays as the last one written: the same command resumes."""
    if not isinstance(error, tf.errors.UnavailableError):
        return None
    unhealthy = str(error).split("unhealthy", 1)[-1]  # the peers named after it, if it is there
    peers = sorted(set(re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", unhealthy)))
    names = ", ".join(f"{job} {task}" for job, task in peers) or "a peer"
    return ConnectionError(
        f"{names} of the cluster stopped or cannot be reached, so this worker stopped too; the "
        f"backup in {workdir} is as it was: restart every worker with the same command to "
        "resume from it"
    )


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


# Keras's TensorFlow trainer fails under MultiWorkerMirroredStrategy with more than one worker
# (keras-team/keras#20329, open; Keras 3.15.1 and 3.16's nightlies). Delete this, and its call in
# train(), once a Keras release trains tests/training/test_distributed.py's two workers without it.
KERAS_ISSUE = "keras-team/keras#20329"


def fit_across_workers(model, strategy):
    """Let Keras's ``fit`` and ``evaluate`` run ``model`` on a multi-worker cluster.

    Two steps of Keras's TensorFlow trainer fail under ``MultiWorkerMirroredStrategy`` with two
    workers: ``_maybe_symbolic_build`` all-reduces the whole first batch (which the collective
    ops refuse) to learn its shapes, and ``reduce_per_replica`` means each scalar log over an
    axis 0 it lacks. So this model builds from this worker's own first batch, and its steps
    return ``(1,)`` logs. The model is patched, not Keras, so a saved ``.keras`` file is a
    plain model. Anywhere else it does nothing.

    Raises:
        RuntimeError: the Keras internals this relies on are gone (a Keras release changed
            them): naming the Keras version and the upstream issue.
    """
    if not across_workers(strategy):
        return model
    missing = [name for name in ("_maybe_symbolic_build", "_symbolic_build", "train_step",
                                 "test_step") if not hasattr(model, name)]  # fmt: skip
    if missing:
        raise RuntimeError(
            f"Keras {keras.__version__} has no Model.{', '.join(missing)}: zoo's multi-worker "
            f"fix for {KERAS_ISSUE} (zoo/training/strategy.py) needs updating; check whether "
            "this Keras fixed the issue and the fix can go"
        )

    def local_first_batch(iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, batches in iterator:  # as Keras takes it: the first batch of the epoch
                data_batch = keras.tree.map_structure(
                    lambda value: _local_value(value, strategy), next(batches)
                )
                break
        with strategy.scope():
            model._symbolic_build(data_batch=data_batch)

    model._maybe_symbolic_build = local_first_batch
    model.train_step = _rank_one_logs(model.train_step)
    model.test_step = _rank_one_logs(model.test_step)
    return model


def across_workers(strategy):
    """Whether ``strategy`` is a multi-worker one with more than one worker (then each worker
    reads its own part of the training data: :func:`per_worker`)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    return sum(len(jobs.get(job, ())) for job in ("chief", "worker")) > 1


def _local_value(value, strategy):
    """This worker's part of a distributed value (its shape and dtype are all a build needs)."""
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _rank_one_logs(step):
    def step_with_rank_one_logs(data):
        return keras.tree.map_structure(
            lambda value: tf.reshape(value, [1]) if value.shape.rank == 0 else value, step(data)
        )

    return step_with_rank_one_logs
