"""The length predictor of a non-autoregressive decoder: the target length from the encoder."""

import keras
from keras import ops

from zoo.layers.masking import implicit_mask

__all__ = ["LENGTH_MODES", "LengthPredictor"]

LENGTH_MODES = ("predict", "max")


@keras.saving.register_keras_serializable(package="zoo")
class LengthPredictor(keras.layers.Layer):
    """Scores every offset ``target_length - source_length`` from the mean encoder state.

    A non-autoregressive decoder must know the length before it starts. The layer averages the
    encoder states over the real source tokens and classifies the offset of the target length
    from the source length into ``2 * max_offset + 1`` classes (class ``k`` is offset
    ``k - max_offset``; offsets beyond count as the ends, :meth:`offset_class`): most of the
    length is the source's, so an offset is easier to learn.

    Args:
        max_offset: K, the largest offset in either direction.
        length_mode: how the model's decoder chooses the target length, kept here so that a
            saved model decodes as it was trained: ``"predict"``, the best offsets of these
            scores; ``"max"``, the widest length they reach, ``min(source + K, max_length)``,
            the sentence ending at its first EOS (the scores are then an auxiliary output).
            The layer computes the same scores either way.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        encoder_output: ``(B, S, D)`` encoder states.
        padding_mask: optional ``(B, S)`` boolean, True on real source tokens. Without it the
            Keras implicit mask of ``encoder_output`` is used, and without that every position.

    Returns:
        ``(B, 2 * max_offset + 1)`` scores (logits) over the offsets.

    Example:
        >>> layer = LengthPredictor(max_offset=4)
        >>> states = keras.ops.ones((2, 5, 8))
        >>> tuple(layer(states).shape)
        (2, 9)
        >>> keras.ops.convert_to_numpy(LengthPredictor.offset_class([7, 1], [5, 9], 4)).tolist()
        [6, 0]

    References:
        Gu et al. 2018, "Non-Autoregressive Neural Machine Translation" (fertility; length from
        the encoder); Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of
        Conditional Masked Language Models", section 3 (the length from the mean encoder state).
    """

    def __init__(self, max_offset, length_mode="predict", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_offset, int) or max_offset < 0:
            raise ValueError(f"max_offset must be an int >= 0, got {max_offset!r}.")
        if length_mode not in LENGTH_MODES:
            raise ValueError(
                f"Unknown length_mode {length_mode!r}; expected one of {LENGTH_MODES}."
            )
        self.max_offset = max_offset
        self.length_mode = length_mode
        self.projection = keras.layers.Dense(
            2 * max_offset + 1, dtype=self.dtype_policy, name="projection"
        )

    def build(self, input_shape):
        self.projection.build((None, input_shape[-1]))
        self.built = True

    def call(self, encoder_output, padding_mask=None):
        if padding_mask is None:
            padding_mask = implicit_mask(encoder_output)
        if padding_mask is None:
            mean = ops.mean(encoder_output, axis=1)  # (B, D)
        else:
            weights = ops.expand_dims(ops.cast(padding_mask, encoder_output.dtype), -1)  # (B, S, 1)
            total = ops.sum(encoder_output * weights, axis=1)  # (B, D)
            count = ops.maximum(ops.sum(weights, axis=1), 1.0)  # (B, 1): an empty source is 0
            mean = total / count
        return self.projection(mean)  # (B, 2K + 1)

    def compute_mask(self, encoder_output, previous_mask=None):
        return None  # one score vector per sentence

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2 * self.max_offset + 1)

    @staticmethod
    def offset_class(target_lengths, source_lengths, max_offset):
        """The class of each offset: ``clip(target - source, -K, K) + K``, int32 ``(B,)``."""
        offsets = ops.cast(target_lengths, "int32") - ops.cast(source_lengths, "int32")
        return ops.clip(offsets, -max_offset, max_offset) + max_offset

    def get_config(self):
        config = super().get_config()
        config.update({"max_offset": self.max_offset, "length_mode": self.length_mode})
        return config
