"""Each epoch of zoo's ``fit`` runs to its data's end, however long the first was."""

import keras
import numpy as np
import tensorflow as tf

from zoo.training.epoch_length import each_epoch_to_its_end


class Counted(keras.callbacks.Callback):
    """The batches of each epoch; each epoch begins by asking for ``lengths[epoch]`` batches."""

    def __init__(self, wanted, lengths):
        super().__init__()
        self.wanted, self.lengths, self.seen = wanted, lengths, []

    def on_epoch_begin(self, epoch, logs=None):
        self.wanted.assign(self.lengths[epoch])
        self.seen.append(0)

    def on_train_batch_end(self, batch, logs=None):
        self.seen[-1] += 1


def _batches_per_epoch(patched, lengths):
    keras.utils.set_random_seed(0)
    wanted = tf.Variable(0, dtype=tf.int64)
    batch = (np.ones((2, 3), "float32"), np.zeros((2, 1), "float32"))
    # An epoch of as many batches as the variable says as its pass begins.
    data = tf.data.Dataset.from_tensors(0).map(lambda _: wanted.read_value()).flat_map(
        lambda n: tf.data.Dataset.from_tensors(batch).repeat(n))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    if patched:
        each_epoch_to_its_end(model)
    counted = Counted(wanted, lengths)
    model.fit(data, epochs=len(lengths), verbose=0, callbacks=[counted])
    return counted.seen


def test_an_epoch_longer_than_the_first_runs_to_its_end():
    lengths = [2, 4, 1, 3]
    assert _batches_per_epoch(True, lengths) == lengths
    # Keras alone stops each later epoch at about the first's length (3 here: it counts the
    # call that found the data ended): the second loses a batch.
    assert _batches_per_epoch(False, lengths)[1] < 4
