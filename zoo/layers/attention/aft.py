"""Attention-free token mixing: the Attention Free Transformer's AFT-simple (Zhai et al. 2021)."""

import keras
from keras import ops

from zoo.layers.attention.linear import KernelizedAttention, check_supported_masks, kernel_attention
from zoo.layers.attention.registry import register_attention


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("aft")
class AFTAttention(KernelizedAttention):
    """AFT-simple: a gated, per-feature softmax pooling of the values over the positions.

    Every feature ``f`` of the projected ``Q``, ``K``, ``V`` pools the values with its own
    softmax over the real keys (``s <= t`` with ``use_causal_mask``), gated by the query:

        Y_tf = sigmoid(Q_tf) * sum_s exp(K_sf) V_sf / sum_s exp(K_sf)

    No query-key products, no T x S matrix. It is
    :func:`~zoo.layers.attention.linear.kernel_attention` with each feature a head of size one
    and ``K_sf`` its log-scale, so the causal form shares its chunked prefix sums (relative to
    the running maximum: no overflow, and the future has no say even in rounding). The result
    does not depend on how the features are split into heads.

    Masks: padding (and Keras implicit masks); a query with no real key outputs zeros.
    ``use_causal_mask`` needs ``T == S``. An ``attention_mask``, the KV cache and
    ``return_attention_scores`` (one weight per feature) raise ``ValueError``. ``dropout`` is
    not applied (no attention matrix); a key bias gets no gradient (the softmax absorbs it).

    Args:
        chunk_size: C, the chunk length of the causal computation: memory O(T * C) per
            feature inside the chunks, O((T / C)^2) per feature across them. Smaller than
            linear attention's default, since each feature carries a state of size one.
        *args, **kwargs: as ``MultiHeadAttention``; ``value_dim`` must be None or ``key_dim``
            (the keys weight the values feature by feature), ``score`` ``"scaled_dot"``.

    Call arguments:
        As ``MultiHeadAttention``, without ``attention_mask``, cache and attention scores.

    Returns:
        ``(B, T, output_dim)``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = AFTAttention(num_heads=2, key_dim=8)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Zhai et al. 2021, "An Attention Free Transformer", arXiv:2105.14103: section 3.1
        (AFT-full, of which this is the case ``w = 0``) and section 3.2 (AFT-simple). The
        causal form sums over ``t' <= t`` only, as the paper's autoregressive models do.
    """

    def __init__(self, *args, chunk_size=16, **kwargs):
        super().__init__(*args, chunk_size=chunk_size, **kwargs)
        if self._value_dim != self.key_dim:
            raise ValueError(
                f"{type(self).__name__} weights each value feature by its key feature, so it "
                f"needs value_dim == key_dim (or None); got {self.value_dim} and {self.key_dim}."
            )

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        if return_weights:
            raise ValueError(
                f"{type(self).__name__} ({self.name!r}) has one pooling weight per feature, not "
                "(B, N, T, S) attention weights; call it without `return_attention_scores`."
            )
        check_supported_masks(self, masks, causal=True)
        batch, length = ops.shape(q)[0], ops.shape(q)[1]
        key_length = ops.shape(k)[1]
        features = self.num_heads * self.key_dim  # D'
        k = ops.reshape(k, (batch, key_length, features))  # (B, S, D')
        v = ops.reshape(v, (batch, key_length, features, 1))  # (B, S, D', 1)
        # Each feature is a head of size one: constant features, the key as its log-scale.
        context = kernel_attention(
            ops.ones((batch, length, features, 1), "float32"),
            ops.ones((batch, key_length, features, 1), "float32"),
            v,
            masks.padding,
            masks.causal,
            k,
            self.chunk_size,
        )  # (B, T, D', 1)
        context = ops.reshape(context, ops.shape(q))  # (B, T, N, H)
        return ops.sigmoid(q) * context
