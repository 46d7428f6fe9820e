"""``val_bleu``: the translation task's validation metric, computed after each epoch."""

import keras

from zoo.evaluation import corpus_bleu

__all__ = ["ValidationBleu"]


class ValidationBleu(keras.callbacks.Callback):
    """Translate a sample of validation pairs after each epoch and log ``val_bleu``.

    The score (sacreBLEU, default signature) goes into the epoch logs, so the progress bar,
    the History and TensorBoard show it.

    Args:
        translate: ``translate(model, sources) -> hypotheses``, the task's search with its
            settings (the translation task passes greedy search, the NAT Mask-Predict).
        pairs: (source, reference) string pairs; the first ``sample_size`` are used.
        sample_size: how many pairs to translate each epoch.
    """

    def __init__(self, translate, pairs, sample_size=200):
        super().__init__()
        self.translate = translate
        self.pairs = list(pairs)[:sample_size]

    def on_epoch_end(self, epoch, logs=None):
        sources = [source for source, _ in self.pairs]
        references = [reference for _, reference in self.pairs]
        hypotheses = self.translate(self.model, sources)
        if logs is not None:
            logs["val_bleu"] = corpus_bleu(hypotheses, references)["bleu"]
