"""Self-attention with relative position representations (Shaw et al. 2018)."""

import math

import keras
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention
from zoo.layers.dropout import dropout
from zoo.layers.masking import mask_value


def relative_position_indices(query_length, key_length, max_relative_position, query_offset=0):
    """The ``(T, S)`` int32 indices ``clip(s - t, -k, k) + k`` into the ``2k + 1`` embeddings.

    ``t`` counts from ``query_offset`` (the cache index when decoding incrementally).
    """
    queries = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")  # (T,)
    keys = ops.arange(key_length, dtype="int32")  # (S,)
    distance = ops.expand_dims(keys, 0) - ops.expand_dims(queries, 1)  # (T, S)
    k = max_relative_position
    return ops.clip(distance, -k, k) + k


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("relative")
class RelativePositionAttention(MultiHeadAttention):
    """Multi-head attention with clipped relative position embeddings on keys and values.

    Between query ``i`` and key ``j`` the layer adds ``a^K_ij = w^K[clip(j - i, k)]`` to the
    key and ``a^V_ij = w^V[clip(j - i, k)]`` to the value (eqs. 3-5 of the paper):

        e_ij = q_i . (k_j + a^K_ij) / sqrt(H)
        z_i  = sum_j softmax_j(e_ij) (v_j + a^V_ij)

    There are ``2k + 1`` embeddings of each kind, of size ``key_dim`` and ``value_dim``, shared
    by all heads as in the paper. Positions are absolute query positions, so the KV cache works
    unchanged.

    Args:
        max_relative_position: k, the largest distance with its own embedding; farther keys
            share the embedding of distance ``k`` (or ``-k``).
        embeddings_initializer: initializer of the relative embeddings.
        *args, **kwargs: as ``MultiHeadAttention``; the score must be ``"scaled_dot"`` or ``"dot"``.

    Call arguments:
        As ``MultiHeadAttention``.

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = RelativePositionAttention(num_heads=4, key_dim=4, max_relative_position=3)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Shaw et al. 2018, "Self-Attention with Relative Position Representations", section 3.
    """

    def __init__(
        self, *args, max_relative_position=16, embeddings_initializer="glorot_uniform", **kwargs
    ):
        super().__init__(*args, **kwargs)
        if self.score not in ("scaled_dot", "dot"):
            raise ValueError(
                f"Relative position attention adds to dot-product scores; score={self.score!r} "
                "is not supported (use 'scaled_dot' or 'dot')."
            )
        if max_relative_position < 1:
            raise ValueError(f"max_relative_position must be >= 1; got {max_relative_position}.")
        self.max_relative_position = max_relative_position
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        size = 2 * self.max_relative_position + 1
        self.relative_key_embeddings = self.add_weight(
            name="relative_key_embeddings",
            shape=(size, self.key_dim),
            initializer=self.embeddings_initializer,
        )
        self.relative_value_embeddings = self.add_weight(
            name="relative_value_embeddings",
            shape=(size, self._value_dim),
            initializer=self.embeddings_initializer,
        )

    def _attend(self, q, k, v, mask, offset, return_weights, training):
        indices = relative_position_indices(
            ops.shape(q)[1], ops.shape(k)[1], self.max_relative_position, offset
        )  # (T, S)
        # The embeddings of each query-key distance, shared by the heads.
        a_key = ops.take(ops.cast(self.relative_key_embeddings, q.dtype), indices, 0)  # (T, S, H)
        a_value = ops.take(ops.cast(self.relative_value_embeddings, v.dtype), indices, 0)

        scores = ops.einsum("btnh,bsnh->bnts", q, k)  # (B, N, T, S)
        scores = scores + ops.einsum("btnh,tsh->bnts", q, a_key)
        # The softmax runs in float32, as in the attention core.
        scores = ops.cast(scores, "float32")
        if self.score == "scaled_dot":
            scores = scores / math.sqrt(self.key_dim)
        if mask is not None:
            mask = ops.expand_dims(ops.cast(mask, "bool"), 1)  # (B, 1, T, S)
            scores = ops.where(mask, scores, mask_value("float32"))
        weights = ops.cast(ops.softmax(scores, axis=-1), v.dtype)  # (B, N, T, S)
        attended = weights
        if self.dropout and training:
            attended = dropout(weights, self.dropout, seed=self.seed_generator)
        out = ops.einsum("bnts,bsnh->btnh", attended, v)  # (B, T, N, Hv)
        out = out + ops.einsum("bnts,tsh->btnh", attended, a_value)
        return (out, weights) if return_weights else out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_relative_position": self.max_relative_position,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
