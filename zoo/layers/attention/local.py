"""Local (sliding-window) attention, and the blocked computation that the sparse variants share.

Each sparse variant (local, strided, global) is a union of disjoint *parts*, each a set of keys
per query gathered without any T x S tensor; each part gives a softmax over its keys and the log
of its normaliser, and :func:`merge_parts` joins them as blocked (flash) attention merges key
blocks. The window part runs as a loop that recomputes its weights in the backward pass
(:func:`recomputed_window_part`) unless dropout or the additive score needs them whole.
"""

import keras
import numpy as np
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.recomputed import (
    STEP_QUERIES,
    blocks_per_step,
    looped_attention,
    scaled_for_dot_products,
    step_slices,
)
from zoo.layers.attention.scaled_dot_product import attention_scores
from zoo.layers.dropout import dropout as random_dropout  # `dropout` is an argument here
from zoo.layers.masking import mask_value


# ---------------------------------------------------------------------- the shared helpers
def pad_to_multiple(x, multiple, value=0):
    """Pad axis 1 of ``x`` at the end with ``value`` up to a multiple of ``multiple``.

    Works for a length known only at run time (``None`` in the static shape).
    """
    pad = (-ops.shape(x)[1]) % multiple
    widths = [[0, 0], [0, pad]] + [[0, 0]] * (len(x.shape) - 2)
    return ops.pad(x, widths, constant_values=value)


def softmax_part(q, k, v, mask, score_fn, dropout=0.0, training=None, seed=None):
    """Softmax attention of ``q`` over the keys that ``mask`` allows, with its log-normaliser.

    Args:
        q: ``(B', T', N, H)`` queries.
        k: ``(B', K, N, H)`` keys.
        v: ``(B', K, N, Hv)`` values.
        mask: boolean, broadcastable to ``(B', N, T', K)``; True where a query may attend.
        score_fn: ``score_fn(q, k) -> (B', N, T', K)`` unnormalised scores.
        dropout: dropout rate on the weights (only when ``training``).
        training: whether dropout is active.
        seed: a ``keras.random.SeedGenerator`` for the dropout.

    Returns:
        ``out`` ``(B', T', N, Hv)`` and ``lse`` ``(B', T', N)``, both float32: the attended
        values and ``log sum_k exp(score)`` over the allowed keys (about ``-1e9`` when a row
        has none). Dropping weights here and then merging is the same as dropping the
        weights of the merged softmax, since dropout is elementwise.
    """
    scores = ops.cast(score_fn(q, k), "float32")  # (B', N, T', K)
    scores = ops.where(mask, scores, mask_value("float32"))
    lse = ops.logsumexp(scores, axis=-1, keepdims=True)  # (B', N, T', 1)
    weights = ops.exp(scores - lse)
    if dropout and training:
        weights = random_dropout(weights, dropout, seed=seed)
    out = ops.einsum("bnts,bsnh->btnh", ops.cast(weights, v.dtype), v)  # (B', T', N, Hv)
    return ops.cast(out, "float32"), ops.transpose(lse[..., 0], (0, 2, 1))


def merge_parts(parts):
    """The softmax over the union of disjoint key sets, from each set's ``(out, lse)``.

    With ``L = log sum_p exp(lse_p)``, the merged output is ``sum_p exp(lse_p - L) out_p``:
    each part's weights rescaled to the common normaliser.

    Args:
        parts: a list of ``(out (B, T, N, Hv), lse (B, T, N))`` pairs, float32.

    Returns:
        ``(B, T, N, Hv)`` float32.
    """
    if len(parts) == 1:
        return parts[0][0]
    total = ops.logsumexp(ops.stack([lse for _, lse in parts], axis=0), axis=0)  # (B, T, N)
    merged = 0.0
    for out, lse in parts:
        merged = merged + out * ops.expand_dims(ops.exp(lse - total), -1)
    return merged


def _neighbour_blocks(x, block_size, count):
    """``(B, T, ...)`` -> ``(B * T/b, count * b, ...)``: for each block of ``b`` positions, the
    ``count`` blocks starting one block before it (2: previous and own; 3: and next).

    ``T`` must be a multiple of ``b``; positions outside the sequence are zero (False).
    """
    b = block_size
    widths = [[0, 0], [b, b]] + [[0, 0]] * (len(x.shape) - 2)
    padded = ops.pad(x, widths)  # (B, T + 2b, ...)
    rest = tuple(x.shape[2:])
    blocks = ops.reshape(padded, (ops.shape(x)[0], ops.shape(x)[1] // b + 2, b) + rest)
    views = [blocks[:, :-2], blocks[:, 1:-1], blocks[:, 2:]][:count]  # each (B, T/b, b, ...)
    return ops.reshape(ops.concatenate(views, axis=2), (-1, count * b) + rest)


def local_window_pattern(block_size, window, causal):
    """The static ``(b, K)`` pattern of one query block over its neighbour keys.

    Query ``a`` of block ``c`` is position ``i = c b + a``; key slot ``m`` is position
    ``j = (c - 1) b + m``, so ``i - j = a + b - m``. Allowed: ``|i - j| <= window``, or
    ``0 <= i - j <= window`` when ``causal``.
    """
    count = 2 if causal else 3
    distance = np.arange(block_size)[:, None] + block_size - np.arange(count * block_size)[None]
    if causal:
        return (distance >= 0) & (distance <= window)
    return np.abs(distance) <= window


def local_window_part(q, k, v, key_valid, window, block_size, causal, **attend_kwargs):
    """The sliding-window part: each query attends the keys at most ``window`` away.

    The sequence is cut into blocks of ``b = block_size`` positions; each query block
    attends only its own block and its neighbours (the previous one, and the next one when
    not causal), ``3b`` keys, so the scores take ``B N T 3b`` floats: O(T w), never T x T.

    Args:
        q: ``(B, T, N, H)``; ``T`` a multiple of ``block_size``.
        k: ``(B, T, N, H)``.
        v: ``(B, T, N, Hv)``.
        key_valid: ``(B, T)`` boolean, True for keys that may be attended at all.
        window: w, the largest distance ``|i - j|`` attended.
        block_size: b; at least ``window``, or the whole (padded) sequence.
        causal: attend only keys ``j <= i``.
        **attend_kwargs: ``score_fn``, ``dropout``, ``training``, ``seed`` of
            :func:`softmax_part`.

    Returns:
        ``(out (B, T, N, Hv), lse (B, T, N))``, float32.
    """
    b, count = block_size, 2 if causal else 3
    batch, length = ops.shape(q)[0], ops.shape(q)[1]
    n, h = q.shape[2], q.shape[3]
    pattern = ops.convert_to_tensor(local_window_pattern(b, window, causal))  # (b, K)
    valid = _neighbour_blocks(key_valid, b, count)  # (B * T/b, K)
    mask = ops.logical_and(pattern[None, None], valid[:, None, None, :])  # (B T/b, 1, b, K)
    out, lse = softmax_part(
        ops.reshape(q, (-1, b, n, h)),  # (B T/b, b, N, H)
        _neighbour_blocks(k, b, count),  # (B T/b, K, N, H)
        _neighbour_blocks(v, b, count),  # (B T/b, K, N, Hv)
        mask,
        **attend_kwargs,
    )
    return (
        ops.reshape(out, (batch, length, n, v.shape[3])),  # (B, T, N, Hv)
        ops.reshape(lse, (batch, length, n)),  # (B, T, N)
    )


def recomputed_window_part(q, k, v, key_valid, window, block_size, causal, score="scaled_dot",
                           scale=None, step_queries=STEP_QUERIES, num_global=0, global_valid=None):
    """:func:`local_window_part` in O(T) training memory: a loop over steps of query blocks
    (:func:`~zoo.layers.attention.recomputed.looped_attention`), whose weights the backward
    pass recomputes instead of keeping them.

    Each step takes ``g`` query blocks and the ``g + 2`` key blocks around them, so the
    ``(B, N, T, 3b)`` scores are never whole, forward or backward. No attention dropout, and a
    dot-product score (:meth:`BlockedAttention._window_part` takes :func:`local_window_part`
    otherwise). Equal to it in values and gradients, ``lse`` included, for every query with a
    key in its window.

    Args:
        q, k, v, key_valid, window, block_size, causal: as :func:`local_window_part`.
        score: ``"scaled_dot"``, ``"dot"`` or ``"cosine"``.
        scale: as :func:`~zoo.layers.attention.chunked_attention`'s.
        step_queries: queries per step (rounded down to whole blocks, at least one).
        num_global, global_valid: ``G`` (an int) and a ``(B, G)`` boolean: every query also
            attends the ``G`` first keys where True (and, under ``causal``, at or before it),
            in the same softmax as its window: global attention's global keys, in the loop,
            not a part merged after it. ``key_valid`` should then leave them out of the
            windows, so that each key counts once.

    Returns:
        ``(out (B, T, N, Hv), lse (B, T, N))``, float32.
    """
    q, k, v = scaled_for_dot_products(q, k, v, score, scale)
    global_k, global_v = k[:, :num_global], v[:, :num_global]  # (B, G, N, H)
    b, count = block_size, 2 if causal else 3
    g = blocks_per_step(b, None if q.shape[1] is None else -(-q.shape[1] // b), step_queries)
    length = ops.shape(q)[1]
    q, k, v = (pad_to_multiple(x, g * b) for x in (q, k, v))  # whole steps
    key_valid = pad_to_multiple(ops.cast(key_valid, "bool"), g * b, value=False)
    # One block of padding at each end: the window of query block c starts at key block c.
    k, v = (ops.pad(x, [[0, 0], [b, b], [0, 0], [0, 0]]) for x in (k, v))
    key_valid = ops.pad(key_valid, [[0, 0], [b, b]], constant_values=False)
    steps = ops.shape(q)[1] // (g * b)
    batch, n = ops.shape(q)[0], q.shape[2]
    pattern = ops.convert_to_tensor(local_window_pattern(b, window, causal))  # (b, K)
    q, k, v, global_k, global_v = (
        ops.transpose(x, (0, 2, 1, 3)) for x in (q, k, v, global_k, global_v)
    )  # head-major (B, N, T, H)

    def neighbours(piece):  # (..., g + 2, b, ...) -> (..., g, count b, ...)
        return ops.concatenate([piece[:, :, j:j + g] for j in range(count)], axis=3)

    def take_window(x, s):  # (B, N, g, K, H): each query block's neighbour keys
        piece = ops.slice(x, [0, 0, s * g * b, 0], [batch, n, (g + 2) * b, x.shape[3]])
        return neighbours(ops.reshape(piece, (batch, n, g + 2, b, x.shape[3])))

    def add_window(total, d, s, _=None):  # the transpose of take_window: windows overlap
        h = d.shape[4]
        piece = 0.0
        for j, part in enumerate(ops.split(d, count, axis=3)):  # each (B, N, g, b, H)
            piece = piece + ops.pad(part, [[0, 0], [0, 0], [j, 2 - j], [0, 0], [0, 0]])
        piece = ops.reshape(piece, (batch, n, (g + 2) * b, h))
        old = ops.slice(total, [0, 0, s * g * b, 0], [batch, n, (g + 2) * b, h])
        return ops.slice_update(total, [0, 0, s * g * b, 0], old + piece)

    def window_mask(s):  # (B, 1, g, b, K)
        valid = ops.slice(key_valid, [0, s * g * b], [batch, (g + 2) * b])
        valid = neighbours(ops.reshape(valid, (batch, 1, g + 2, b)))  # (B, 1, g, K)
        return ops.logical_and(pattern[None, None, None], valid[:, :, :, None, :])

    if not num_global:
        keys, mask_of = (take_window, add_window), window_mask
    else:  # the keys: (window, global), the G global keys after each block's window
        k, v = (k, global_k), (v, global_v)

        def take_keys(parts, s):
            x, x_global = parts
            shape = (batch, n, g, num_global, x.shape[3])
            return ops.concatenate(
                [take_window(x, s), ops.broadcast_to(x_global[:, :, None], shape)], axis=3)

        def add_keys(totals, d, s, _):  # every block of the step adds to the global keys
            (total, total_global), window_width = totals, count * b
            d_window, d_global = d[:, :, :, :window_width], d[:, :, :, window_width:]
            return add_window(total, d_window, s), total_global + ops.sum(d_global, axis=2)

        keys = (take_keys, add_keys)
        allowed = ops.cast(global_valid, "bool")[:, None, None, None, :]  # (B, 1, 1, 1, G)

        def mask_of(s):  # (B, 1, g, b, K + G)
            seen = allowed
            if causal:  # the global key j <= the query's position
                position = s * g * b + ops.reshape(ops.arange(g * b, dtype="int32"), (g, b))
                seen = ops.logical_and(seen, position[None, None, :, :, None]
                                       >= ops.arange(num_global, dtype="int32"))  # fmt: skip
            window = window_mask(s)
            return ops.concatenate(
                [window, ops.broadcast_to(seen, ops.shape(window)[:4] + (num_global,))], axis=-1)

    out, lse = looped_attention(q, k, v, steps, step_slices(batch, n, b, g), keys, mask_of)
    out = ops.transpose(out, (0, 2, 1, 3))[:, :length]  # (B, T, N, Hv)
    return out, ops.transpose(lse, (0, 2, 1))[:, :length]


def block_size_for(size, length):
    """The block size of a pattern of reach ``size``: ``size`` itself (at least 1), or the
    static sequence length when that is shorter (one block then holds everything)."""
    size = max(int(size), 1)
    return size if length is None else max(min(size, int(length)), 1)


def _check_size(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


# ---------------------------------------------------------------------- the shared base layer
class BlockedAttention(MultiHeadAttention):
    """The base of the blocked sparse variants (local, strided, global); not registered.

    It turns the masks into a ``(B, S)`` key-validity vector, pads the sequence to a
    multiple of the block size, lets the subclass compute its parts
    (:meth:`_attend_blocked`) and cuts the padding off again. It raises on what a sparse
    pattern cannot honour without a T x S tensor: an arbitrary ``attention_mask``,
    ``return_attention_scores`` and cross attention with ``T != S``. It has no KV cache.
    The implicit query mask is not used: outputs at padded query rows are meaningless, as
    everywhere in zoo.
    """

    supports_cache = False

    def _block_size(self, length):
        """The block size for a sequence of static length ``length`` (None if unknown)."""
        raise NotImplementedError

    def _attend_blocked(self, q, k, v, key_valid, causal, block_size, training):
        """``(B, T', N, Hv)`` float32 outputs; T' is a multiple of ``block_size``."""
        raise NotImplementedError

    def _attend_kwargs(self, training):
        def score_fn(q, k):
            return attention_scores(
                q, k, self.score, self._score_scale(), getattr(self, "additive_weight", None)
            )

        return {
            "score_fn": score_fn,
            "dropout": self.dropout,
            "training": training,
            "seed": self.seed_generator,
        }

    def _recomputes(self, training):
        """Whether the window's weights are recomputed (:func:`recomputed_window_part`):
        unless they are dropped out or scored additively, which need them whole."""
        return not (self.score == "additive" or (self.dropout and training))

    def _window_part(self, q, k, v, key_valid, window, block_size, causal, training,
                     num_global=0, global_valid=None):
        """The sliding-window part, in O(T) training memory where :meth:`_recomputes`; with
        ``num_global``, the global keys in its loop (see :func:`recomputed_window_part`)."""
        if not self._recomputes(training):
            return local_window_part(q, k, v, key_valid, window, block_size, causal,
                                     **self._attend_kwargs(training))  # fmt: skip
        return recomputed_window_part(q, k, v, key_valid, window, block_size, causal,
                                      score=self.score, scale=self._score_scale(),
                                      num_global=num_global, global_valid=global_valid)

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        name = type(self).__name__
        if masks.attention is not None:
            raise ValueError(
                f"{name} supports a (B, S) padding_mask and use_causal_mask, not an arbitrary "
                "(B, T, S) attention_mask: honouring one would need the T x S tensor that "
                "this layer avoids. Use MultiHeadAttention (attention='mha') for it."
            )
        if return_weights:
            raise ValueError(
                f"{name} never forms the (B, N, T, S) attention weights, so "
                "return_attention_scores=True is not supported."
            )
        query_length, key_length = q.shape[1], k.shape[1]
        if query_length is not None and key_length is not None and query_length != key_length:
            raise ValueError(
                f"{name} is self-attention over one sequence: its pattern relates query t to "
                f"key t, so it needs as many queries as keys; got T={query_length}, "
                f"S={key_length}."
            )
        length = ops.shape(q)[1]
        block = self._block_size(query_length if query_length is not None else key_length)
        if masks.padding is None:
            key_valid = ops.ones_like(k[:, :, 0, 0], dtype="bool")  # (B, S)
        else:
            key_valid = ops.cast(masks.padding, "bool")  # (B, S)
        q, k, v = (pad_to_multiple(x, block) for x in (q, k, v))  # (B, T', N, H)
        key_valid = pad_to_multiple(key_valid, block, value=False)  # (B, T')
        out = self._attend_blocked(q, k, v, key_valid, masks.causal, block, training)
        return ops.cast(out[:, :length], v.dtype)  # (B, T, N, Hv)


# ---------------------------------------------------------------------- the layer
@keras.saving.register_keras_serializable(package="zoo")
@register_attention("local")
class LocalAttention(BlockedAttention):
    """Sliding-window (local, truncated) attention: each query sees the keys near it.

    Query ``i`` attends key ``j`` when ``|i - j| <= window``, or with ``use_causal_mask`` when
    ``i - window <= j <= i``. Each block of ``window`` queries attends its own block and its two
    neighbours: O(T window), no T x S tensor or mask; a length not a multiple of the window is
    padded internally and masked. With ``window >= T - 1`` it is exactly full attention.

    Masks: a padding mask (or a Keras implicit mask) and ``use_causal_mask``. An
    ``attention_mask``, ``return_attention_scores``, cross attention with ``T != S`` and a KV
    cache (decode with full passes) raise ``ValueError``. Attention dropout applies to the
    window weights.

    Args:
        window: w >= 0, how many keys each side a query sees (before it only, when causal).
        *args, **kwargs: as ``MultiHeadAttention``.

    Call arguments:
        As ``MultiHeadAttention``; see above for the masks it takes.

    Returns:
        ``(B, T, output_dim)``, as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 10, 16))
        >>> attention = LocalAttention(num_heads=2, key_dim=8, window=3)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 10, 16)

    References:
        Child et al. 2019, "Generating Long Sequences with Sparse Transformers", section 4.2
        (attention to the previous ``l`` positions).
        Beltagy et al. 2020, "Longformer: The Long-Document Transformer", section 3.1
        (sliding window).
    """

    def __init__(self, *args, window=64, **kwargs):
        super().__init__(*args, **kwargs)
        self.window = _check_size("window", window, 0)

    def _block_size(self, length):
        return block_size_for(self.window, length)

    def _attend_blocked(self, q, k, v, key_valid, causal, block_size, training):
        out, _ = self._window_part(q, k, v, key_valid, self.window, block_size, causal, training)
        return out

    def get_config(self):
        config = super().get_config()
        config["window"] = self.window
        return config
