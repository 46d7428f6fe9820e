"""Softmax attention over small key sets, in steps whose weights the backward pass recomputes.

The blocked variants (local, strided, global, sinkhorn, clustered) give each block of queries a
few keys of its own; computed whole, their ``(B, N, T, K)`` scores and gradients dominate
training memory. Here the blocks are taken a step at a time, each step keeping its outputs and
each query's maximum and sum of exponentials, from which the backward pass recomputes the
weights (FlashAttention's backward pass): memory O(T) plus one step's scores.
:func:`looped_attention` is the loop; :func:`grouped_attention` its use when every block's keys
lie beside it. Neither has attention dropout: the recomputed weights would be dropped differently.
"""

import numpy as np
from keras import ops

from zoo.layers.attention.scaled_dot_product import default_scale, unit_length
from zoo.layers.loops import bounded_loop
from zoo.layers.masking import mask_value

# Queries per step: the step's scores, (B, N, 512, K), are the loop's working memory; fewer,
# larger steps are faster and hold more.
STEP_QUERIES = 512


def scaled_for_dot_products(q, k, v, score="scaled_dot", scale=None):
    """``q``, ``k``, ``v`` in float32, with the score's scale (and, for the cosine score, the
    unit length) folded into ``q`` and ``k``, so that the scores are plain ``q . k``.

    Args:
        q, k, v: ``(B, T|S, N, H)``.
        score: ``"scaled_dot"``, ``"dot"`` or ``"cosine"``; the additive score is not a dot
            product of queries and keys.
        scale: a number, or the ``(N, 1, 1)`` per-head temperature of the cosine score;
            defaults as in :func:`~zoo.layers.attention.attention_scores`.
    """
    if score not in ("scaled_dot", "dot", "cosine"):
        raise ValueError(f"a dot-product score (scaled_dot, dot or cosine) is needed; got "
                         f"{score!r}.")  # fmt: skip
    q, k, v = (ops.cast(x, "float32") for x in (q, k, v))
    if score == "cosine":
        q, k = unit_length(q), unit_length(k)
    if scale is None:
        scale = default_scale(score, q.shape[-1])
    if not isinstance(scale, (int, float)):  # a tensor: the cosine temperature, (N, 1, 1)
        scale = ops.reshape(ops.cast(scale, "float32"), (1, 1, -1, 1))
    return q * scale, k, v


def looped_attention(q, k, v, steps, queries, keys, mask_of):
    """Softmax attention of each query block over its own keys, with the log-normaliser.

    Args:
        q: ``(B, N, T, H)`` float32 queries, already scaled (the scores are ``q . k``).
        k: float32 keys, in any layout that ``keys`` reads: a tensor, or a tuple of tensors
            (the keys of a step may come from several, as sinkhorn's sorted and own blocks).
        v: float32 values, in the same layout as ``k``.
        steps: the number of steps (an int or a scalar tensor).
        queries: ``(take, put)``: ``take(x, s)`` is step ``s``'s ``(B, N, g, b, ...)`` slice of
            a ``(B, N, T, ...)`` tensor; ``put(total, x, s)`` writes such a slice back.
        keys: ``(take, add)``: ``take(x, s)`` is step ``s``'s ``(B, N, g, K, H)`` keys (or
            values) of each query block from ``x`` (laid out as ``k``); ``add(total, d, s, x)``
            adds their gradient ``d`` into ``total`` (laid out as ``k``), the transpose of
            ``take`` at ``x`` (which a ``take`` that multiplies parts of ``x`` needs).
        mask_of: ``mask_of(s)``, boolean, broadcastable to ``(B, N, g, b, K)``: True where a
            query may attend a key.

    Returns:
        ``out (B, N, T, Hv)`` and ``lse (B, N, T)``: the attended values and
        ``log sum exp(score)`` over each query's allowed keys (about ``-1e9`` for a query with
        none, whose output is the mean of its keys' values). Both are differentiable.
    """
    take_queries, put_queries = queries
    take_keys, add_keys = keys
    parts = len(k) if isinstance(k, (tuple, list)) else None  # k and v as tuples of this many

    def pack(x):  # a tuple of the layout's parts, or the one tensor
        return tuple(x) if parts is not None else x[0]

    def masked_scores(q_s, k_s, s):  # (B, N, g, b, K) and the mask
        scores = ops.einsum("bngqh,bngkh->bngqk", q_s, k_s)
        mask = mask_of(s)
        return ops.where(mask, scores, mask_value("float32")), mask

    @ops.custom_gradient
    def attend(q, *kv):
        half = len(kv) // 2
        k, v = pack(kv[:half]), pack(kv[half:])

        def forward(s, carry):
            out, maximum, total = carry  # (B, N, T, Hv), (B, N, T), (B, N, T)
            scores, _ = masked_scores(take_queries(q, s), take_keys(k, s), s)
            step_maximum = ops.max(scores, axis=-1)  # (B, N, g, b)
            p = ops.exp(scores - ops.expand_dims(step_maximum, -1))
            step_total = ops.sum(p, axis=-1)
            step_out = ops.einsum("bngqk,bngkh->bngqh", p, take_keys(v, s))
            step_out = step_out / ops.expand_dims(step_total, -1)
            return (put_queries(out, step_out, s), put_queries(maximum, step_maximum, s),
                    put_queries(total, step_total, s))  # fmt: skip

        shape = (ops.shape(q)[0], q.shape[1], ops.shape(q)[2])
        value_size = kv[-1].shape[-1]
        init = (ops.zeros(shape + (value_size,), "float32"), ops.zeros(shape, "float32"),
                ops.ones(shape, "float32"))  # fmt: skip
        out, maximum, total = bounded_loop(steps, forward, init)
        lse = maximum + ops.log(total)

        def backward(*args, upstream=None):
            grads = args if upstream is None else upstream
            if len(grads) == 1 and isinstance(grads[0], (tuple, list)):
                grads = grads[0]  # JAX: the cotangent of the (out, lse) pair
            d_out, d_lse = grads
            d_out = ops.zeros_like(out) if d_out is None else d_out
            d_lse = ops.zeros_like(lse) if d_lse is None else d_lse
            # d score = p (d weight - sum_k p d weight + d lse), with d weight = d_out . v
            d_sum = ops.sum(d_out * out, axis=-1) - d_lse  # (B, N, T)

            def step(s, carry):
                d_q, d_k, d_v = carry
                q_s, k_s, v_s = take_queries(q, s), take_keys(k, s), take_keys(v, s)
                d_out_s = take_queries(d_out, s)  # (B, N, g, b, Hv)
                scores, mask = masked_scores(q_s, k_s, s)
                # exp(score - maximum) / total, not exp(score - lse): next to a masked score
                # (-1e9) the log of the sum is lost to rounding.
                p = ops.exp(scores - ops.expand_dims(take_queries(maximum, s), -1))
                p = p / ops.expand_dims(take_queries(total, s), -1)
                d_weights = ops.einsum("bngqh,bngkh->bngqk", d_out_s, v_s)
                d_scores = p * (d_weights - ops.expand_dims(take_queries(d_sum, s), -1))
                d_scores = ops.where(mask, d_scores, 0.0)  # a masked score is a constant
                d_q = put_queries(d_q, ops.einsum("bngqk,bngkh->bngqh", d_scores, k_s), s)
                d_k = add_keys(d_k, ops.einsum("bngqk,bngqh->bngkh", d_scores, q_s), s, k)
                d_v = add_keys(d_v, ops.einsum("bngqk,bngqh->bngkh", p, d_out_s), s, v)
                return d_q, d_k, d_v

            zeros = [ops.zeros_like(x) for x in kv]
            init = (ops.zeros_like(q), pack(zeros[:half]), pack(zeros[half:]))
            d_q, d_k, d_v = bounded_loop(steps, step, init)
            flat = [d_k, d_v] if parts is None else list(d_k) + list(d_v)
            return (d_q, *flat)

        return (out, lse), backward

    if parts is None:
        return attend(q, k, v)
    return attend(q, *k, *v)


def step_slices(batch, heads, queries_per_block, blocks_per_step):
    """``(take, put)`` of :func:`looped_attention` for tensors ``(B, N, T, ...)`` whose step
    ``s`` is the ``g`` blocks of ``b`` positions from ``s g b`` on."""
    b, g = queries_per_block, blocks_per_step

    def take(x, s):
        rest = tuple(x.shape[3:])
        start, size = [0, 0, s * g * b] + [0] * len(rest), [batch, heads, g * b] + list(rest)
        piece = ops.slice(x, start, size)
        return ops.reshape(piece, (batch, heads, g, b) + rest)

    def put(total, x, s):
        rest = tuple(x.shape[4:])
        flat = ops.reshape(x, (batch, heads, g * b) + rest)
        return ops.slice_update(total, [0, 0, s * g * b] + [0] * len(rest), flat)

    return take, put


def blocks_per_step(queries_per_block, blocks, step_queries=STEP_QUERIES):
    """How many blocks one step takes: ``step_queries`` queries' worth, at least one, and never
    more than the ``blocks`` there are (when known)."""
    g = max(1, step_queries // queries_per_block)
    return g if blocks is None else max(1, min(g, int(blocks)))


def grouped_attention(q, k, v, mask, step_queries=STEP_QUERIES):
    """Each block of queries attends its own keys, laid out beside it; recomputed in training.

    Args:
        q: ``(B, N, G, b, H)`` float32, already scaled: ``G`` blocks of ``b`` queries.
        k: ``(B, N, G, K, H)`` float32, the ``K`` keys of each block; or a tuple of such
            tensors, whose keys are joined (sinkhorn's sorted block and own block), so that
            their concatenation is never made.
        v: ``(B, N, G, K, Hv)`` float32, or a tuple as ``k``.
        mask: boolean ``(B|1, N|1, G, b, K)`` (``K`` all the keys, in ``k``'s order): True
            where a query may attend a key; with a tuple ``k``, a tuple of one such mask per
            part, each broadcastable to ``(B, N, G, b, K_part)``, so that the whole mask is
            never made either.
        step_queries: queries per step of the loop.

    Returns:
        ``out (B, N, G, b, Hv)`` and ``lse (B, N, G, b)``, as :func:`looped_attention`.
    """
    k, v, masks = (tuple(x) if isinstance(x, (tuple, list)) else (x,) for x in (k, v, mask))
    batch, n, b = ops.shape(q)[0], q.shape[1], q.shape[3]
    sizes = [x.shape[3] for x in k]  # the keys of each block in each part
    g = blocks_per_step(b, q.shape[2], step_queries)
    blocks = ops.shape(q)[2]
    fill = (-blocks) % g  # whole steps: blocks added at the end, masked, cut off after
    if not isinstance(fill, int) or fill:
        widths = [[0, 0], [0, 0], [0, fill], [0, 0], [0, 0]]
        q = ops.pad(q, widths)
        k, v = ([ops.pad(x, widths) for x in parts] for parts in (k, v))
        masks = [ops.pad(ops.cast(m, "bool"), widths, constant_values=False) for m in masks]
    steps = ops.shape(q)[2] // g

    def flat(x):  # (B, N, G, K, H) -> (B, N, G K, H)
        return ops.reshape(x, (batch, n, -1, x.shape[4]))

    slices = [step_slices(batch, n, size, g) for size in sizes]

    def take_keys(parts, s):  # (B, N, g, K, H): the parts' keys of each block, joined
        taken = [take(x, s) for (take, _), x in zip(slices, parts)]
        return taken[0] if len(taken) == 1 else ops.concatenate(taken, axis=3)

    def add_keys(totals, d, s, _):  # each step's keys are its own: no overlap between steps
        d_parts = [d] if len(sizes) == 1 else ops.split(d, list(np.cumsum(sizes)[:-1]), axis=3)
        return tuple(put(total, take(total, s) + d_part, s)
                     for (take, put), total, d_part in zip(slices, totals, d_parts))  # fmt: skip

    def mask_of(s):  # (B|1, N|1, g, b, K): the parts' masks of the step's blocks, joined
        taken = []
        for m, size in zip(masks, sizes):
            shape = ops.shape(m)
            m = ops.slice(m, [0, 0, s * g, 0, 0], [shape[0], shape[1], g, shape[3], shape[4]])
            taken.append(m if len(masks) == 1 else ops.broadcast_to(
                m, (ops.shape(q)[0], n, g, b, size)))  # fmt: skip
        return taken[0] if len(taken) == 1 else ops.concatenate(taken, axis=-1)

    out, lse = looped_attention(flat(q), tuple(map(flat, k)), tuple(map(flat, v)), steps,
                                step_slices(batch, n, b, g), (take_keys, add_keys), mask_of)
    out = ops.reshape(out, (batch, n, -1, b, v[0].shape[4]))[:, :, :blocks]
    return out, ops.reshape(lse, (batch, n, -1, b))[:, :, :blocks]
