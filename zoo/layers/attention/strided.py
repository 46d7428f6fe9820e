"""Strided attention and the Sparse Transformer's local + strided pattern (Child et al. 2019)."""

import keras
from keras import ops

from zoo.layers.attention.local import (
    BlockedAttention,
    _check_size,
    block_size_for,
    merge_parts,
    softmax_part,
)
from zoo.layers.attention.registry import register_attention

PATTERNS = ("strided", "sparse")


def strided_part(q, k, v, key_valid, stride, causal, exclude_within=-1, **attend_kwargs):
    """The strided part: query ``i`` attends the keys ``j`` with ``(i - j) mod stride == 0``.

    Position ``p = r l + c`` (``l = stride``) is row ``r`` of column ``c``; the keys of a
    query are exactly its own column, so the sequence is regrouped column by column into
    ``l`` blocks of ``R = T / l`` positions and each block attends to itself. The scores take
    ``B N T R`` floats: each query's ``T / l`` keys, never T x T.

    Args:
        q: ``(B, T, N, H)``; ``T`` a multiple of ``stride``.
        k: ``(B, T, N, H)``.
        v: ``(B, T, N, Hv)``.
        key_valid: ``(B, T)`` boolean, True for keys that may be attended at all.
        stride: l.
        causal: attend only keys ``j <= i``.
        exclude_within: leave out the keys with ``|i - j| <= exclude_within`` (those that
            another part, the local window, already covers); -1 leaves out none.
        **attend_kwargs: ``score_fn``, ``dropout``, ``training``, ``seed`` of
            :func:`zoo.layers.attention.local.softmax_part`.

    Returns:
        ``(out (B, T, N, Hv), lse (B, T, N))``, float32.
    """
    batch, length = ops.shape(q)[0], ops.shape(q)[1]
    rows = length // stride

    def columns(x):  # (B, T, ...) -> (B * l, R, ...): column c holds positions c, c + l, ...
        rest = tuple(x.shape[2:])
        x = ops.reshape(x, (batch, rows, stride) + rest)  # (B, R, l, ...)
        x = ops.transpose(x, (0, 2, 1) + tuple(range(3, 3 + len(rest))))  # (B, l, R, ...)
        return ops.reshape(x, (-1, rows) + rest)

    def positions(x):  # (B * l, R, ...) -> (B, T, ...): the inverse of columns()
        rest = tuple(x.shape[2:])
        x = ops.reshape(x, (batch, stride, rows) + rest)  # (B, l, R, ...)
        x = ops.transpose(x, (0, 2, 1) + tuple(range(3, 3 + len(rest))))  # (B, R, l, ...)
        return ops.reshape(x, (batch, length) + rest)

    row = ops.arange(rows, dtype="int32")
    distance = ops.expand_dims(row, 1) - ops.expand_dims(row, 0)  # (R, R): (i - j) / l
    allowed = ops.greater(ops.abs(distance) * stride, exclude_within)
    if causal:
        allowed = ops.logical_and(allowed, ops.greater_equal(distance, 0))
    mask = ops.logical_and(allowed[None, None], columns(key_valid)[:, None, None, :])
    out, lse = softmax_part(columns(q), columns(k), columns(v), mask, **attend_kwargs)
    return positions(out), positions(lse)  # (B, T, N, Hv), (B, T, N)


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("strided")
class StridedAttention(BlockedAttention):
    """Strided attention, alone or combined with a local window as in the Sparse Transformer.

    With ``l = stride``, query ``i`` attends key ``j`` when ``(i - j) mod l == 0``
    (``pattern="strided"``, the paper's ``A^(2)``; ``stride=1`` is full attention), or also when
    ``|i - j| <= l`` (``pattern="sparse"``, the "merged head": every position reaches every
    other in two steps). ``use_causal_mask`` adds ``j <= i``. The strided keys are gathered
    column by column and the window by blocks of ``l``: O(T (l + T / l)), no T x S tensor; a
    length not a multiple of ``l`` is padded internally and masked.

    Masks: a padding mask (or a Keras implicit mask) and ``use_causal_mask``. An
    ``attention_mask``, ``return_attention_scores``, cross attention with ``T != S`` and a KV
    cache raise ``ValueError``. Attention dropout applies to the weights.

    Args:
        stride: l >= 1, the stride (and, for ``"sparse"``, the window each side).
        pattern: ``"strided"`` or ``"sparse"``.
        *args, **kwargs: as ``MultiHeadAttention``.

    Call arguments:
        As ``MultiHeadAttention``; see above for the masks it takes.

    Returns:
        ``(B, T, output_dim)``, as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 10, 16))
        >>> attention = StridedAttention(num_heads=2, key_dim=8, stride=3, pattern="sparse")
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 10, 16)

    References:
        Child et al. 2019, "Generating Long Sequences with Sparse Transformers", section 4.2
        (strided attention) and 4.3 (merged heads).
    """

    def __init__(self, *args, stride=8, pattern="strided", **kwargs):
        super().__init__(*args, **kwargs)
        if pattern not in PATTERNS:
            raise ValueError(f"Unknown strided pattern {pattern!r}; expected one of {PATTERNS}.")
        self.stride = _check_size("stride", stride, 1)
        self.pattern = pattern

    def _block_size(self, length):
        # A sequence no longer than the stride is one block: its only strided key is the
        # query itself, as it would be with the full stride.
        return block_size_for(self.stride, length)

    def _attend_blocked(self, q, k, v, key_valid, causal, block_size, training):
        attend = self._attend_kwargs(training)
        if self.pattern == "strided":
            return strided_part(q, k, v, key_valid, block_size, causal, **attend)[0]
        local = self._window_part(q, k, v, key_valid, self.stride, block_size, causal, training)
        strided = strided_part(
            q, k, v, key_valid, block_size, causal, exclude_within=self.stride, **attend
        )
        return merge_parts([local, strided])

    def get_config(self):
        config = super().get_config()
        config.update({"stride": self.stride, "pattern": self.pattern})
        return config
