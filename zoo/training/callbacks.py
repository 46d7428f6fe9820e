"""Training callbacks that Keras does not have."""

import time

import keras


class TimeLimit(keras.callbacks.Callback):
    """Stop training cleanly once ``seconds`` have passed (checked after every batch).

    The epoch in progress ends early; later callbacks still see ``on_train_end``, so the
    model is saved as usual. Used by ``make demo`` to bound its training time.
    """

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.stopped_early = False

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self._start > self.seconds:
            self.model.stop_training = True
            self.stopped_early = True
