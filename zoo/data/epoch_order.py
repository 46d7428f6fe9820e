"""The order of a training set's examples, anew each epoch, where a resumed run starts, and
which part of them each worker of a cluster reads."""

import typing

import tensorflow as tf

__all__ = [
    "DataCounts",
    "DataPart",
    "DataPosition",
    "draw_seed",
    "epoch_shuffled",
    "per_pass",
    "skip_done",
]


class DataPart(typing.NamedTuple):
    """The part of the training data that one worker of a cluster reads: part ``index`` of
    ``count`` disjoint parts (one per worker) that together are each epoch, batched for one of
    the cluster's ``replicas`` (each batch is ``1 / replicas`` of the token budget, so that the
    replicas' batches together are one batch of the budget)."""

    index: int
    count: int
    replicas: int


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


class DataCounts:
    """The examples a training pipeline has read and those it skipped, by reason, counted as
    they are read (read-ahead included) since the process started: int64 ``tf.Variable``
    that the pipeline adds to (:meth:`counted`) and ``zoo.training`` reports after each epoch.
    """

    REASONS = {"empty": "empty", "too_long": "over max_length"}

    def __init__(self):
        self.read = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_read")
        self.skipped = {
            reason: tf.Variable(0, dtype=tf.int64, trainable=False, name=f"data_{reason}")
            for reason in self.REASONS
        }

    def counted(self, keep, reason=None):
        """``keep`` (a boolean scalar: the example stays), once counted under ``reason``
        (None: counted as read)."""
        if reason is None:
            update = self.read.assign_add(1)
        else:
            update = self.skipped[reason].assign_add(1 - tf.cast(keep, tf.int64))
        with tf.control_dependencies([update]):
            return tf.identity(keep)

    def summary(self):
        """One line of what was skipped so far, or None when nothing was."""
        skipped = {reason: int(v.numpy()) for reason, v in self.skipped.items()}
        if not any(skipped.values()):
            return None
        reasons = ", ".join(f"{n} {self.REASONS[r]}" for r, n in skipped.items() if n)
        read, total = int(self.read.numpy()), sum(skipped.values())
        return (f"the training data so far (read ahead of training): {total} of {read} "
                f"examples skipped ({100 * total / max(read, 1):.2f}%: {reasons})")  # fmt: skip


def per_pass(epoch, make):
    """``make(value)``: with a ``tf.Variable``, its value read as each pass begins; with a
    value (an int64 scalar: inside a pass already), that value."""
    if not isinstance(epoch, tf.Variable):
        return make(tf.convert_to_tensor(epoch, tf.int64))
    start = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64))
    return start.map(lambda _: epoch.read_value()).flat_map(make)


def draw_seed(seed, epoch, *places):
    """The seed (shape (2,)) of a stateless random op in a pipeline: a function of the run's
    ``seed``, the ``epoch`` and the draw's place (the worker's part, the example's or batch's
    index in the epoch) alone, so that a resumed run draws what the interrupted one drew where
    a stateful op would start over."""
    drawn = tf.stack([tf.constant(seed or 0, tf.int64), tf.cast(epoch, tf.int64)])
    for place in places:
        drawn = tf.random.experimental.stateless_fold_in(drawn, tf.cast(place, tf.int64))
    return drawn


def epoch_shuffled(tensors, seed, epoch=None):
    """A ``tf.data.Dataset`` of the slices of ``tensors`` (equal-length tensors, or a tuple
    of them), in a new order each epoch.

    With ``epoch`` (an int64 ``tf.Variable``, :attr:`DataPosition.epoch`, or its value read
    by :func:`per_pass`), the order is a function of ``seed`` and the epoch alone (a
    stateless permutation, ``tf.random.experimental.index_shuffle``), so a run resumed in a
    fresh process sees each epoch in the order the interrupted run saw it. Without it,
    ``Dataset.shuffle`` reshuffles on every pass, which a fresh process starts over.
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

    return per_pass(epoch, one_epoch)


def skip_done(ds, position):
    """``ds`` (the batches of an epoch) without its first ``position.skip`` batches, those a
    resumed run has trained on already. They are still made (the data work), never trained
    on. It keeps ``ds``'s options: the pass's new outer dataset would otherwise have the
    defaults, tf.data's autotuning among them, whose thread makes freeing each epoch's
    iterator wait (seconds each time; see ``translation_pipeline.prefetched``)."""
    return per_pass(position.skip, ds.skip).with_options(ds.options())
