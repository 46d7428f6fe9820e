"""The order of a training set's examples, anew each epoch, and where a resumed run starts."""

import tensorflow as tf

__all__ = ["DataPosition", "epoch_shuffled", "positioned"]


class DataPosition:
    """Where training is in its data: the epoch, which fixes the epoch's order
    (:func:`epoch_shuffled`), and the batches of it to skip, those a resumed run has trained
    on already. Two int64 ``tf.Variable`` that :func:`positioned` reads as each pass over the
    data begins; ``zoo.training``'s ``ResumableBackup`` sets them."""

    def __init__(self):
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
        self.skip = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_skip")

    def set(self, epoch, skip=0):
        self.epoch.assign(epoch)
        self.skip.assign(skip)


def epoch_shuffled(tensors, seed, epoch=None):
    """A ``tf.data.Dataset`` of the slices of ``tensors`` (equal-length tensors, or a tuple
    of them), in a new order each epoch.

    With ``epoch`` (an int64 scalar tensor), the order is a function of ``seed`` and
    ``epoch`` alone (a stateless permutation, ``tf.random.experimental.index_shuffle``), so a
    run resumed in a fresh process sees each epoch in the order the interrupted run saw it.
    Without it, ``Dataset.shuffle`` reshuffles on every pass, which a fresh process starts over.
    """
    ds = tf.data.Dataset.from_tensor_slices(tensors)
    size = len(tf.nest.flatten(tensors)[0])
    if epoch is None:
        return ds.shuffle(max(size, 1), seed=seed, reshuffle_each_iteration=True)
    if size == 0:
        return ds
    tensors = tf.nest.map_structure(tf.convert_to_tensor, tensors)
    seeds = tf.stack([tf.constant(0 if seed is None else seed, tf.int64), epoch])

    def pick(index):
        drawn = tf.random.experimental.index_shuffle(index, seeds, max_index=size - 1)
        return tf.nest.map_structure(lambda t: tf.gather(t, drawn), tensors)

    return tf.data.Dataset.range(size).map(pick, num_parallel_calls=tf.data.AUTOTUNE)


def positioned(batches_of_epoch, position):
    """The batches of one epoch per pass: ``batches_of_epoch(epoch)`` (a function of an int64
    scalar tensor) for ``position.epoch``, less its first ``position.skip`` batches.

    Both are read once, as a pass begins: Keras makes the next epoch's iterator before the
    epoch's callbacks run, and its prefetching makes elements ahead, so a value read per
    element would race with the callback that sets it. The skipped batches are still made
    (the data work), never trained on.
    """
    start = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(
        lambda _: (position.epoch.read_value(), position.skip.read_value())
    )
    return start.flat_map(lambda epoch, skip: batches_of_epoch(epoch).skip(skip))
