"""The order of a training set's examples, anew each epoch, and where a resumed run starts."""

import tensorflow as tf

__all__ = ["DataPosition", "epoch_shuffled", "skip_done"]


class DataPosition:
    """Where training is in its data: the epoch, which fixes the epoch's order
    (:func:`epoch_shuffled`), and the batches of it to skip (:func:`skip_done`), those a
    resumed run has trained on already. Two int64 ``tf.Variable`` that the pipeline reads
    once, as each pass over the data begins; ``zoo.training``'s ``ResumableBackup`` sets them.

    Read once per pass, not per element: Keras makes the next epoch's iterator before the
    epoch's callbacks run, and prefetching makes elements ahead, so a value read per element
    would race with the callback that sets it.
    """

    def __init__(self):
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
        self.skip = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_skip")

    def set(self, epoch, skip=0):
        self.epoch.assign(epoch)
        self.skip.assign(skip)


def _per_pass(variable, make):
    """``make(value)`` with ``variable``'s value read as each pass begins."""
    start = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64))
    return start.map(lambda _: variable.read_value()).flat_map(make)


def epoch_shuffled(tensors, seed, epoch=None):
    """A ``tf.data.Dataset`` of the slices of ``tensors`` (equal-length tensors, or a tuple
    of them), in a new order each epoch.

    With ``epoch`` (an int64 ``tf.Variable``, :attr:`DataPosition.epoch`), the order is a
    function of ``seed`` and the epoch alone (a stateless permutation,
    ``tf.random.experimental.index_shuffle``), so a run resumed in a fresh process sees each
    epoch in the order the interrupted run saw it. Without it, ``Dataset.shuffle`` reshuffles
    on every pass, which a fresh process starts over.
    """
    size = len(tf.nest.flatten(tensors)[0])
    if epoch is None or size == 0:
        ds = tf.data.Dataset.from_tensor_slices(tensors)
        return ds if size == 0 else ds.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, tensors)
    base = tf.constant(0 if seed is None else seed, tf.int64)

    def one_epoch(value):
        def pick(index):
            drawn = tf.random.experimental.index_shuffle(
                index, tf.stack([base, value]), max_index=size - 1
            )
            return tf.nest.map_structure(lambda t: tf.gather(t, drawn), tensors)

        return tf.data.Dataset.range(size).map(pick, num_parallel_calls=tf.data.AUTOTUNE)

    return _per_pass(epoch, one_epoch)


def skip_done(ds, position):
    """``ds`` (the batches of an epoch) without its first ``position.skip`` batches, those a
    resumed run has trained on already. They are still made (the data work), never trained
    on. It keeps ``ds``'s options: the pass's new outer dataset would otherwise have the
    defaults, tf.data's autotuning among them, whose thread makes freeing each epoch's
    iterator wait (seconds each time; see ``translation_pipeline.prefetched``)."""
    return _per_pass(position.skip, ds.skip).with_options(ds.options())
