"""Guided attention: an auxiliary loss that pulls cross attention toward a prior alignment."""

import keras
from keras import ops


def diagonal_penalty(target_padding, source_padding, sigma=0.2):
    """Tachibana et al.'s penalty ``W[t, s] = 1 - exp(-(s / S - t / T) ** 2 / (2 sigma ** 2))``.

    ``T`` and ``S`` are each sentence's own real lengths, so the diagonal runs from corner to
    corner of its real part; padded cells are 0.

    Args:
        target_padding: ``(B, T)`` boolean, True on real target positions (leading ones).
        source_padding: ``(B, S)`` boolean, True on real source positions (leading ones).
        sigma: the width of the band around the diagonal that goes unpenalised.

    Returns:
        ``(B, T, S)`` float32 penalties in ``[0, 1)``.

    Example:
        >>> w = diagonal_penalty(ops.ones((1, 4), "bool"), ops.ones((1, 4), "bool"))
        >>> [round(float(x), 3) for x in w[0, 0]]  # the first target position
        [0.0, 0.542, 0.956, 0.999]
    """
    target_padding = ops.cast(target_padding, "float32")
    source_padding = ops.cast(source_padding, "float32")
    t = ops.cast(ops.arange(ops.shape(target_padding)[1]), "float32")  # (T,)
    s = ops.cast(ops.arange(ops.shape(source_padding)[1]), "float32")  # (S,)
    t = t[None, :] / ops.maximum(ops.sum(target_padding, axis=1, keepdims=True), 1.0)  # (B, T)
    s = s[None, :] / ops.maximum(ops.sum(source_padding, axis=1, keepdims=True), 1.0)  # (B, S)
    distance = s[:, None, :] - t[:, :, None]  # (B, T, S)
    penalty = 1.0 - ops.exp(-ops.square(distance) / (2.0 * sigma**2))
    return penalty * target_padding[:, :, None] * source_padding[:, None, :]


def guided_attention_loss(attention, target_padding, source_padding, sigma=0.2, alignment=None):
    """The attention's distance from a prior, per real target position, over heads and blocks.

    Without ``alignment``: the expected diagonal penalty, ``sum_s A[t, s] W[t, s]``
    (:func:`diagonal_penalty`), the attention mass off the diagonal. With ``alignment``
    (supervised alignments, Garg et al. 2019): the cross entropy ``-sum_s P[t, s] log A[t, s]``
    from the given alignment distribution ``P``.

    Args:
        attention: ``(B, N, T, S)`` weights, or a list of them (one per decoder block).
        target_padding, source_padding: ``(B, T)`` and ``(B, S)`` booleans, True on real tokens.
        sigma: the diagonal prior's width.
        alignment: optional ``(B, T, S)``: each target position's distribution over source
            positions (rows of zeros leave a position unsupervised).

    Returns:
        A float32 scalar: the mean over real target positions, heads and blocks.
    """
    weights = attention if isinstance(attention, (list, tuple)) else [attention]
    weights = ops.stack([ops.cast(w, "float32") for w in weights], axis=1)  # (B, L, N, T, S)
    if alignment is None:
        prior = diagonal_penalty(target_padding, source_padding, sigma)  # (B, T, S)
        per_position = ops.sum(weights * prior[:, None, None], axis=-1)  # (B, L, N, T)
    else:
        log_weights = ops.log(ops.maximum(weights, 1e-9))
        alignment = ops.cast(alignment, "float32")[:, None, None]  # (B, 1, 1, T, S)
        per_position = -ops.sum(alignment * log_weights, axis=-1)  # (B, L, N, T)
    real = ops.cast(target_padding, "float32")[:, None, None, :]  # (B, 1, 1, T)
    count = ops.sum(real) * ops.cast(ops.shape(weights)[1] * ops.shape(weights)[2], "float32")
    return ops.sum(per_position * real) / ops.maximum(count, 1.0)


@keras.saving.register_keras_serializable(package="zoo")
class GuidedAttention(keras.layers.Layer):
    """Adds :func:`guided_attention_loss` to the model's loss in training; passes ``outputs``.

    The loss pulls the decoder's cross attention toward the diagonal (Tachibana et al. 2017),
    which suits monotonic tasks, or toward given alignments. Its weight is ``weight *
    decay ** step``, ``step`` being the layer's own saved counter of training steps (as in
    :class:`~zoo.layers.ScheduledSampling`), so the guidance can fade once attention has found
    its way. The layer sits on the path to the model's output (it returns ``outputs`` as they
    came, Keras mask included) so that a functional model keeps it.

    Args:
        weight: the loss's weight at step 0.
        decay: its factor per training step (1: constant).
        sigma: the width of the diagonal prior (:func:`diagonal_penalty`).

    Call arguments:
        outputs: any tensor, returned unchanged (the model's logits).
        attention: a list of ``(B, N, T, S)`` cross-attention weights.
        target_ids: ``(B, T)`` int ids of the decoder input (0 is padding).
        source_ids: ``(B, S)`` int source ids (0 is padding).
        alignment: optional ``(B, T, S)`` target-to-source alignment distributions.
        training: the loss is added, and the step advances, only when True.

    Returns:
        ``outputs``.

    Example:
        >>> guide = GuidedAttention(weight=1.0)
        >>> ids = keras.ops.ones((1, 3), "int32")
        >>> diagonal = keras.ops.eye(3)[None, None]  # (B, N, T, S)
        >>> _ = guide(ids, [diagonal], ids, ids, training=True)
        >>> [round(float(loss), 3) for loss in guide.losses]  # on the diagonal: no loss
        [0.0]

    References:
        Tachibana et al. 2017, "Efficiently Trainable Text-to-Speech System Based on Deep
        Convolutional Networks with Guided Attention"; Garg et al. 2019, "Jointly Learning to
        Align and Translate with Transformer Models".
    """

    def __init__(self, weight=1.0, decay=1.0, sigma=0.2, **kwargs):
        super().__init__(**kwargs)
        if weight < 0 or not 0 < decay <= 1 or sigma <= 0:
            raise ValueError(
                f"GuidedAttention needs weight >= 0, 0 < decay <= 1 and sigma > 0; got "
                f"weight={weight!r}, decay={decay!r}, sigma={sigma!r}."
            )
        self.weight = weight
        self.decay = decay
        self.sigma = sigma
        self.supports_masking = True

    def build(self, *shapes, **kwargs):
        self.step = self.add_weight(
            shape=(), initializer="zeros", dtype="float32", trainable=False, autocast=False,
            aggregation="only_first_replica", name="step",
        )  # fmt: skip
        self.built = True

    def current_weight(self):
        """The loss weight at the current step."""
        return self.weight * ops.power(self.decay, ops.convert_to_tensor(self.step))

    def call(self, outputs, attention, target_ids, source_ids, alignment=None, training=None):
        if training:
            loss = guided_attention_loss(
                attention,
                ops.not_equal(target_ids, 0),
                ops.not_equal(source_ids, 0),
                self.sigma,
                alignment,
            )
            self.add_loss(self.current_weight() * loss)
            self.step.assign_add(1.0)
        return outputs

    def compute_output_spec(self, outputs, *args, **kwargs):
        return keras.KerasTensor(outputs.shape, outputs.dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "weight": self.weight,
            "decay": self.decay,
            "sigma": self.sigma,
        }
