"""The one attention core that every zoo attention layer calls."""

import math

import keras
from keras import ops

from zoo.layers.dropout import dropout as random_dropout  # `dropout` is an argument here
from zoo.layers.masking import mask_value

SCORE_FUNCTIONS = ("scaled_dot", "dot", "cosine", "additive")


def default_scale(score, head_dim):
    """The factor on the scores when none is given: ``1/sqrt(H)`` for ``scaled_dot``, else 1."""
    return 1.0 / math.sqrt(head_dim) if score == "scaled_dot" else 1.0


def unit_length(x):
    """``x`` scaled to unit length along its last axis, as the cosine score reads it."""
    return x * ops.rsqrt(ops.sum(ops.square(x), axis=-1, keepdims=True) + 1e-6)


def attention_scores(q, k, score="scaled_dot", scale=None, additive_weight=None):
    """Unnormalised attention scores between every query and every key.

    Args:
        q: queries, ``(B, T, N, H)``.
        k: keys, ``(B, S, N, H)``.
        score: one of ``"scaled_dot"`` (Vaswani et al. 2017; the default), ``"dot"``
            (Luong et al. 2015), ``"cosine"`` (cosine similarity, as in QK-norm; Henry et al.
            2020) or ``"additive"`` (Bahdanau et al. 2015: ``w . tanh(q + k)``).
        scale: multiplies the scores. Defaults to ``1/sqrt(H)`` for ``scaled_dot`` and to 1
            otherwise.
        additive_weight: ``(N, H)`` or ``(H,)``, the vector ``w`` of the additive score.

    Returns:
        Scores of shape ``(B, N, T, S)``.
    """
    if score not in SCORE_FUNCTIONS:
        raise ValueError(f"Unknown score function {score!r}; expected one of {SCORE_FUNCTIONS}.")
    if scale is None:
        scale = default_scale(score, q.shape[-1])
    if score == "cosine":
        q, k = unit_length(q), unit_length(k)
    if score == "additive":
        if additive_weight is None:
            raise ValueError("score='additive' needs `additive_weight`, the (N, H) vector w.")
        q = ops.expand_dims(ops.transpose(q, (0, 2, 1, 3)), 3)  # (B, N, T, 1, H)
        k = ops.expand_dims(ops.transpose(k, (0, 2, 1, 3)), 2)  # (B, N, 1, S, H)
        w = ops.reshape(ops.cast(additive_weight, q.dtype), (-1, 1, 1, q.shape[-1]))  # (N|1,1,1,H)
        scores = ops.sum(ops.tanh(q + k) * w, axis=-1)  # (B, N, T, S)
    else:
        scores = ops.einsum("btnh,bsnh->bnts", q, k)
    if isinstance(scale, (int, float)) and scale == 1.0:
        return scores
    return scores * ops.cast(scale, scores.dtype)


def scaled_dot_product_attention(
    q,
    k,
    v,
    mask=None,
    dropout=0.0,
    return_weights=False,
    score="scaled_dot",
    scale=None,
    bias=None,
    additive_weight=None,
    training=None,
    seed=None,
):
    """Attention of queries over keys and values: ``softmax(score(q, k) + bias) v``.

    Args:
        q: queries, ``(B, T, N, H)``; a rank-3 ``(B, T, H)`` input is treated as one head.
        k: keys, ``(B, S, N, H)`` (or ``(B, S, H)``).
        v: values, ``(B, S, N, Hv)`` (or ``(B, S, Hv)``).
        mask: boolean, True where a query may attend a key; ``(B, T, S)`` or anything
            broadcastable to ``(B, N, T, S)``. See ``zoo.layers.masking``.
        dropout: dropout rate on the attention weights (only when ``training``).
        return_weights: also return the attention weights.
        score: the score function; see :func:`attention_scores`.
        scale: the score scale; see :func:`attention_scores`.
        bias: added to the scores before masking, broadcastable to ``(B, N, T, S)``
            (ALiBi, relative positions).
        additive_weight: the ``w`` vector of the additive score.
        training: whether dropout is active.
        seed: a ``keras.random.SeedGenerator`` (or int) for the dropout.

    Returns:
        The attended values ``(B, T, N, Hv)`` (``(B, T, Hv)`` for rank-3 inputs) and, with
        ``return_weights``, the weights ``(B, N, T, S)``.

    Example:
        >>> q = keras.random.normal((2, 5, 4, 8))
        >>> out = scaled_dot_product_attention(q, q, q)
        >>> tuple(out.shape)
        (2, 5, 4, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", eq. (1).
    """
    single_head = len(q.shape) == 3
    if single_head:
        q, k, v = (ops.expand_dims(x, 2) for x in (q, k, v))
    if _fused_applies(score, scale, bias, dropout and training, return_weights):
        if mask is not None and len(mask.shape) == 3:
            mask = ops.expand_dims(ops.cast(mask, "bool"), 1)  # (B, 1, T, S)
        if scale is None:
            scale = default_scale(score, q.shape[-1])
        out = ops.dot_product_attention(q, k, v, mask=mask, scale=scale)
        return ops.squeeze(out, 2) if single_head else out
    if _single_query_applies(q, mask, score, scale, bias, dropout and training):
        out, weights = _single_query_attention(q, k, v, mask, score, scale, return_weights)
        if single_head:
            out = ops.squeeze(out, 2)
        return (out, weights) if return_weights else out
    scores = attention_scores(q, k, score, scale, additive_weight)  # (B, N, T, S)
    # The softmax runs in float32 so that bfloat16/float16 training stays stable.
    scores = ops.cast(scores, "float32")
    if bias is not None:
        scores = scores + ops.cast(bias, "float32")
    if mask is not None:
        mask = ops.cast(mask, "bool")
        if len(mask.shape) == 3:
            mask = ops.expand_dims(mask, 1)  # (B, 1, T, S)
        scores = ops.where(mask, scores, mask_value("float32"))
    weights = ops.cast(ops.softmax(scores, axis=-1), v.dtype)
    attended = weights
    if dropout and training:
        attended = random_dropout(weights, dropout, seed=seed)
    out = ops.einsum("bnts,bsnh->btnh", attended, v)  # (B, T, N, Hv)
    if single_head:
        out = ops.squeeze(out, 2)
    return (out, weights) if return_weights else out


def _fused_applies(score, scale, bias, dropout, return_weights):
    """Whether ``keras.ops.dot_product_attention`` computes this attention: on JAX (where it
    reaches the fused kernels of a GPU; TensorFlow has none), for a dot-product score with a
    number for its scale, no bias, no dropout and no weights asked for."""
    return (
        keras.backend.backend() == "jax"
        and score in ("scaled_dot", "dot")
        and (scale is None or isinstance(scale, (int, float)))
        and bias is None
        and not dropout
        and not return_weights
    )


def _single_query_applies(q, mask, score, scale, bias, dropout):
    """Whether :func:`_single_query_attention` computes this attention: one query per row
    (a decoding step), a dot-product score with a number for its scale, no bias, no dropout
    and a mask of the ``(B, T, S)`` contract, if any."""
    return (
        q.shape[1] == 1
        and score in ("scaled_dot", "dot")
        and (scale is None or isinstance(scale, (int, float)))
        and bias is None
        and not dropout
        and (mask is None or len(mask.shape) == 3)
    )


def _single_query_attention(q, k, v, mask, score, scale, return_weights):
    """The attention of one query per row as products and sums over the keys' layout.

    ``q`` is ``(B, 1, N, H)``. Scores, softmax and the weighted sum stay in the ``(B, S, N)``
    layout of the keys, so no transpose or batched matmul runs: at one query those cost more
    than the arithmetic in TensorFlow's graph mode, at every step of a decoding loop.
    Returns the attended values ``(B, 1, N, Hv)`` and the weights ``(B, N, 1, S)`` (None
    unless ``return_weights``).
    """
    if scale is None:
        scale = default_scale(score, q.shape[-1])
    scores = ops.sum(q * k, axis=-1)  # (B, S, N)
    if scale != 1.0:
        scores = scores * ops.cast(scale, scores.dtype)
    scores = ops.cast(scores, "float32")
    if mask is not None:
        mask = ops.expand_dims(ops.cast(mask, "bool")[:, 0, :], 2)  # (B, S, 1)
        scores = ops.where(mask, scores, mask_value("float32"))
    # The softmax over the keys (axis 1), written out: softmax on an inner axis transposes.
    exp = ops.exp(scores - ops.max(scores, axis=1, keepdims=True))
    weights = ops.cast(exp / ops.sum(exp, axis=1, keepdims=True), v.dtype)  # (B, S, N)
    out = ops.sum(ops.expand_dims(weights, 3) * v, axis=1, keepdims=True)  # (B, 1, N, Hv)
    if return_weights:
        return out, ops.expand_dims(ops.transpose(weights, (0, 2, 1)), 2)  # (B, N, 1, S)
    return out, None
