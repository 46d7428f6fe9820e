"""Linear attention (Katharopoulos et al. 2020) and the kernelized-attention core it shares
with the Performer.

Kernelized attention replaces ``exp(q . k)`` by ``phi(q) . phi(k)`` with positive features, so
the sums over the keys are taken once: O(T + S) instead of O(T * S). :func:`kernel_attention` is
that core, non-causal, causal (prefix sums by chunks) and with padding.
"""

import keras
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention

# A "minus infinity" for the log-scales of masked keys that keeps every difference finite.
_NEG = -1.0e30


def check_supported_masks(layer, masks, causal):
    """Raise a clear error for a mask that an efficient ``layer`` cannot honour.

    Args:
        layer: the attention layer (for the message).
        masks: a ``zoo.layers.masking.AttentionMasks``.
        causal: whether the layer supports ``use_causal_mask``.
    """
    name = f"{type(layer).__name__} ({layer.name!r})"
    if masks.attention is not None:
        raise ValueError(
            f"{name} cannot honour an arbitrary (B, T, S) `attention_mask`: that needs the "
            "T x S matrix this layer avoids. Pass `padding_mask`"
            + (" and `use_causal_mask`" if causal else "")
            + " instead, or use attention='mha'."
        )
    if masks.causal and not causal:
        raise ValueError(
            f"{name} does not support `use_causal_mask`: it mixes all positions of the "
            "sequence before attending, so the future cannot be masked out. Use "
            "attention='linear' or 'performer' for causal attention."
        )


def kernel_attention(
    phi_q, phi_k, v, key_mask=None, causal=False, key_log_scale=None, chunk_size=64
):
    """Attention with positive feature maps, in O(T + S) memory.

    ``out_t = sum_s w_ts v_s / sum_s w_ts`` with ``w_ts = (phi_q_t . phi_k_s) exp(l_s)``, over
    the real keys ``s`` (and ``s <= t`` when ``causal``), with nothing of size T x S: non-causal,
    ``sum_s phi_k_s v_s^T`` and ``sum_s phi_k_s`` once; causal, the masked quadratic form inside
    chunks of ``chunk_size`` and prefix sums across them (O(T * C + (T / C) * M * H) per head).
    ``key_log_scale`` lets a log-space feature map (the Performer's) pass key features
    ``phi_k <= 1`` and their log-scale apart; the scales are taken relative to their maximum
    over the real keys (running maximum when causal, so the future has no say even in rounding),
    which cancels and never overflows. Padded keys get zero features; a query that sees no real
    key gets a zero output.

    Args:
        phi_q: ``(B, T, N, M)`` non-negative query features.
        phi_k: ``(B, S, N, M)`` non-negative key features.
        v: ``(B, S, N, H)`` values.
        key_mask: ``(B, S)`` boolean, True for real keys; None when all are real.
        causal: query ``t`` sees keys ``s <= t`` only. Needs ``T == S``.
        key_log_scale: ``(B, S, N)`` or None (zero): the key features are
            ``phi_k * exp(key_log_scale)``.
        chunk_size: C, the chunk length of the causal computation.

    Returns:
        ``(B, T, N, H)``, in the dtype of ``v``. The computation runs in float32.

    Example:
        >>> x = keras.random.normal((2, 10, 4, 8))
        >>> phi = keras.ops.elu(x) + 1
        >>> tuple(kernel_attention(phi, phi, x, causal=True, chunk_size=4).shape)
        (2, 10, 4, 8)

    References:
        Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers
        with Linear Attention", eqs. (4)-(6) (non-causal) and (9)-(12) (causal).
    """
    if causal and None not in (phi_q.shape[1], phi_k.shape[1]) and phi_q.shape[1] != phi_k.shape[1]:
        raise ValueError(
            "Causal kernel attention needs as many queries as keys (self-attention); got "
            f"T={phi_q.shape[1]} and S={phi_k.shape[1]}."
        )
    dtype = v.dtype
    phi_q, phi_k, v = (ops.cast(x, "float32") for x in (phi_q, phi_k, v))
    if key_log_scale is None:
        log_scale = ops.zeros(ops.shape(phi_k)[:3], "float32")  # (B, S, N)
    else:
        log_scale = ops.cast(key_log_scale, "float32")
    if key_mask is not None:
        real = ops.expand_dims(ops.cast(key_mask, "bool"), -1)  # (B, S, 1)
        phi_k = phi_k * ops.cast(ops.expand_dims(real, -1), "float32")  # (B, S, N, M)
        log_scale = ops.where(real, log_scale, _NEG)  # (B, S, N)
    if causal:
        out = _causal_kernel_attention(phi_q, phi_k, v, log_scale, chunk_size)
    else:
        out = _global_kernel_attention(phi_q, phi_k, v, log_scale)
    return ops.cast(out, dtype)  # (B, T, N, H)


def _divide(numerator, denominator):
    """``numerator / denominator`` with a zero output where no key was seen."""
    safe = ops.where(denominator > 0, denominator, 1.0)
    return numerator / ops.expand_dims(safe, -1)


def _global_kernel_attention(phi_q, phi_k, v, log_scale):
    top = ops.stop_gradient(ops.max(log_scale, axis=1, keepdims=True))  # (B, 1, N)
    phi_k = phi_k * ops.expand_dims(ops.exp(log_scale - top), -1)  # (B, S, N, M)
    kv = ops.einsum("bsnm,bsnh->bnmh", phi_k, v)  # (B, N, M, H)
    numerator = ops.einsum("btnm,bnmh->btnh", phi_q, kv)  # (B, T, N, H)
    denominator = ops.einsum("btnm,bnm->btn", phi_q, ops.sum(phi_k, axis=1))  # (B, T, N)
    return _divide(numerator, denominator)


def _causal_kernel_attention(phi_q, phi_k, v, log_scale, chunk_size):
    static_length = phi_q.shape[1]  # kept static where known, so the output shape is too
    length = ops.shape(phi_q)[1] if static_length is None else static_length
    c = chunk_size if static_length is None else max(1, min(chunk_size, static_length))
    pad = (-length) % c
    count = (length + pad) // c  # K, the number of chunks

    def chunked(x, fill):
        # (B, L, ...) -> (B, K, C, ...), padded at the end to a whole number of chunks.
        widths = [[0, 0], [0, pad]] + [[0, 0]] * (len(x.shape) - 2)
        x = ops.pad(x, widths, constant_values=fill)
        return ops.reshape(x, (ops.shape(x)[0], count, c) + tuple(x.shape[2:]))

    q = chunked(phi_q, 0.0)  # (B, K, C, N, M)
    k = chunked(phi_k, 0.0)  # (B, K, C, N, M)
    v = chunked(v, 0.0)  # (B, K, C, N, H)
    scale = ops.transpose(chunked(log_scale, _NEG), (0, 1, 3, 2))  # (B, K, N, C)

    # The running maximum of the key log-scales: inside each chunk, then across the chunks.
    positions = ops.arange(c)
    inside = ops.expand_dims(positions, 1) >= ops.expand_dims(positions, 0)  # (C, C): d <= c
    scale_cd = ops.where(inside, ops.expand_dims(scale, -2), _NEG)  # (B, K, N, C, C)
    running_inside = ops.max(scale_cd, axis=-1)  # (B, K, N, C)
    chunks = ops.arange(count)
    earlier = ops.expand_dims(chunks, 0) < ops.expand_dims(chunks, 1)  # (K, K): chunk i < k
    chunk_top = running_inside[..., -1]  # (B, K, N)
    earlier_top = ops.where(
        earlier[None, :, :, None], ops.expand_dims(chunk_top, 1), _NEG
    )  # (B, K, K, N)
    before = ops.max(earlier_top, axis=2)  # (B, K, N): over the chunks before
    running = ops.maximum(ops.expand_dims(before, -1), running_inside)  # (B, K, N, C)
    running, before = ops.stop_gradient(running), ops.stop_gradient(before)

    # Inside each chunk: the masked quadratic form.
    decay = ops.where(inside, scale_cd - ops.expand_dims(running, -1), _NEG)  # (B, K, N, C, C)
    scores = ops.einsum("bkcnm,bkdnm->bkncd", q, k) * ops.exp(decay)  # (B, K, N, C, C)
    numerator = ops.einsum("bkncd,bkdnh->bkcnh", scores, v)  # (B, K, C, N, H)
    denominator = ops.sum(scores, axis=-1)  # (B, K, N, C)

    # Across chunks: each chunk's sums relative to its last running maximum, carried into the
    # later chunks relative to theirs (every factor is <= 1).
    end = running[..., -1]  # (B, K, N)
    weights = ops.exp(scale - ops.expand_dims(end, -1))  # (B, K, N, C)
    weighted = k * ops.expand_dims(ops.transpose(weights, (0, 1, 3, 2)), -1)  # (B, K, C, N, M)
    states = ops.einsum("bkcnm,bkcnh->bknmh", weighted, v)  # (B, K, N, M, H)
    sums = ops.sum(weighted, axis=2)  # (B, K, N, M)
    carry = ops.where(
        earlier[None, :, :, None],
        ops.expand_dims(end, 1) - ops.expand_dims(before, 2),
        _NEG,
    )  # (B, K, K, N): chunk i into chunk k
    carry = ops.exp(carry)
    prefix = ops.einsum("bkin,binmh->bknmh", carry, states)  # (B, K, N, M, H)
    prefix_sums = ops.einsum("bkin,binm->bknm", carry, sums)  # (B, K, N, M)
    into_query = ops.exp(ops.expand_dims(before, -1) - running)  # (B, K, N, C)
    into_query = ops.transpose(into_query, (0, 1, 3, 2))  # (B, K, C, N)
    numerator = numerator + ops.einsum("bkcnm,bknmh->bkcnh", q, prefix) * ops.expand_dims(
        into_query, -1
    )
    denominator = ops.transpose(denominator, (0, 1, 3, 2)) + into_query * ops.einsum(
        "bkcnm,bknm->bkcn", q, prefix_sums
    )  # (B, K, C, N)

    out = _divide(numerator, denominator)  # (B, K, C, N, H)
    out = ops.reshape(out, (ops.shape(out)[0], count * c) + tuple(out.shape[3:]))  # (B, K*C, N, H)
    return out[:, :length]


def kernel_attention_weights(phi_q, phi_k, mask=None, key_log_scale=None):
    """The ``(B, N, T, S)`` weights that :func:`kernel_attention` applies to the values.

    Dense, O(T * S): for inspection (``return_attention_scores``), not for the forward pass.

    Args:
        phi_q: ``(B, T, N, M)`` query features.
        phi_k: ``(B, S, N, M)`` key features.
        mask: boolean, broadcastable to ``(B, T, S)``, True where query t sees key s.
        key_log_scale: ``(B, S, N)`` or None, as in :func:`kernel_attention`.

    Returns:
        ``(B, N, T, S)`` float32 weights; each row sums to one (zero where no key is seen).
    """
    phi_q, phi_k = ops.cast(phi_q, "float32"), ops.cast(phi_k, "float32")
    scores = ops.einsum("btnm,bsnm->bnts", phi_q, phi_k)  # (B, N, T, S)
    if key_log_scale is None:
        key_log_scale = ops.zeros(ops.shape(phi_k)[:3], "float32")
    log_scale = ops.transpose(ops.cast(key_log_scale, "float32"), (0, 2, 1))  # (B, N, S)
    log_scale = ops.expand_dims(log_scale, 2)  # (B, N, 1, S)
    visible = ops.ones_like(scores, "bool")
    if mask is not None:
        visible = ops.logical_and(visible, ops.expand_dims(ops.cast(mask, "bool"), 1))
    log_scale = ops.where(visible, log_scale, _NEG)  # (B, N, T, S)
    top = ops.stop_gradient(ops.max(log_scale, axis=-1, keepdims=True))  # (B, N, T, 1)
    weights = ops.where(visible, scores * ops.exp(log_scale - top), 0.0)
    total = ops.sum(weights, axis=-1, keepdims=True)
    return weights / ops.where(total > 0, total, 1.0)


class KernelizedAttention(MultiHeadAttention):
    """What linear attention and the Performer share: a feature map fed to
    :func:`kernel_attention`. Subclasses define ``_feature_maps``; not registered itself.

    Masks: ``padding_mask`` (and Keras implicit masks) are honoured by zeroing the features
    of padded keys; ``use_causal_mask`` is supported by prefix sums (self-attention only,
    ``T == S``). An arbitrary ``attention_mask`` raises a ValueError. There is no KV cache
    (``supports_cache = False``). Cross attention (``T != S``) works without the causal mask.
    With ``return_attention_scores`` the implicit weights ``(B, N, T, S)`` are computed
    densely (O(T * S), only when asked).

    Args:
        chunk_size: C, the chunk length of the causal computation (memory O(T * C) per head
            inside the chunks).
        *args, **kwargs: as ``MultiHeadAttention``; ``score`` must stay ``"scaled_dot"`` (the
            feature map replaces it) and ``dropout`` is not applied (no attention matrix).
    """

    supports_cache = False

    def __init__(self, *args, chunk_size=64, **kwargs):
        super().__init__(*args, **kwargs)
        if self.score != "scaled_dot":
            raise ValueError(
                f"{type(self).__name__} has no score function (its feature map replaces it); "
                f"score={self.score!r} is not supported."
            )
        if int(chunk_size) < 1:
            raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
        self.chunk_size = chunk_size

    def _feature_maps(self, q, k, training):
        """``phi_q`` (B, T, N, M), ``phi_k`` (B, S, N, M), the key log-scale (B, S, N) or None."""
        raise NotImplementedError

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        check_supported_masks(self, masks, causal=True)
        phi_q, phi_k, log_scale = self._feature_maps(q, k, training)
        out = kernel_attention(
            phi_q, phi_k, v, masks.padding, masks.causal, log_scale, self.chunk_size
        )  # (B, T, N, H)
        if not return_weights:
            return out
        mask = masks.combined(ops.shape(q)[1], ops.shape(k)[1])  # (B, T, S), only when asked
        weights = kernel_attention_weights(phi_q, phi_k, mask, log_scale)  # (B, N, T, S)
        return out, ops.cast(weights, v.dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"chunk_size": self.chunk_size})
        return config


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("linear")
class LinearAttention(KernelizedAttention):
    """Linear attention: the feature map ``elu(x) + 1`` in place of ``exp(q . k)``.

    ``out_t = phi(q_t) . sum_s phi(k_s) v_s^T / phi(q_t) . sum_s phi(k_s)``, per head, with
    ``phi(x) = elu(x) + 1`` applied to the projected queries and keys. O(T + S) time and
    memory (see :func:`kernel_attention`).

    Masks: ``padding_mask`` and ``use_causal_mask`` are supported, an ``attention_mask`` and
    the KV cache are not (see ``KernelizedAttention``).

    Args:
        chunk_size: the chunk length of the causal computation (default 64).
        *args, **kwargs: as ``MultiHeadAttention``; ``score`` must stay ``"scaled_dot"`` and
            ``dropout`` is not applied (no attention matrix).

    Call arguments:
        As ``MultiHeadAttention``; the weights are dense (see ``KernelizedAttention``).

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = LinearAttention(num_heads=4, key_dim=4)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers
        with Linear Attention", section 3.2 (eq. 7, the feature map) and 3.3 (causal).
    """

    def _feature_maps(self, q, k, training):
        phi_q = ops.elu(ops.cast(q, "float32")) + 1.0  # (B, T, N, H)
        phi_k = ops.elu(ops.cast(k, "float32")) + 1.0  # (B, S, N, H)
        return phi_q, phi_k, None
