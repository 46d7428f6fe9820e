"""The dev figure that picks a multi-head tagger's best epoch: AllTags, logged as ``val_alltags``."""

import keras

from zoo.evaluation.conll18 import universal_features

__all__ = ["ALLTAGS_HEADS", "ValidationAllTags", "alltags_accuracy"]

ALLTAGS_HEADS = ("upos", "xpos", "feats")  # the columns of the CoNLL 2018 AllTags figure


def _compared(head, value):
    return universal_features(value) if head == "feats" else value


def alltags_accuracy(sentences, predicted):
    """The percentage of words whose UPOS, XPOS and universal FEATS are all right, as the
    CoNLL 2018 AllTags figure counts them, over the heads of ``predicted`` among them (a
    tagger without a FEATS head is scored on UPOS and XPOS).

    Args:
        sentences: the gold :class:`zoo.data.Sentence` objects.
        predicted: ``{head: tags}`` of :meth:`zoo.models.Tagger.tag_columns`.
    """
    heads = [head for head in ALLTAGS_HEADS if head in predicted]  # Sentence fields too
    right = words = 0
    for i, sentence in enumerate(sentences):
        for t in range(len(sentence.words)):
            words += 1
            right += all(
                _compared(head, getattr(sentence, head)[t])
                == _compared(head, predicted[head][i][t])
                for head in heads
            )
    return 100.0 * right / max(words, 1)


class ValidationAllTags(keras.callbacks.Callback):
    """Tag the validation sentences with every head after each epoch and log ``val_alltags``
    (:func:`alltags_accuracy`), the figure that keeps a multi-head tagger's best epoch.

    Args:
        tagger_of: the model being trained -> its :class:`zoo.models.Tagger` (with the run's
            vocabulary).
        sentences: the validation :class:`zoo.data.Sentence` objects.
    """

    def __init__(self, tagger_of, sentences):
        super().__init__()
        self.tagger_of = tagger_of
        self.sentences = list(sentences)
        self.words = [list(sentence.words) for sentence in self.sentences]

    def on_epoch_end(self, epoch, logs=None):
        predicted = self.tagger_of(self.model).tag_columns(self.words)
        if logs is not None:
            logs["val_alltags"] = alltags_accuracy(self.sentences, predicted)
