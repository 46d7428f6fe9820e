"""Linformer attention (Wang et al. 2020): keys and values projected along the length axis."""

import keras
from keras import ops

from zoo.layers.attention.linear import check_supported_masks
from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("linformer")
class LinformerAttention(MultiHeadAttention):
    """Linformer attention: attend over k length-projections of the keys and values.

    Each head's keys and values ``(S, H)`` are projected along the length by learned ``(max_length,
    k)`` matrices ``E`` and ``F`` (first ``S`` rows used; shared by the heads, ``F = E`` with
    ``share_kv_projection``), and every query attends the ``k`` projected keys: O(T * k).

    Masks: padded keys and values are zeroed before the projection, so real positions never
    depend on padding (but a padded batch's projected keys differ from the unpadded sequence's).
    ``use_causal_mask`` (the projection mixes the future in) and an ``attention_mask`` raise
    ``ValueError``. No KV cache. Cross attention works, with ``S <= max_length``.

    Args:
        max_length: the longest key sequence; the rows of ``E`` and ``F``.
        projected_length: k, the number of projected keys and values.
        share_kv_projection: use one matrix for the keys and the values (``F = E``).
        projection_initializer: initializer of ``E`` and ``F``.
        *args, **kwargs: as ``MultiHeadAttention`` (``dropout`` on the ``(T, k)`` weights).

    Call arguments:
        As ``MultiHeadAttention``. With ``return_attention_scores`` the weights are
        the ``(B, N, T, S)`` matrix ``W`` with ``output = W V``, i.e. ``P F[:S]^T`` (padded
        keys' columns zero) for the ``(T, k)`` softmax weights ``P``. Its rows need not sum to
        one, and it may be negative. It is made only when asked.

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = LinformerAttention(
        ...     num_heads=4, key_dim=4, max_length=8, projected_length=3)
        >>> tuple(attention(x).shape)
        (2, 6, 16)

    References:
        Wang et al. 2020, "Linformer: Self-Attention with Linear Complexity", section 4
        (eq. 7) and 4.1 (parameter sharing).
    """

    supports_cache = False

    def __init__(
        self,
        *args,
        max_length=512,
        projected_length=128,
        share_kv_projection=False,
        projection_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if int(max_length) < 1 or int(projected_length) < 1:
            raise ValueError(
                "max_length and projected_length must be >= 1; got "
                f"{max_length} and {projected_length}."
            )
        self.max_length = max_length
        self.projected_length = projected_length
        self.share_kv_projection = share_kv_projection
        self.projection_initializer = keras.initializers.get(projection_initializer)

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        shape = (self.max_length, self.projected_length)
        self.key_projection = self.add_weight(
            name="key_projection", shape=shape, initializer=self.projection_initializer
        )
        self.value_projection = self.key_projection
        if not self.share_kv_projection:
            self.value_projection = self.add_weight(
                name="value_projection", shape=shape, initializer=self.projection_initializer
            )

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        check_supported_masks(self, masks, causal=False)
        length = k.shape[1]
        if length is not None and length > self.max_length:
            raise ValueError(
                f"{self.name!r} projects at most max_length={self.max_length} keys; got {length}."
            )
        length = ops.shape(k)[1]
        e = ops.cast(self.key_projection[:length], k.dtype)  # (S, P)
        f = ops.cast(self.value_projection[:length], v.dtype)  # (S, P)
        if masks.padding is not None:
            real = ops.cast(masks.padding, k.dtype)[:, :, None, None]  # (B, S, 1, 1)
            k, v = k * real, v * ops.cast(real, v.dtype)
        k = ops.einsum("bsnh,sp->bpnh", k, e)  # (B, P, N, H), P = projected_length
        v = ops.einsum("bsnh,sp->bpnh", v, f)  # (B, P, N, H), P = projected_length
        result = self._attend(q, k, v, None, masks.query_offset, return_weights, training)
        if not return_weights:
            return result
        out, weights = result  # weights (B, N, T, P)
        weights = ops.einsum("bntp,sp->bnts", weights, f)  # (B, N, T, S)
        if masks.padding is not None:
            weights = weights * ops.cast(masks.padding, weights.dtype)[:, None, None, :]
        return out, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "projected_length": self.projected_length,
                "share_kv_projection": self.share_kv_projection,
                "projection_initializer": keras.initializers.serialize(
                    self.projection_initializer
                ),
            }
        )
        return config
