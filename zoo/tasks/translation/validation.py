"""``val_bleu`` (``val_exact`` for the transliterator): a text-to-text task's validation metric,
computed after each epoch."""

import keras

__all__ = ["ValidationScore"]


class ValidationScore(keras.callbacks.Callback):
    """Translate a sample of validation pairs after each epoch and log ``val_<metric>``.

    The score goes into the epoch logs, so the progress bar, the History and TensorBoard show it.

    Args:
        translate: ``translate(model, sources) -> hypotheses``, the task's search with its
            settings (the translation task passes greedy search, the NAT Mask-Predict).
        pairs: (source, reference) string pairs; the first ``sample_size`` are used.
        sample_size: how many pairs to translate each epoch.
        metric: the name of the score logged, a key of what ``score`` returns.
        score: ``score(hypotheses, references) -> dict``, for example
            :func:`zoo.evaluation.corpus_bleu` (sacreBLEU, default signature) with ``"bleu"``.
    """

    def __init__(self, translate, pairs, sample_size, metric, score):
        super().__init__()
        self.translate, self.metric, self.score = translate, metric, score
        self.pairs = list(pairs)[:sample_size]

    def on_epoch_end(self, epoch, logs=None):
        sources = [source for source, _ in self.pairs]
        references = [reference for _, reference in self.pairs]
        hypotheses = self.translate(self.model, sources)
        if logs is not None:
            logs[f"val_{self.metric}"] = self.score(hypotheses, references)[self.metric]
