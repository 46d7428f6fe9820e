"""Metrics for sequence labelling that count every real token once."""

import keras
from keras import ops

from zoo.layers.crf import CRFAccuracy


@keras.saving.register_keras_serializable(package="zoo")
class MaskedAccuracy(CRFAccuracy):
    """Token accuracy of the argmax of logits ``(B, T, K)`` over real tokens.

    The padding mask is the implicit mask of ``y_pred``. Every real token counts once, over all
    batches: ``keras.metrics.SparseCategoricalAccuracy`` averages a masked batch per sentence
    first, so a token of a batch padded to T counts 1/T, and batches of different lengths skew
    the result.

    Example:
        >>> metric = MaskedAccuracy()
        >>> metric.update_state(keras.ops.array([[1, 0]]), keras.ops.array([[[0.0, 1.0], [0.0, 1.0]]]))
        >>> float(metric.result())
        0.5
    """

    def _decode(self, y_pred, mask):
        return ops.argmax(y_pred, axis=-1)
