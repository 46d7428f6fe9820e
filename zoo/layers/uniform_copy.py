"""The uniform copy of the source to the target positions: a non-autoregressive decoder's input."""

import keras
from keras import ops

from zoo.layers.masking import implicit_mask

__all__ = ["UniformCopy", "uniform_positions"]


def uniform_positions(target_positions, source_lengths, target_lengths):
    """``round(j * (S - 1) / (T - 1))`` for each ``j`` of ``target_positions``, exactly.

    The rounding is done in integers, half to even (as NumPy's and PyTorch's ``round``), so
    no float error moves a tie. ``T = 1`` maps to 0.

    Args:
        target_positions: ``(B, T')`` int positions ``j``, in ``[0, T - 1]``.
        source_lengths: ``(B, 1)`` int S, at least 1.
        target_lengths: ``(B, 1)`` int T, at least 1.

    Returns:
        ``(B, T')`` int32 source positions in ``[0, S - 1]``.

    Example:
        >>> ops.convert_to_numpy(uniform_positions([[0, 1, 2, 3, 4]], [[3]], [[5]])).tolist()
        [[0, 0, 1, 2, 2]]
    """
    numerator = ops.cast(target_positions, "int32") * (ops.cast(source_lengths, "int32") - 1)
    denominator = ops.maximum(ops.cast(target_lengths, "int32") - 1, 1)
    quotient = ops.floor_divide(numerator, denominator)
    twice_remainder = 2 * (numerator - quotient * denominator)
    odd = ops.equal(ops.mod(quotient, 2), 1)
    round_up = ops.logical_or(
        twice_remainder > denominator,
        ops.logical_and(ops.equal(twice_remainder, denominator), odd),
    )
    return quotient + ops.cast(round_up, "int32")


@keras.saving.register_keras_serializable(package="zoo")
class UniformCopy(keras.layers.Layer):
    """Copies the source's embeddings to the target's positions, spread uniformly.

    Target position ``j`` of ``T`` real positions takes the source vector at position
    ``round(j * (S - 1) / (T - 1))`` of the ``S`` real source positions (:func:`uniform_positions`;
    ``T = 1`` takes position 0): the decoder input of a non-autoregressive translator that
    reads no target tokens, only the target length. The real positions are counted in order,
    so any padding pattern works; padded source positions are never read, padded target
    positions are zeros, and a source without real positions gives zeros.

    Args:
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        source: ``(B, S, D)`` source vectors (in a NAT, the scaled source token embeddings).
        target_padding_mask: ``(B, T)`` boolean, True at the real target positions.
        padding_mask: optional ``(B, S)`` boolean, True at the real source positions. Without
            it the Keras implicit mask of ``source`` is used, and without that every position.

    Returns:
        ``(B, T, D)`` vectors, in the dtype of ``source``; no implicit mask (the target's
        padding is ``target_padding_mask``, which the caller has).

    Example:
        >>> source = keras.ops.reshape(keras.ops.arange(1.0, 7.0), (1, 3, 2))
        >>> copied = UniformCopy()(source, keras.ops.convert_to_tensor([[True] * 5 + [False]]))
        >>> keras.ops.convert_to_numpy(copied[0, :, 0]).tolist()
        [1.0, 1.0, 3.0, 5.0, 5.0, 0.0]

    References:
        Gu et al. 2018, "Non-Autoregressive Neural Machine Translation", section 3.1 (uniform
        copy); fairseq's ``nonautoregressive_transformer.py`` (``_uniform_assignment``).
    """

    def call(self, source, target_padding_mask, padding_mask=None):
        if padding_mask is None:
            padding_mask = implicit_mask(source)
        if padding_mask is None:
            padding_mask = ops.ones(ops.shape(source)[:2], "bool")
        source_real = ops.cast(padding_mask, "int32")  # (B, S)
        target_real = ops.cast(target_padding_mask, "int32")  # (B, T)
        source_lengths = ops.sum(source_real, axis=1, keepdims=True)  # (B, 1)
        target_lengths = ops.sum(target_real, axis=1, keepdims=True)
        # j: each real target position's rank among the real ones.
        j = ops.maximum(ops.cumsum(target_real, axis=1) - 1, 0)  # (B, T)
        i = uniform_positions(j, ops.maximum(source_lengths, 1), ops.maximum(target_lengths, 1))
        # The i-th real source token sits after exactly the positions with at most i real
        # tokens up to and including them.
        seen = ops.cumsum(source_real, axis=1)  # (B, S)
        at_most_i = ops.expand_dims(seen, 1) <= ops.expand_dims(i, 2)  # (B, T, S)
        position = ops.sum(ops.cast(at_most_i, "int32"), axis=2)  # (B, T)
        # Beyond the last position only when there is no real source token: zeroed below.
        position = ops.minimum(position, ops.shape(source)[1] - 1)
        copied = ops.take_along_axis(source, ops.expand_dims(position, 2), axis=1)  # (B, T, D)
        keep = ops.logical_and(ops.cast(target_real, "bool"), source_lengths > 0)  # (B, T)
        return ops.where(ops.expand_dims(keep, 2), copied, ops.zeros_like(copied))

    def compute_mask(self, source, previous_mask=None):
        return None  # the target's padding is the caller's target_padding_mask

