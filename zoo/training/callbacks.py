"""Training callbacks that Keras does not have."""

import json
import math
import os
import shutil
import sys
import time
import warnings

import keras
import numpy as np

from zoo.artifacts import EPOCH_WEIGHTS, save_model_atomically, write_text_atomically
from zoo.training.average import epoch_checkpoints


class DataCountsLog(keras.callbacks.Callback):
    """Say on stderr after each epoch what the training pipeline has skipped so far
    (:class:`zoo.data.DataCounts`: empty examples, examples over the length limit)."""

    def __init__(self, counts):
        super().__init__()
        self.counts = counts

    def on_epoch_end(self, epoch, logs=None):
        summary = self.counts.summary()
        if summary:
            print(f"epoch {epoch + 1}: {summary}", file=sys.stderr, flush=True)


class TimeLimit(keras.callbacks.Callback):
    """Stop training cleanly once ``seconds`` have passed (checked after every batch).

    The epoch in progress ends early; later callbacks still see ``on_train_end``, so the
    model is saved as usual. Used by ``make demo`` to bound its training time.
    """

    def __init__(self, seconds):
        super().__init__()
        self.seconds, self._start = seconds, None

    def on_train_begin(self, logs=None):
        if self._start is None:  # a run's first fit: a resumed run's cut epoch is a fit of its own
            self._start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self._start > self.seconds:
            self.model.stop_training = True


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite (raised by :class:`StopOnNonFiniteLoss`)."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stop training at the first batch whose loss is NaN or infinite, keeping the last good state.

    It raises :class:`NonFiniteLossError`, naming the step, from inside ``fit``: the callbacks
    that save after a batch or an epoch (the backup, ``checkpoint.keras``, ``model.keras``)
    never see the broken weights, so the workdir keeps the last good state. (Keras's
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
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, EPOCH_WEIGHTS.format(epoch=epoch + 1))
        save_model_atomically(self.model, path)
        for path in epoch_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """``BackupAndRestore`` at step granularity, with the data position.

    The backup (the weights and the optimizer's state, whose step count drives the learning
    rate) is written every ``save_every`` steps and at every epoch's end, with the epoch, the
    batches of it done and the state of the model's random seeds (dropout's and the like,
    which ``save_weights`` leaves out: a rerun draws the masks the interrupted run would
    have). A rerun restores all three: ``fit`` starts at that epoch, and
    ``position`` (the :class:`zoo.data.DataPosition` the pipeline reads) replays the
    interrupted order and skips the batches done (in a windowed pipeline, from the window
    where they end, which the backup keeps too); Keras's own class would start the epoch
    over. Each write keeps the one before (``double_checkpoint``) against a kill mid-write.
    Keras takes every epoch of a ``fit`` to be as long as its first, so ``train()`` runs the
    rest of a cut epoch in a ``fit`` of its own (:meth:`resumes_mid_epoch`).

    Args:
        backup_dir: the backup's folder.
        position: the :class:`zoo.data.DataPosition` of the training data, or None (the epoch
            is then restored, not the place in it).
        save_every: steps between backups within an epoch; None: at epochs' ends only.
    """

    METADATA_FILE = "training_metadata.json"  # Keras's name, beside its latest.weights.h5

    def __init__(self, backup_dir, position=None, save_every=None):
        super().__init__(backup_dir, save_freq="epoch", double_checkpoint=True,
                         delete_checkpoint=False)  # fmt: skip
        assert os.path.basename(self._training_metadata_path) == self.METADATA_FILE
        self.position = position
        self.save_every = save_every
        self._epoch = 0
        self._done = 0  # batches of self._epoch trained on
        self._window = None  # where those end in the pipeline's windows, when restored

    @staticmethod
    def resumes_mid_epoch(backup_dir):
        """The epoch a rerun would resume in the middle of, or None."""
        state = ResumableBackup._read(os.path.join(backup_dir, ResumableBackup.METADATA_FILE))
        return state["epoch"] if state and state.get("batches") else None

    @staticmethod
    def describe(backup_dir):
        """Where a rerun resumes, in words ("epoch 3, after 40 of its batches (step 160), in
        its window 2"), or None when there is no backup. A rerun that must make the batches
        done again to drop them (a pipeline without windows, or a backup from before them)
        says so."""
        state = ResumableBackup._read(os.path.join(backup_dir, ResumableBackup.METADATA_FILE))
        if not state:
            return None
        done = state.get("batches", 0)
        where = f"after {done} of its batches" if done else "from its start"
        step = f" (step {state['step']})" if "step" in state else ""
        if done and "window" in state:
            step += f", in its window {state['window'][0] + 1}"
        elif done:
            step += ", which are made again and dropped"
        return f"epoch {state['epoch'] + 1}, {where}{step}"

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # the weights, the optimizer, the epoch to start at
        self._epoch, self._done = 0, 0
        state = self._read(self._training_metadata_path)
        if state and state.get("step", self._step()) != self._step():
            # Killed between the weights and the position: the copies before are one pair.
            self.model.load_weights(self._prev_weights_path)
            state = self._read(self._prev_training_metadata_path)
            self.model._initial_epoch = state["epoch"]
        if state:
            self._epoch, self._done = state["epoch"], state.get("batches", 0)
            self._window = state.get("window")
            for variable, value in zip(self._seeds(), state.get("seeds", [])):
                variable.assign(np.asarray(value, dtype=variable.dtype))
        self._set_position(self._epoch, self._done, self._window)

    def on_epoch_begin(self, epoch, logs=None):
        if epoch != self._epoch:  # not an epoch that a rerun resumes in the middle of
            self._epoch, self._done, self._window = epoch, 0, None
        self._set_position(epoch, self._done, self._window)

    def on_train_batch_end(self, batch, logs=None):
        self._done += 1
        # Keras makes the next epoch's iterator after an epoch's last batch, before
        # on_epoch_end: from now on a pass that begins is the next epoch's, from its start.
        self._set_position(self._epoch + 1, 0)
        if self.save_every and self._done % self.save_every == 0:
            self._save_model()

    def on_epoch_end(self, epoch, logs=None):
        self._epoch, self._done = epoch + 1, 0
        self._save_model()

    def _set_position(self, epoch, skip, window=None):
        if self.position is not None:
            self.position.set(epoch, skip, window)

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def _seeds(self):
        """The states of the model's ``SeedGenerator`` (its variables that are no weights)."""
        weights = {id(v) for v in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    @staticmethod
    def _read(path):
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        for path, previous in ((self._weights_path, self._prev_weights_path),
                               (self._training_metadata_path, self._prev_training_metadata_path)):
            if os.path.exists(path):
                shutil.copyfile(path, previous)
        self.model.save_weights(self._weights_path, overwrite=True)
        # The optimizer's step names the weights this position belongs to.
        state = {"epoch": self._epoch, "batches": self._done, "step": self._step(),
                 "seeds": [keras.ops.convert_to_numpy(v).tolist() for v in self._seeds()]}
        # Where the batches done end in a windowed pipeline's epoch: a rerun starts there.
        window = self.position.window_of(self._epoch, self._done) if self.position else None
        if self._done and window is not None:
            state["window"] = list(window)
        write_text_atomically(self._training_metadata_path, json.dumps(state))
