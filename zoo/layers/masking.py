"""The one mask contract of zoo, written once.

Every mask in zoo is boolean and ``True`` means "may attend":

- ``padding_mask``: shape ``(B, S)``. Marks the real (non-padding) key positions. In
  self-attention ``S == T``, so it is also the ``(B, T)`` mask of the sequence itself.
- ``attention_mask``: shape ``(B, T, S)``. An arbitrary query-by-key pattern.
- ``use_causal_mask``: a flag. Query ``t`` may attend key ``s`` only when ``s <= t``
  (shifted by the cache index during incremental decoding).
- Keras implicit masks (``mask_zero=True`` embeddings, ``Masking``) are honoured: a mask on
  the query marks real query rows, a mask on the value/key marks real keys.

All of them are combined by :func:`combine_masks` into one ``(B, T, S)`` boolean tensor, or
``None`` when nothing is masked, which lets the attention skip the masking work.
"""

from dataclasses import dataclass

from keras import ops

# Keras keeps implicit masks on the tensor where it can and, under JAX tracing (where tensors
# take no attributes), in a side table; only its own getter reads both. It is not public API.
from keras.src.backend.common.masking import get_keras_mask


def implicit_mask(x):
    """The Keras implicit mask that travels with ``x`` (``mask_zero=True``), or None."""
    return None if x is None else get_keras_mask(x)


def causal_mask(query_length, key_length, query_offset=0):
    """A ``(T, S)`` boolean mask where query ``t`` sees keys ``s <= t + query_offset``.

    ``query_offset`` is the position of the first query: the cache index when decoding
    incrementally, so that a single new query at step ``i`` sees keys ``0..i``.
    """
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32") + query_offset, 1)
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    return ops.greater_equal(rows, cols)


def combine_masks(
    query_length,
    key_length,
    padding_mask=None,
    attention_mask=None,
    query_mask=None,
    use_causal_mask=False,
    query_offset=0,
):
    """Combine every mask of the contract into one ``(B, T, S)`` (or ``(1, T, S)``) mask.

    Args:
        query_length: T, the number of queries.
        key_length: S, the number of keys.
        padding_mask: ``(B, S)`` boolean, True for real keys.
        attention_mask: ``(B, T, S)`` boolean, True where query t may attend key s.
        query_mask: ``(B, T)`` boolean, True for real queries (a Keras implicit mask).
            Padded query rows attend to nothing real; their outputs are meaningless and
            must be ignored downstream, as in ``keras.layers.MultiHeadAttention``.
        use_causal_mask: whether to add the causal mask.
        query_offset: position of the first query, for causal masking with a KV cache.

    Returns:
        A boolean tensor broadcastable to ``(B, T, S)``, or None when nothing is masked.
    """
    mask = None

    def _and(a, b):
        return b if a is None else ops.logical_and(a, b)

    if padding_mask is not None:
        mask = _and(mask, ops.expand_dims(ops.cast(padding_mask, "bool"), 1))  # (B, 1, S)
    if query_mask is not None:
        mask = _and(mask, ops.expand_dims(ops.cast(query_mask, "bool"), 2))  # (B, T, 1)
    if attention_mask is not None:
        mask = _and(mask, ops.cast(attention_mask, "bool"))  # (B, T, S)
    if use_causal_mask:
        causal = causal_mask(query_length, key_length, query_offset)
        mask = _and(mask, ops.expand_dims(causal, 0))  # (1, T, S)
    return mask


@dataclass(frozen=True)
class AttentionMasks:
    """Every mask of one attention call, not yet combined.

    Full attention combines them into a ``(B, T, S)`` tensor (:meth:`combined`). An efficient
    variant that must stay below O(T * S) memory reads the parts instead (a ``(B, S)`` padding
    mask, the causal flag) and raises an error for a part it cannot honour, such as an arbitrary
    ``attention`` mask; it never ignores one.

    Attributes:
        padding: ``(B, S)`` boolean or None, True for real keys.
        attention: ``(B, T, S)`` boolean or None.
        query: ``(B, T)`` boolean or None, True for real queries.
        causal: whether query ``t`` may only see keys ``s <= t + query_offset``.
        query_offset: the position of the first query (the cache index when decoding).
    """

    padding: object = None
    attention: object = None
    query: object = None
    causal: bool = False
    query_offset: object = 0

    def combined(self, query_length, key_length):
        """The ``(B, T, S)`` mask of :func:`combine_masks`, or None when nothing is masked."""
        return combine_masks(
            query_length,
            key_length,
            padding_mask=self.padding,
            attention_mask=self.attention,
            query_mask=self.query,
            use_causal_mask=self.causal,
            query_offset=self.query_offset,
        )


def mask_value(dtype):
    """A large negative score for masked positions that is finite in ``dtype``.

    Finite (not -inf) so that a fully masked row gives a uniform softmax instead of NaN,
    matching ``keras.layers.MultiHeadAttention``.
    """
    if str(dtype) == "float16":
        return -6.0e4
    return -1.0e9
