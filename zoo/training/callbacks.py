"""Training callbacks that Keras does not have."""

import json
import math
import os
import time
import warnings

import keras
import numpy as np

from zoo.artifacts import save_model_atomically, write_text_atomically


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


class ValidationBleu(keras.callbacks.Callback):
    """Translate a sample of validation pairs after each epoch and log ``val_bleu``.

    The score (sacreBLEU, default signature) goes into the epoch logs, so the progress bar,
    the History and TensorBoard show it.

    Args:
        tokenizer: the zoo ``SentencePieceTokenizer`` of the model.
        pairs: (source, reference) string pairs; the first ``sample_size`` are used.
        sample_size: how many pairs to translate each epoch.
        max_length: the longest translation, in tokens.
        **search: the search of :func:`zoo.decoding.translate` (default: greedy).
    """

    def __init__(self, tokenizer, pairs, sample_size=200, max_length=64, **search):
        super().__init__()
        self.tokenizer = tokenizer
        self.pairs = list(pairs)[:sample_size]
        self.max_length = max_length
        self.search = search or {"method": "greedy"}

    def on_epoch_end(self, epoch, logs=None):
        from zoo.decoding import translate  # decoding needs the trained model, not the reverse
        from zoo.evaluation import corpus_bleu

        sources = [source for source, _ in self.pairs]
        references = [reference for _, reference in self.pairs]
        hypotheses = translate(
            self.model, self.tokenizer, sources, max_length=self.max_length, **self.search
        )
        if logs is not None:
            logs["val_bleu"] = corpus_bleu(hypotheses, references)["bleu"]


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite (raised by :class:`StopOnNonFiniteLoss`)."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stop training at the first batch whose loss is NaN or infinite, keeping the last good state.

    It raises :class:`NonFiniteLossError`, naming the step, from inside ``fit``: the callbacks
    that save at the end of an epoch (the backup, ``checkpoint.keras``, ``model.keras``) never
    see the broken weights, so the workdir keeps the last finished epoch. (Keras's
    ``TerminateOnNaN`` only stops, and the epoch's end then saves the NaN weights.) It must
    come before any callback that saves after a batch.
    """

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        loss = float(np.asarray(loss))
        if not math.isfinite(loss):
            step = int(np.asarray(self.model.optimizer.iterations))
            raise NonFiniteLossError(
                f"the training loss became {loss} at step {step} (epoch {self._epoch + 1}, "
                f"batch {batch + 1}); training stopped, and the workdir keeps the last finished "
                "epoch (a lower learning rate, or no mixed precision, may avoid it)."
            )


class ModelFile(keras.callbacks.Callback):
    """Save the model at ``path`` (``.keras``) after every epoch, atomically: a kill during
    the save leaves the previous epoch's file, never a truncated one."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_end(self, epoch, logs=None):
        save_model_atomically(self.model, self.path)


class BestCheckpoint(keras.callbacks.Callback):
    """Save the model at ``path`` whenever ``monitor`` beats its best value (higher is better).

    The best value survives a crash: it is written beside the model (``path + ".json"``) and
    read back when training resumes, so a resumed run never overwrites a better model with a
    worse one. Both files are written atomically.
    """

    def __init__(self, path, monitor):
        super().__init__()
        self.path = path
        self.monitor = monitor
        self._score_path = path + ".json"
        self.best = None
        if os.path.exists(self._score_path) and os.path.exists(path):
            with open(self._score_path) as f:
                self.best = json.load(f)["best"]

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:  # as Keras's ModelCheckpoint does: say so, and train on
            warnings.warn(f"BestCheckpoint: no {self.monitor!r} in this epoch's logs; not saved.")
            return
        value = float(np.asarray(value))
        if self.best is not None and not value > self.best:
            return
        self.best = value
        save_model_atomically(self.model, self.path)
        write_text_atomically(
            self._score_path, json.dumps({"monitor": self.monitor, "best": value, "epoch": epoch})
        )


class LastCheckpoints(keras.callbacks.Callback):
    """Keep the weights of the last ``keep`` epochs in ``directory``, for checkpoint averaging.

    After every epoch the weights go to ``epoch-NNNN.weights.h5`` (epochs count from 1); files
    of older epochs beyond the last ``keep`` are deleted, so a long run keeps a bounded amount.
    """

    def __init__(self, directory, keep):
        super().__init__()
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}.")
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        from zoo.artifacts import EPOCH_WEIGHTS
        from zoo.training.average import epoch_checkpoints

        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, EPOCH_WEIGHTS.format(epoch=epoch + 1))
        save_model_atomically(self.model, path)
        for path in epoch_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)
