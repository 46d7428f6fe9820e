"""Epochs of their own length under Keras's ``fit``.

Keras's ``fit`` learns the number of batches of an epoch of a ``tf.data`` input without a known
cardinality from the first epoch, and stops every later epoch of the same ``fit`` at that
number: a longer epoch loses its last batches, silently. zoo's epochs are not all as long as
the first: a translation epoch is bucketed window by window (each window ends with its partial
batches, which the window's order decides), and a worker's part of an epoch is drawn anew each
epoch. So each epoch of zoo's ``fit`` runs until its data ends.
"""

import keras

__all__ = ["each_epoch_to_its_end"]


def each_epoch_to_its_end(model):
    """Have every epoch of ``model.fit`` run until its data ends, as Keras runs the first.

    The model is patched, not Keras (as ``zoo.training.strategy.fit_across_workers`` does): at
    the start of ``fit``, Keras hands its epoch iterator to ``_maybe_symbolic_build``; from
    there, the iterator forgets the length it learnt as each epoch begins. Returns ``model``.

    Raises:
        RuntimeError: the Keras internals this relies on are gone (a Keras release changed
            them), naming the Keras version.
    """
    build = getattr(model, "_maybe_symbolic_build", None)
    if build is None:
        raise RuntimeError(f"Keras {keras.__version__} has no Model._maybe_symbolic_build: "
                           "zoo/training/epoch_length.py needs updating")  # fmt: skip

    def building(iterator=None, data_batch=None):
        if iterator is not None:
            _forget_the_length_each_epoch(iterator)
        return build(iterator=iterator, data_batch=data_batch)

    model._maybe_symbolic_build = building
    return model


def _forget_the_length_each_epoch(iterator):
    missing = [name for name in ("_enumerate_iterator", "_num_batches", "steps_per_epoch")
               if not hasattr(iterator, name)]  # fmt: skip
    if missing:
        raise RuntimeError(f"Keras {keras.__version__}'s epoch iterator has no "
                           f"{', '.join(missing)}: zoo/training/epoch_length.py needs updating")
    if iterator.steps_per_epoch:  # a length that fit was given: Keras keeps to it
        return
    enumerate_epoch = iterator._enumerate_iterator

    def to_its_end():  # called as each epoch begins (EpochIterator.__iter__)
        iterator._num_batches = None  # learnt again, at this epoch's end
        return enumerate_epoch()

    iterator._enumerate_iterator = to_its_end
