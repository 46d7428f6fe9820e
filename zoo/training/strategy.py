"""The one place where the tf.distribute strategy is chosen."""

import tensorflow as tf

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


def get_strategy(name="auto"):
    """A ``tf.distribute.Strategy`` by name: one flag from a CPU to N GPUs to several workers.

    Args:
        name: ``auto`` (mirrored over all GPUs when there are several, else one device),
            ``one_device`` (the first GPU, else the CPU), ``mirrored`` (every local GPU),
            ``multi_worker`` (``MultiWorkerMirroredStrategy``; the cluster comes from the
            ``TF_CONFIG`` environment variable) or ``tpu`` (``TPUStrategy``; the TPU comes from
            the environment, as on Colab or a Cloud TPU VM).

    Returns:
        The strategy. Build and compile the model inside ``strategy.scope()``.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; choose from {STRATEGIES}.")
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
