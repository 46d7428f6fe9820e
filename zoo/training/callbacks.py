"""Training callbacks that Keras does not have."""

import json
import os
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


class BestCheckpoint(keras.callbacks.ModelCheckpoint):
    """Save the model at ``path`` whenever ``monitor`` beats its best value (higher is better).

    Unlike ``ModelCheckpoint(save_best_only=True)`` alone, the best value survives a crash:
    it is written beside the model (``path + ".json"``) and read back when training resumes,
    so a resumed run never overwrites a better model with a worse one.
    """

    def __init__(self, path, monitor):
        self._score_path = path + ".json"
        best = None
        if os.path.exists(self._score_path) and os.path.exists(path):
            with open(self._score_path) as f:
                best = json.load(f)["best"]
        super().__init__(
            path, monitor=monitor, mode="max", save_best_only=True, initial_value_threshold=best
        )

    def on_epoch_end(self, epoch, logs=None):
        previous = self.best
        super().on_epoch_end(epoch, logs)
        if self.best != previous:
            with open(self._score_path, "w") as f:
                json.dump({"monitor": self.monitor, "best": float(self.best), "epoch": epoch}, f)


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
        self.model.save_weights(os.path.join(self.directory, EPOCH_WEIGHTS.format(epoch=epoch + 1)))
        for path in epoch_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)
