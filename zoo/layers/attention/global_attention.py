"""Global + local attention: a few global tokens see and are seen by all (Longformer, BigBird)."""

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


def _causal(query_length, key_length):
    """``(T', K)`` boolean: query ``i`` may see key ``j <= i`` (both counted from 0)."""
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32"), 1)
    return ops.greater_equal(rows, ops.expand_dims(ops.arange(key_length, dtype="int32"), 0))


def global_key_part(q, k, v, key_valid, num_global, causal, **attend_kwargs):
    """Every query attends the ``num_global`` first keys: scores ``(B, N, T, G)``.

    Args:
        q: ``(B, T, N, H)``.
        k: ``(B, T, N, H)``.
        v: ``(B, T, N, Hv)``.
        key_valid: ``(B, T)`` boolean, True for keys that may be attended at all.
        num_global: G, the number of global positions at the start of the sequence.
        causal: attend only keys ``j <= i``.
        **attend_kwargs: ``score_fn``, ``dropout``, ``training``, ``seed`` of
            :func:`zoo.layers.attention.local.softmax_part`.

    Returns:
        ``(out (B, T, N, Hv), lse (B, T, N))``, float32.
    """
    valid = key_valid[:, :num_global]  # (B, G)
    mask = valid[:, None, None, :]  # (B, 1, 1, G)
    if causal:
        causal_mask = _causal(ops.shape(q)[1], ops.shape(valid)[1])  # (T, G)
        mask = ops.logical_and(mask, causal_mask[None, None])
    return softmax_part(q, k[:, :num_global], v[:, :num_global], mask, **attend_kwargs)


def global_query_rows(q, k, v, key_valid, num_global, **attend_kwargs):
    """The ``num_global`` first queries attend every key: scores ``(B, N, G, T)``.

    Returns:
        ``(B, G, N, Hv)`` float32.
    """
    mask = key_valid[:, None, None, :]  # (B, 1, 1, T)
    out, _ = softmax_part(q[:, :num_global], k, v, mask, **attend_kwargs)
    return out


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("global")
class GlobalAttention(BlockedAttention):
    """Local window attention plus global tokens that attend to, and are attended by, all.

    The first ``num_global`` positions are global (Longformer's task tokens, BigBird-ITC). Query
    ``i`` attends key ``j`` when ``i < num_global``, ``j < num_global``, or ``|i - j| <= window``.
    The window runs by blocks (``3 window`` keys per query) joined by the global keys in one
    softmax, the global queries as a ``(G, S)`` product: O(T (window + G)), no T x S tensor.
    The global tokens are positions, not extra learned tokens, because the layer returns exactly
    T rows; to learn one, prepend it (e.g. a CLS embedding) and set ``num_global=1``.

    Masks: a padding mask (or a Keras implicit mask); a padded global position is neither seen
    nor a source. ``use_causal_mask`` keeps ``j <= i`` everywhere. An ``attention_mask``,
    ``return_attention_scores``, cross attention with ``T != S`` and a KV cache raise
    ``ValueError``. Attention dropout applies to the weights.

    Args:
        window: w >= 0, how many keys each side a non-global query sees.
        num_global: G >= 1, the number of global positions at the start of the sequence.
        *args, **kwargs: as ``MultiHeadAttention``.

    Call arguments:
        As ``MultiHeadAttention``; see above for the masks it takes.

    Returns:
        ``(B, T, output_dim)``, as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 10, 16))
        >>> attention = GlobalAttention(num_heads=2, key_dim=8, window=2, num_global=1)
        >>> tuple(attention(x).shape)
        (2, 10, 16)

    References:
        Beltagy et al. 2020, "Longformer: The Long-Document Transformer", section 3.1
        (sliding window plus global attention).
        Zaheer et al. 2020, "Big Bird: Transformers for Longer Sequences", section 2
        (global tokens, BigBird-ITC).
    """

    def __init__(self, *args, window=64, num_global=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.window = _check_size("window", window, 0)
        self.num_global = _check_size("num_global", num_global, 1)

    def _block_size(self, length):
        return block_size_for(self.window, length)

    def _attend_blocked(self, q, k, v, key_valid, causal, block_size, training):
        attend = self._attend_kwargs(training)
        g = self.num_global
        # The windows leave the global keys out (they are attended on their own: in the loop,
        # or by global_key_part), so that each key is counted once.
        not_global = ops.arange(ops.shape(key_valid)[1], dtype="int32") >= g  # (T,)
        local_valid = ops.logical_and(key_valid, not_global[None])  # (B, T)
        if self._recomputes(training):  # the global keys in the window's loop: one softmax
            out, _ = self._window_part(q, k, v, local_valid, self.window, block_size, causal,
                                       training, num_global=g, global_valid=key_valid[:, :g])
        else:
            local = self._window_part(q, k, v, local_valid, self.window, block_size, causal,
                                      training)  # fmt: skip
            global_keys = global_key_part(q, k, v, key_valid, g, causal, **attend)
            out = merge_parts([local, global_keys])  # (B, T, N, Hv)
        if causal:
            # A global query then sees only the keys j <= i < G: already the merged row.
            return out
        rows = global_query_rows(q, k, v, key_valid, g, **attend)  # (B, G, N, Hv)
        return ops.concatenate([rows, out[:, g:]], axis=1)

    def get_config(self):
        config = super().get_config()
        config.update({"window": self.window, "num_global": self.num_global})
        return config
