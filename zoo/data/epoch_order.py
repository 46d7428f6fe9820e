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
    "resumable_pass",
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
    (:func:`epoch_shuffled`), and where a resumed run starts in it: after ``skip`` batches,
    those it has trained on already. int64 ``tf.Variable`` that the pipeline reads once, as
    each pass over the data begins; ``zoo.training``'s ``ResumableBackup`` sets them.

    A pipeline that makes its epoch window by window (:func:`resumable_pass`) starts at
    ``window``, after ``window_skip`` of its batches, without making the windows before:
    it records in ``log`` the window of each batch it makes, which the backup reads for the
    batch it saves after (:meth:`window_of`). ``window`` -1: not known (a backup from
    before), so the pass makes the ``skip`` batches again from the epoch's start and drops
    them, as :func:`skip_done` does for a pipeline without windows.

    Read once per pass, not per element: Keras makes the next epoch's iterator before the
    epoch's callbacks run, and prefetching makes elements ahead, so a value read per element
    would race with the callback that sets it.
    """

    LOG_SIZE = 4096  # batches whose window is kept: far more than a pipeline reads ahead

    def __init__(self):
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
        self.skip = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_skip")
        self.window = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_window")
        self.window_skip = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="data_window_skip")  # fmt: skip
        # Row n % LOG_SIZE: (epoch, n, window, batch of the window) of the epoch's batch n.
        self.log = tf.Variable(tf.fill([self.LOG_SIZE, 4], tf.constant(-1, tf.int64)),
                               trainable=False, name="data_log")  # fmt: skip
        self.windowed = False  # set by a pipeline made with resumable_pass

    def set(self, epoch, skip=0, window=None):
        """Start the next pass at ``epoch`` after ``skip`` batches; ``window``: ``(window,
        batches of it)`` where those end (:meth:`window_of`), or None: from the start when
        ``skip`` is 0, else not known."""
        self.epoch.assign(epoch)
        self.skip.assign(skip)
        if window is None:
            window = (0, 0) if skip == 0 else (-1, 0)
        self.window.assign(window[0])
        self.window_skip.assign(window[1])

    def window_of(self, epoch, done):
        """``(window, batches of it)`` that end where the first ``done`` batches of ``epoch``
        end, as the log has it, or None (not logged: a pipeline without windows, or one that
        had stopped making batches, as a worker's shorter part does)."""
        if done == 0:
            return (0, 0)
        row = self.log[(done - 1) % self.LOG_SIZE].numpy().tolist()
        if row[:2] != [epoch, done - 1]:
            return None
        return (row[2], row[3] + 1)


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
    value (an int64 scalar: inside a pass already), that value. With a tuple of int64
    ``tf.Variable``, ``make(*values)``, all read as each pass begins."""
    if isinstance(epoch, tuple):
        start = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64))
        values = start.map(lambda _: tf.stack([v.read_value() for v in epoch]))
        return values.flat_map(lambda stacked: make(*tf.unstack(stacked)))
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


def resumable_pass(position, windows, batches):
    """One epoch's batches, made window by window, that a resumed run starts where it stopped
    without making the windows before.

    Args:
        position: the :class:`DataPosition`; its values are read as each pass begins.
        windows: ``windows(epoch, start)``: the ``tf.data.Dataset`` of the epoch's windows
            from window ``start`` on (int64 scalars), each ``(index, tensors)``; it must not
            make the windows before ``start``.
        batches: ``batches(epoch, index, tensors)``: the dataset of a window's batches, a
            function of its arguments alone (a window ends with its partial batches).

    Returns:
        The dataset of the pass's batches. Each batch made is logged in ``position.log``.
    """
    position.windowed = True
    size = DataPosition.LOG_SIZE

    def one_pass(epoch, done, window, window_skip):
        known = window >= 0
        start = tf.maximum(window, 0)

        def window_batches(index, tensors):
            skip = tf.where(tf.logical_and(known, tf.equal(index, start)), window_skip, 0)
            made = batches(epoch, index, tensors).enumerate().skip(skip)
            return made.map(lambda i, batch: (index, i, batch))

        made = windows(epoch, start).flat_map(window_batches)
        # Not known (a backup from before): from the epoch's start, the batches done dropped.
        made = made.skip(tf.where(known, tf.constant(0, tf.int64), done))

        def logged(n, made):
            index, i, batch = made
            row = tf.stack([epoch, n, index, i])
            update = position.log.scatter_nd_update([[n % size]], [row])
            with tf.control_dependencies([update]):
                return tf.nest.map_structure(tf.identity, batch)

        return made.enumerate(done).map(logged)

    return per_pass((position.epoch, position.skip, position.window, position.window_skip),
                    one_pass)


def skip_done(ds, position):
    """``ds`` (the batches of an epoch) without its first ``position.skip`` batches, those a
    resumed run has trained on already. They are still made (the data work), never trained
    on. It keeps ``ds``'s options: the pass's new outer dataset would otherwise have the
    defaults, tf.data's autotuning among them, whose thread makes freeing each epoch's
    iterator wait (seconds each time; see ``translation_pipeline.prefetched``). A pipeline
    made with :func:`resumable_pass` skips by itself: ``ds`` is returned as it is."""
    if position.windowed:
        return ds
    return per_pass(position.skip, ds.skip).with_options(ds.options())
