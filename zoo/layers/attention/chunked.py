"""Memory-efficient exact attention: full softmax attention, computed one key chunk at a time.

Each chunk's scores are folded into running softmax statistics (the online softmax) and dropped,
and recomputed in the backward pass (``keras.remat``): no T x S tensor is held, and training
memory is O(T * C + T * H * S / C) instead of O(T * S). Rabe & Staats (2021) with
FlashAttention's key loop, in ``keras.ops``: no fused kernel, so it saves memory, not time.
"""

import keras
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.recomputed import scaled_for_dot_products
from zoo.layers.loops import bounded_loop
from zoo.layers.masking import AttentionMasks, combine_masks, mask_value

# A key added to fill the last chunk scores below any masked key (mask_value), so that it
# weighs nothing even in a query row whose every real key is masked (which full attention
# spreads uniformly over the real keys).
_FILL_SCORE = 2 * mask_value("float32")
_START_MAXIMUM = -1e30  # below every score, and finite: no inf - inf anywhere


def chunked_attention(q, k, v, masks=None, chunk_size=256, score="scaled_dot", scale=None):
    """``softmax(score(q, k)) v`` over key chunks of ``chunk_size``, with every mask honoured.

    Equal to :func:`~zoo.layers.attention.scaled_dot_product_attention` without dropout or
    bias, in values and gradients (to float rounding), fully masked query rows included. The
    gradient is written out (FlashAttention's backward pass): it recomputes each chunk's
    weights from each query's saved maximum and sum of exponentials, so nothing of size
    T x S is kept.

    Args:
        q: queries ``(B, T, N, H)``.
        k: keys ``(B, S, N, H)``.
        v: values ``(B, S, N, Hv)``.
        masks: a :class:`~zoo.layers.masking.AttentionMasks`; each chunk takes its slice.
        chunk_size: C, the keys scored at once.
        score: ``"scaled_dot"``, ``"dot"`` or ``"cosine"`` (see
            :func:`~zoo.layers.attention.attention_scores`); the additive score is not a dot
            product of queries and keys, so it has no chunked form here.
        scale: multiplies the scores: a number, or the ``(N, 1, 1)`` per-head temperature of
            the cosine score. Defaults as in ``attention_scores``.

    Returns:
        The attended values ``(B, T, N, Hv)``, in ``v``'s dtype.

    Example:
        >>> q = keras.random.normal((2, 10, 4, 8))
        >>> tuple(chunked_attention(q, q, q, chunk_size=4).shape)
        (2, 10, 4, 8)
    """
    if score not in ("scaled_dot", "dot", "cosine"):
        raise ValueError(f"chunked_attention has the scaled_dot, dot and cosine scores; got "
                         f"{score!r} (use attention='mha' for it).")  # fmt: skip
    masks = masks or AttentionMasks()
    dtype = v.dtype
    q, k, v = scaled_for_dot_products(q, k, v, score, scale)  # the scores are then q . k

    length, padding, attention = k.shape[1], masks.padding, masks.attention
    real = None  # (S',) True for real keys, when the last chunk is filled
    if length is None or length % chunk_size:
        length = ops.shape(k)[1]
        fill = (-length) % chunk_size
        k, v = (ops.pad(x, [[0, 0], [0, fill], [0, 0], [0, 0]]) for x in (k, v))
        real = ops.arange(length + fill) < length
        if padding is not None:
            padding = ops.pad(ops.cast(padding, "bool"), [[0, 0], [0, fill]])
        if attention is not None:
            attention = ops.pad(ops.cast(attention, "bool"), [[0, 0], [0, 0], [0, fill]])
    chunks = k.shape[1] // chunk_size if k.shape[1] is not None else ops.shape(k)[1] // chunk_size
    b, t, n = ops.shape(q)[0], ops.shape(q)[1], q.shape[2]
    # Head-major (B, N, T, H) inside the loops, so that every product is a batched matmul with
    # no transpose in the loop.
    q, k, v = (ops.transpose(x, (0, 2, 1, 3)) for x in (q, k, v))

    def chunk_of(x, start):  # (B, N, C, H): one chunk of keys or values
        return ops.slice(x, [0, 0, start, 0], [b, n, chunk_size, x.shape[3]])

    def masked_scores(q, k_c, start):
        """The scores of every query against one chunk, ``(B, N, T, C)``, and the mask used."""
        scores = ops.einsum("bnth,bnsh->bnts", q, k_c)
        mask = combine_masks(
            t,
            chunk_size,
            padding_mask=None if padding is None else ops.slice(
                padding, [0, start], [ops.shape(padding)[0], chunk_size]),
            attention_mask=None if attention is None else ops.slice(
                attention, [0, 0, start], [ops.shape(attention)[0], t, chunk_size]),
            query_mask=masks.query,
            use_causal_mask=masks.causal,
            query_offset=masks.query_offset - start,
        )  # (B|1, T, C) or None
        if mask is not None:
            mask = ops.expand_dims(mask, 1)
            scores = ops.where(mask, scores, mask_value("float32"))
        if real is not None:
            scores = ops.where(ops.slice(real, [start], [chunk_size]), scores, _FILL_SCORE)
        return scores, mask

    @ops.custom_gradient
    def attend(q, k, v):
        def forward(carry, start):
            maximum, total, weighted = carry  # (B, N, T), (B, N, T), (B, N, T, Hv)
            scores, _ = masked_scores(q, chunk_of(k, start), start)
            new_maximum = ops.maximum(maximum, ops.max(scores, axis=-1))
            rescale = ops.exp(maximum - new_maximum)
            p = ops.exp(scores - ops.expand_dims(new_maximum, -1))  # (B, N, T, C)
            total = total * rescale + ops.sum(p, axis=-1)
            weighted = ops.expand_dims(rescale, -1) * weighted + ops.einsum(
                "bnts,bnsh->bnth", p, chunk_of(v, start))
            return new_maximum, total, weighted

        init = (ops.full((b, n, t), _START_MAXIMUM, "float32"), ops.zeros((b, n, t), "float32"),
                ops.zeros((b, n, t, v.shape[3]), "float32"))  # fmt: skip
        maximum, total, weighted = _loop(forward, init, chunks, chunk_size)
        out = weighted / ops.expand_dims(total, -1)  # (B, N, T, Hv)

        def backward(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream  # (B, N, T, Hv)
            d_sum = ops.expand_dims(ops.sum(d_out * out, axis=-1), -1)  # rowsum(dP * P)
            # The weights are recomputed as exp(scores - maximum) / total, not from the
            # log-sum-exp: next to a masked score (-1e9) the log of the sum is lost to rounding.
            row_maximum, row_scale = ops.expand_dims(maximum, -1), ops.expand_dims(1 / total, -1)

            def step(carry, start):
                d_q, d_k, d_v = carry
                k_c, v_c = chunk_of(k, start), chunk_of(v, start)
                scores, mask = masked_scores(q, k_c, start)
                p = ops.exp(scores - row_maximum) * row_scale  # (B, N, T, C)
                d_scores = p * (ops.einsum("bnth,bnsh->bnts", d_out, v_c) - d_sum)
                if mask is not None:  # a masked score is a constant
                    d_scores = ops.where(mask, d_scores, 0.0)
                d_q = d_q + ops.einsum("bnts,bnsh->bnth", d_scores, k_c)
                d_k_c = ops.einsum("bnts,bnth->bnsh", d_scores, q)
                d_v_c = ops.einsum("bnts,bnth->bnsh", p, d_out)
                d_k = ops.slice_update(d_k, [0, 0, start, 0], d_k_c)
                d_v = ops.slice_update(d_v, [0, 0, start, 0], d_v_c)
                return d_q, d_k, d_v

            init = (ops.zeros_like(q), ops.zeros_like(k), ops.zeros_like(v))
            return _loop(step, init, chunks, chunk_size)

        return out, backward

    return ops.cast(ops.transpose(attend(q, k, v), (0, 2, 1, 3)), dtype)


def _loop(step, carry, chunks, chunk_size):
    """``carry = step(carry, start)`` for each chunk's first key, ``start = i * chunk_size``.

    Always a loop (:func:`~zoo.layers.loops.bounded_loop`), even when the number of chunks is
    known: unrolled, the chunks are independent programs that XLA is free to run side by side,
    and it kept them all in memory at once (more than full attention: 918 against 806 MiB
    planned at N=4096). The gradient is written out, so no loop is differentiated.
    """
    return bounded_loop(chunks, lambda i, carry: step(carry, i * chunk_size), carry)


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("chunked")
class ChunkedAttention(MultiHeadAttention):
    """Exact multi-head attention in O(T * C) memory instead of O(T * S): :func:`chunked_attention`.

    The same layer as ``"mha"`` (weights, masks, score functions, the KV cache), with the
    attention computed one chunk of keys at a time and recomputed in the backward pass. It never
    forms the attention weights, so it has no attention dropout (``dropout`` must be 0; residual
    dropout in the blocks is unaffected) and cannot return them.

    Args:
        chunk_size: C, the keys scored at once (memory O(T * C) per step).
        *args, **kwargs: as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 12, 16))
        >>> layer = ChunkedAttention(num_heads=2, key_dim=8, chunk_size=4)
        >>> tuple(layer(x, use_causal_mask=True).shape)
        (2, 12, 16)

    References:
        Rabe & Staats 2021, "Self-attention Does Not Need O(n^2) Memory"; Dao et al. 2022,
        "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness".
    """

    def __init__(self, *args, chunk_size=256, **kwargs):
        super().__init__(*args, **kwargs)
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
        if self.score == "additive":
            raise ValueError("ChunkedAttention has the scaled_dot, dot and cosine scores; the "
                             "additive score is not a dot product of queries and keys. Use "
                             "attention='mha' for it.")  # fmt: skip
        if self.dropout:
            raise ValueError(
                f"ChunkedAttention never forms the attention weights, so it has no attention "
                f"dropout; got dropout={self.dropout}. Use dropout=0 (attention_dropout=0 in "
                "the blocks), or attention='mha'."
            )
        self.chunk_size = chunk_size

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        if return_weights:
            raise ValueError("ChunkedAttention never forms the attention weights, so it cannot "
                             "return them; use attention='mha' to see them.")  # fmt: skip
        return chunked_attention(q, k, v, masks, self.chunk_size, score=self.score,
                                 scale=self._score_scale())

    def get_config(self):
        return {**super().get_config(), "chunk_size": self.chunk_size}
