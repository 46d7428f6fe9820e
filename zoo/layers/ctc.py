"""The two layers around a CTC decoder: the source upsampled to the decoder's positions, and
the blank forced at the positions past a sentence's end."""

import keras
from keras import ops

__all__ = ["CTCBlankPadding", "SourceUpsampling"]


@keras.saving.register_keras_serializable(package="zoo")
class SourceUpsampling(keras.layers.Layer):
    """Each source id repeated ``factor`` times: the input of a CTC decoder, ``factor * S``
    positions for a target of up to that many tokens and blanks.

    Position ``p`` reads source token ``p // factor``, so the decoder's input moves through the
    source left to right, as a CTC alignment does; a source of ``n`` real tokens (padding at
    the end) gives ``factor * n`` real positions.

    Args:
        factor: the upsampling ratio (2 or 3 in the CTC NATs of Gu & Kong 2021).
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        source_ids: ``(B, S)`` int ids, 0-padded at the end.

    Returns:
        ``(B, factor * S)`` int32 ids.

    Example:
        >>> ops.convert_to_numpy(SourceUpsampling(2)(ops.convert_to_tensor([[5, 6, 0]]))).tolist()
        [[5, 5, 6, 6, 0, 0]]

    References:
        Libovický & Helcl 2018, "End-to-End Non-Autoregressive Neural Machine Translation with
        Connectionist Temporal Classification"; Gu & Kong 2021, "Fully Non-autoregressive
        Neural Machine Translation: Tricks of the Trade".
    """

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise ValueError(f"factor must be a positive int, got {factor!r}.")
        self.factor = factor

    def call(self, source_ids):
        return ops.repeat(ops.cast(source_ids, "int32"), self.factor, axis=1)  # (B, kS)

    def compute_output_shape(self, input_shape):
        width = input_shape[1]
        return (input_shape[0], None if width is None else self.factor * width)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="zoo")
class CTCBlankPadding(keras.layers.Layer):
    """Logits whose padded positions emit the blank with probability 1.

    A CTC path must then pass through the blank there, at no cost: the CTC loss over the
    whole padded width equals the loss over each sentence's real positions, and greedy decoding
    drops those positions. The output carries no Keras mask (a CTC loss is one per sentence).

    Args:
        blank_id: the id of the blank.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        logits: ``(B, L, V)``.
        ids: ``(B, L)`` the decoder's input ids, 0 at padding.

    Returns:
        ``(B, L, V)`` logits, float32 at padding as elsewhere.
    """

    def __init__(self, blank_id, **kwargs):
        super().__init__(**kwargs)
        self.blank_id = blank_id
        self.supports_masking = True

    def call(self, logits, ids):
        blank = ops.one_hot(self.blank_id, ops.shape(logits)[-1], dtype=logits.dtype)  # (V,)
        # 0 for the blank, far below for the rest: log-softmax gives the blank log 1 = 0.
        blank_logits = (blank - 1.0) * 1e4
        real = ops.not_equal(ops.cast(ids, "int32"), 0)[..., None]  # (B, L, 1)
        return ops.where(real, logits, ops.cast(blank_logits, logits.dtype))

    def compute_mask(self, logits, ids=None, mask=None):
        return None

    def compute_output_shape(self, logits_shape, ids_shape=None):
        return logits_shape

    def get_config(self):
        return {**super().get_config(), "blank_id": self.blank_id}
