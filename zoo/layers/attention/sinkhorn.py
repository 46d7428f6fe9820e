"""Sparse Sinkhorn attention (Tay et al. 2020): learned soft sorting of blocks, then local attention."""

import math

import keras
from keras import ops

from zoo.layers.attention.clustered import (
    SelfAttentionOnly,
    check_mask_parts,
    dot_product_scale,
)
from zoo.layers.attention.local import pad_to_multiple
from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.recomputed import (
    STEP_QUERIES,
    blocks_per_step,
    looped_attention,
    step_slices,
)
from zoo.layers.attention.registry import register_attention
from zoo.layers.dropout import dropout
from zoo.layers.masking import mask_value


def sinkhorn(log_alpha, iterations, valid=None):
    """Sinkhorn normalization in log space: a doubly stochastic matrix from ``exp(log_alpha)``.

    Each iteration normalizes the rows, then the columns (``F_c(F_r(.))``, eq. 5 of Tay et
    al. 2020); in the limit every row and every column sums to 1, and after each iteration the
    columns do exactly.

    Args:
        log_alpha: ``(..., n, n)`` log-scores (float32).
        iterations: the number of row-then-column normalizations.
        valid: boolean, broadcastable to ``log_alpha``, or None. Only the valid entries take
            part; the rest are 0 in the result. The valid entries should form a square
            submatrix (the same set of rows and columns), for which the result is doubly
            stochastic; an all-invalid row or column stays 0.

    Returns:
        ``(..., n, n)`` float32, the soft permutation matrix.
    """
    floor = mask_value("float32")

    def masked(x):
        return x if valid is None else ops.where(valid, x, floor)

    log_alpha = masked(ops.cast(log_alpha, "float32"))
    for _ in range(iterations):
        log_alpha = masked(log_alpha - ops.logsumexp(log_alpha, axis=-1, keepdims=True))
        log_alpha = masked(log_alpha - ops.logsumexp(log_alpha, axis=-2, keepdims=True))
    matrix = ops.exp(log_alpha)
    return matrix if valid is None else ops.where(valid, matrix, 0.0)


def _blocks(x, block_size):
    """``(B, T, ...)`` -> ``(B, T/b, b, ...)``, ``T`` a multiple of ``b``."""
    return ops.reshape(x, (ops.shape(x)[0], -1, block_size) + tuple(x.shape[2:]))


def sorted_block_attention(q, k, v, sort, sorted_real, local_mask, step_queries=STEP_QUERIES):
    """Each block of queries attends, with one softmax, its sorted block ``sum_j S_ij K_j``
    and its own block; a step of blocks at a time, recomputed in the backward pass.

    The sorted keys and values are made inside each step from ``sort`` and the blocks (and
    their gradients are taken back there), so that neither they nor their gradients exist
    whole: training memory is O(T) plus one step's scores.

    Args:
        q: ``(B, N, n, b, H)`` float32 queries, already scaled.
        k, v: ``(B, N, n, b, H|Hv)`` float32 keys and values of the blocks.
        sort: ``(B, N, n, n)`` float32, the sorting matrix ``S``.
        sorted_real: ``(B, N, n, b)`` boolean, the sorted block's positions that a real token
            reaches.
        local_mask: boolean, broadcastable to ``(B, N, n, b, b)``: the own block's keys each
            query may attend.
        step_queries: queries per step.

    Returns:
        ``out (B, N, n, b, Hv)`` and ``lse (B, N, n, b)``, as
        :func:`~zoo.layers.attention.recomputed.looped_attention`.
    """
    batch, heads, b = ops.shape(q)[0], q.shape[1], q.shape[3]
    blocks = ops.shape(q)[2]
    g = blocks_per_step(b, q.shape[2], step_queries)
    fill = (-blocks) % g  # whole steps: masked blocks added at the end, cut off after
    if not isinstance(fill, int) or fill:
        widths = [[0, 0], [0, 0], [0, fill], [0, 0], [0, 0]]
        q, k, v = (ops.pad(x, widths) for x in (q, k, v))
        sort = ops.pad(sort, widths[:3] + [[0, fill]])
        sorted_real = ops.pad(sorted_real, widths[:4], constant_values=False)
        local_mask = ops.pad(local_mask, widths, constant_values=False)
    steps = ops.shape(q)[2] // g
    take_blocks, put_blocks = step_slices(batch, heads, b, g)  # of (B, N, n b, ...) tensors

    def flat(x):  # (B, N, n, b, H) -> (B, N, n b, H)
        return ops.reshape(x, (batch, heads, -1, x.shape[4]))

    def whole(x):  # (B, N, n b, H) -> (B, N, n, b, H)
        return ops.reshape(x, (batch, heads, -1, b, x.shape[3]))

    def rows(m, s):  # (B, N, g, n): the step's rows of S
        return ops.slice(m, [0, 0, s * g, 0], [batch, heads, g, ops.shape(m)[3]])

    def take_keys(parts, s):  # (B, N, g, 2b, H): each block's sorted block, then its own
        m, x = parts
        sorted_block = ops.einsum("bngj,bnjph->bngph", rows(m, s), whole(x))
        return ops.concatenate([sorted_block, take_blocks(x, s)], axis=3)

    def add_keys(totals, d, s, parts):  # the transpose of take_keys, for S and the blocks
        (d_m, d_x), (m, x) = totals, parts
        d_sorted, d_own = d[:, :, :, :b], d[:, :, :, b:]
        d_rows = ops.einsum("bngph,bnjph->bngj", d_sorted, whole(x))
        d_m = ops.slice_update(d_m, [0, 0, s * g, 0], d_rows)  # a row of S is one step's
        d_x = d_x + flat(ops.einsum("bngj,bngph->bnjph", rows(m, s), d_sorted))
        return d_m, put_blocks(d_x, take_blocks(d_x, s) + d_own, s)

    def mask_of(s):  # (B, N, g, b, 2b)
        shape, local = (batch, heads, g, b, b), ops.shape(local_mask)
        taken = ops.slice(sorted_real, [0, 0, s * g, 0], [batch, heads, g, b])
        own = ops.slice(local_mask, [0, 0, s * g, 0, 0], [local[0], local[1], g, local[3], local[4]])
        return ops.concatenate([ops.broadcast_to(taken[..., None, :], shape),
                                ops.broadcast_to(own, shape)], axis=-1)  # fmt: skip

    out, lse = looped_attention(flat(q), (sort, flat(k)), (sort, flat(v)), steps,
                                (take_blocks, put_blocks), (take_keys, add_keys), mask_of)
    out = ops.reshape(out, (batch, heads, -1, b, v.shape[4]))[:, :, :blocks]
    return out, ops.reshape(lse, (batch, heads, -1, b))[:, :, :blocks]


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("sinkhorn")
class SinkhornAttention(SelfAttentionOnly, MultiHeadAttention):
    """Sparse Sinkhorn attention: each block attends itself and a learned soft sort of the blocks.

    The sequence is cut into blocks of ``block_size`` tokens. Per head, a sorting network scores
    every pair of blocks from their mean queries and keys,
    ``R_ij = relu(qbar_i W_q) . relu(kbar_j W_k) / sqrt(sort_dim)``, and Sinkhorn normalization
    of ``(R + g) / temperature`` (``g`` Gumbel noise, in training) gives a doubly stochastic
    ``S``; block ``i``'s sorted keys and values are ``sum_j S_ij K_j`` and ``sum_j S_ij V_j``.
    Each query block attends its sorted block and its own, ``2b`` keys: O(T b + n^2) memory.
    The paper's network maps a block to ``n`` logits, fixing the number of blocks; dot products
    of two per-head networks make any length work.

    Masks: padded tokens are left out of the block means; a sorted position is masked when no
    block mixed into it has a real token there. With ``use_causal_mask`` block ``i`` is sorted
    from the blocks ``j < i`` only, ``S`` normalized over its rows alone (a column normalization
    would let later blocks change earlier rows), and its own block attended causally. An
    ``attention_mask`` or ``return_attention_scores`` raises ``ValueError``. Attention dropout
    applies to the weights. Self-attention only; no KV cache.

    Args:
        block_size: b, the number of tokens of a block.
        temperature: the Sinkhorn temperature; lower is closer to a hard permutation.
        sinkhorn_iterations: the number of row-then-column normalizations.
        sort_dim: the width of the sorting network; defaults to ``key_dim``.
        gumbel_noise: add Gumbel noise to the sorting logits in training (Gumbel-Sinkhorn).
        *args, **kwargs: as ``MultiHeadAttention``; the score must be ``"scaled_dot"`` or ``"dot"``.

    Call arguments:
        As ``MultiHeadAttention``, without ``value``, ``key``, ``attention_mask`` and the cache.

    Returns:
        ``(B, T, output_dim)``. Outputs at padded positions are meaningless.

    Example:
        >>> x = keras.random.normal((2, 10, 16))
        >>> attention = SinkhornAttention(num_heads=2, key_dim=8, block_size=4)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 10, 16)

    References:
        Tay et al. 2020, "Sparse Sinkhorn Attention", ICML, sections 3.1-3.3.
        Mena et al. 2018, "Learning Latent Permutations with Gumbel-Sinkhorn Networks".
    """

    supports_cache = False

    def __init__(
        self,
        *args,
        block_size=16,
        temperature=0.75,
        sinkhorn_iterations=8,
        sort_dim=None,
        gumbel_noise=True,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        dot_product_scale(self)
        if block_size < 1 or sinkhorn_iterations < 1:
            raise ValueError(
                f"block_size and sinkhorn_iterations must be >= 1; got {block_size} and "
                f"{sinkhorn_iterations}."
            )
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}.")
        self.block_size = block_size
        self.temperature = temperature
        self.sinkhorn_iterations = sinkhorn_iterations
        self.sort_dim = sort_dim
        self.gumbel_noise = gumbel_noise

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        shape = (self.num_heads, self.key_dim, self.sort_dim or self.key_dim)
        self.sort_query_kernel = self.add_weight(
            name="sort_query_kernel", shape=shape, initializer=self.kernel_initializer
        )
        self.sort_key_kernel = self.add_weight(
            name="sort_key_kernel", shape=shape, initializer=self.kernel_initializer
        )

    # ------------------------------------------------------------------ sorting
    def sorting_matrix(self, q, k, real, causal=False, training=None):
        """The soft permutation ``S`` of the blocks, ``(B, N, n, n)`` float32.

        Args:
            q, k: ``(B, T, N, H)`` with ``T`` a multiple of ``block_size``.
            real: ``(B, T)`` boolean, True for real tokens.
            causal: sort block ``i`` from blocks ``j < i`` only (rows normalized only).
            training: whether to add Gumbel noise.
        """
        b = self.block_size
        real = ops.cast(_blocks(real, b), "float32")  # (B, n, b)
        count = ops.sum(real, axis=-1)  # (B, n)

        def block_sums(x):
            x = ops.cast(_blocks(x, b), "float32")  # (B, n, b, N, H)
            return ops.einsum("bcpnh,bcp->bnch", x, real)  # (B, N, n, H)

        q_sum, k_sum = block_sums(q), block_sums(k)
        q_count = k_count = count[:, None, :, None]  # (B, 1, n, 1)
        if causal:  # the rows see the blocks before their own only
            q_sum = ops.cumsum(q_sum, axis=2) - q_sum
            q_count = ops.cumsum(q_count, axis=2) - q_count
        q_mean = q_sum / ops.maximum(q_count, 1.0)
        k_mean = k_sum / ops.maximum(k_count, 1.0)
        rows = ops.relu(ops.einsum("bnih,nhd->bnid", q_mean, self.sort_query_kernel))
        cols = ops.relu(ops.einsum("bnjh,nhd->bnjd", k_mean, self.sort_key_kernel))
        logits = ops.einsum("bnid,bnjd->bnij", rows, cols) / math.sqrt(ops.shape(rows)[-1])
        if training and self.gumbel_noise:
            uniform = keras.random.uniform(
                ops.shape(logits), minval=1e-6, maxval=1.0 - 1e-6, seed=self.seed_generator
            )
            logits = logits - ops.log(-ops.log(uniform))
        logits = logits / self.temperature

        has_real = ops.greater(count, 0.0)  # (B, n)
        valid = ops.logical_and(has_real[:, None, :, None], has_real[:, None, None, :])
        if not causal:
            return sinkhorn(logits, self.sinkhorn_iterations, valid)  # (B, N, n, n)
        blocks = ops.arange(ops.shape(count)[1])
        valid = ops.logical_and(valid, ops.greater(blocks[:, None], blocks[None, :]))  # j < i
        logits = ops.where(valid, logits, mask_value("float32"))
        weights = ops.exp(logits - ops.logsumexp(logits, axis=-1, keepdims=True))  # row softmax
        return ops.where(valid, weights, 0.0)

    # ------------------------------------------------------------------ attention
    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        check_mask_parts(self, masks, return_weights)
        b = self.block_size
        batch, length = ops.shape(q)[0], ops.shape(q)[1]
        real = masks.padding
        if real is None:
            real = ops.ones((batch, length), "bool")
        real = pad_to_multiple(ops.cast(real, "bool"), b, False)  # (B, T')
        q, k, v = (pad_to_multiple(x, b) for x in (q, k, v))  # (B, T', N, H)
        padded_length = ops.shape(q)[1]
        k = k * ops.cast(real, k.dtype)[:, :, None, None]  # padding never enters a sort
        v = v * ops.cast(real, v.dtype)[:, :, None, None]
        sort = self.sorting_matrix(q, k, real, masks.causal, training)  # (B, N, n, n)

        def heads_first(x):
            return ops.transpose(_blocks(x, b), (0, 3, 1, 2, 4))  # (B, N, n, b, H)

        q, k, v = heads_first(q), heads_first(k), heads_first(v)
        real_blocks = ops.cast(_blocks(real, b), "float32")  # (B, n, b)
        sorted_real = ops.einsum("bnij,bjp->bnip", sort, real_blocks) > 0  # (B, N, n, b)
        local_real = ops.cast(real_blocks[:, None], "bool")  # (B, 1, n, b)
        local_mask = local_real[..., None, :]  # (B, 1, n, 1, b)
        if masks.causal:
            local_mask = ops.logical_and(local_mask, ops.tril(ops.ones((b, b), "bool")))

        scale = dot_product_scale(self)
        if not (self.dropout and training):  # O(T) memory in training: recomputed steps
            def f32(x):
                return ops.cast(x, "float32")

            out, _ = sorted_block_attention(
                f32(q * scale), f32(k), f32(v), f32(sort), sorted_real, local_mask)
            out = ops.cast(out, v.dtype)  # fmt: skip
        else:  # dropout needs the weights whole
            k_sorted = ops.einsum("bnij,bnjph->bniph", ops.cast(sort, k.dtype), k)
            v_sorted = ops.einsum("bnij,bnjph->bniph", ops.cast(sort, v.dtype), v)
            allowed = (sorted_real[..., None, :], local_mask)  # the sorted block's, its own
            scores = ops.cast(ops.einsum("bniph,bnirh->bnipr", q, ops.concatenate(
                [k_sorted, k], axis=3)), "float32") * scale  # fmt: skip
            shape = ops.shape(sorted_real)[:3] + (b, b)  # (B, N, n, b, b) each
            allowed = ops.concatenate([ops.broadcast_to(m, shape) for m in allowed], axis=-1)
            scores = ops.where(allowed, scores, mask_value("float32"))
            weights = ops.softmax(scores, axis=-1)  # (B, N, n, b, 2b)
            weights = dropout(weights, self.dropout, seed=self.seed_generator)
            weights = ops.cast(weights, v.dtype)
            out = ops.einsum("bnipr,bnirh->bniph", weights[..., :b], v_sorted)
            out = out + ops.einsum("bnipr,bnirh->bniph", weights[..., b:], v)  # (B,N,n,b,Hv)
        out = ops.transpose(out, (0, 2, 3, 1, 4))  # (B, n, b, N, Hv)
        out = ops.reshape(out, (-1, padded_length, self.num_heads, self._value_dim))  # (B,T',N,Hv)
        return out[:, :length]  # (B, T, N, Hv)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "block_size": self.block_size,
                "temperature": self.temperature,
                "sinkhorn_iterations": self.sinkhorn_iterations,
                "sort_dim": self.sort_dim,
                "gumbel_noise": self.gumbel_noise,
            }
        )
        return config
