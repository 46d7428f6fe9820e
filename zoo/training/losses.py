"""Losses for sequence models."""

import keras
from keras import ops

from zoo.layers.ctc import ctc_log_likelihood, ctc_positions_needed


@keras.saving.register_keras_serializable(package="zoo")
class MaskedSparseCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross entropy over integer labels, ignoring the padding id.

    With smoothing ``e`` the target distribution is ``1 - e`` on the label and ``e / V``
    spread over all V classes (Szegedy et al. 2016), as in the Transformer paper. Padding
    positions (``y_true == pad_id``) contribute nothing, and the mean is over real tokens.

    With ``mean_over="labels"`` the mean is over the labels that are not ``pad_id`` rather than
    over the target's real tokens (the implicit mask): a conditional masked language model
    labels only the positions it masked, and its loss is their mean.

    Args:
        label_smoothing: e, in [0, 1).
        pad_id: the label that marks padding.
        from_logits: whether predictions are logits (True) or probabilities.
        mean_over: ``"tokens"`` (the implicit mask's real tokens) or ``"labels"``.

    Example:
        >>> loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
        >>> float(loss(keras.ops.array([[3, 0]]), keras.ops.zeros((1, 2, 5)))) > 0
        True
    """

    def __init__(self, label_smoothing=0.0, pad_id=0, from_logits=True, mean_over="tokens",
                 name="masked_cross_entropy", **kwargs):
        if mean_over not in ("tokens", "labels"):
            raise ValueError(f"mean_over must be 'tokens' or 'labels', got {mean_over!r}.")
        if mean_over == "labels":  # call() divides by the label count; Keras only sums
            kwargs["reduction"] = "sum"
        super().__init__(name=name, **kwargs)
        self.mean_over = mean_over
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}.")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")  # the softmax in float32 under mixed precision
        log_probs = (
            ops.log_softmax(y_pred, axis=-1) if self.from_logits else ops.log(y_pred + 1e-9)
        )  # (B, T, V)
        y_true = ops.cast(y_true, "int32")
        nll = -ops.take_along_axis(log_probs, ops.expand_dims(y_true, -1), axis=-1)[..., 0]
        smooth = -ops.mean(log_probs, axis=-1)  # cross entropy against the uniform distribution
        loss = (1.0 - self.label_smoothing) * nll + self.label_smoothing * smooth  # (B, T)
        real = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        # Keras divides by the number of real tokens through the logits' implicit mask; the
        # padding is zeroed here too, so a model without that mask still ignores padding.
        if self.mean_over == "labels":
            return loss * real / ops.maximum(ops.sum(real), 1.0)
        return loss * real

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "label_smoothing": self.label_smoothing,
                "pad_id": self.pad_id,
                "from_logits": self.from_logits,
                "mean_over": self.mean_over,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class CTCLoss(keras.losses.Loss):
    """The CTC loss of a non-autoregressive decoder, per target token, over the batch.

    The negative log-likelihood of the labels over every alignment to the decoder's positions
    (Graves et al. 2006), divided by the label count and averaged over the sentences (fairseq's
    ``nat_ctc``). With :class:`zoo.layers.CTCBlankPadding` each sentence is scored over its real
    positions. A sentence with no alignment (more labels than positions) counts as 0 (fairseq's
    ``zero_infinity``), so that one such pair does not stop training.

    Args:
        blank_id: the blank's id in the logits' last axis.
        pad_id: the label that marks padding after a sentence's labels.

    Example:
        >>> loss = CTCLoss(blank_id=1)
        >>> float(loss(keras.ops.array([[3, 0]]), keras.ops.zeros((1, 4, 5)))) > 0
        True

    References:
        Graves et al. 2006, "Connectionist Temporal Classification"; Libovický & Helcl 2018.
    """

    def __init__(self, blank_id, pad_id=0, name="ctc", **kwargs):
        super().__init__(name=name, **kwargs)
        self.blank_id = blank_id
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)  # (B, L, V)
        y_true = ops.cast(y_true, "int32")  # (B, T)
        counts = ops.sum(ops.cast(ops.not_equal(y_true, self.pad_id), "int32"), axis=1)  # (B,)
        nll = -ctc_log_likelihood(log_probs, y_true, self.blank_id, self.pad_id)  # (B,)
        feasible = ctc_positions_needed(y_true, self.pad_id) <= ops.shape(y_pred)[1]
        nll = ops.where(feasible, nll, 0.0)  # the where also stops its gradient
        return nll / ops.cast(ops.maximum(counts, 1), "float32")

    def get_config(self):
        return {**super().get_config(), "blank_id": self.blank_id, "pad_id": self.pad_id}
