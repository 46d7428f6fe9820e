"""Rotary position embedding (RoFormer) and the attention that rotates its queries and keys."""

import keras
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention


def rotate(x, start_index=0, max_wavelength=10000):
    """Rotate the feature pairs ``(x_2i, x_2i+1)`` of ``x`` by ``pos * theta_i`` (RoFormer eq. 34).

    Args:
        x: ``(B, T, N, H)`` or ``(B, T, D)``, with an even last dimension.
        start_index: int or scalar int tensor, the position of ``x[:, 0]``.
        max_wavelength: the base of ``theta_i = max_wavelength^(-2i/H)``.

    Returns:
        The rotated ``x``, same shape and dtype. The rotation runs in float32.
    """
    dim = x.shape[-1]
    if dim is None or dim % 2:
        raise ValueError(
            f"Rotary embeddings rotate pairs of features; the last dimension is {dim}."
        )
    dtype = x.dtype
    x = ops.cast(x, "float32")
    positions = ops.arange(ops.shape(x)[1], dtype="int32") + ops.cast(start_index, "int32")
    positions = ops.cast(positions, "float32")  # (T,)
    theta = ops.power(float(max_wavelength), -ops.arange(0, dim, 2, dtype="float32") / dim)
    angles = ops.expand_dims(positions, 1) * ops.expand_dims(theta, 0)  # (T, H/2)
    # Broadcast over the batch, and over the heads for rank-4 inputs.
    angles = ops.reshape(angles, (1, -1) + (1,) * (len(x.shape) - 3) + (dim // 2,))
    cos, sin = ops.cos(angles), ops.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., H/2) each
    rotated = ops.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)  # (..., H/2, 2)
    return ops.cast(ops.reshape(rotated, ops.shape(x)), dtype)


@keras.saving.register_keras_serializable(package="zoo")
class RotaryEmbedding(keras.layers.Layer):
    """Rotary position embedding: rotates feature pairs by an angle proportional to the position.

    After the rotation, the dot product of a query at position ``m`` and a key at position
    ``n`` depends on the positions only through ``m - n``, which is how RoPE makes attention
    relative. Pairs are the interleaved features ``(x_2i, x_2i+1)``, as in the paper (GPT-NeoX
    and keras-hub pair the two halves instead; the two are equal up to a permutation of the
    features).

    Args:
        max_wavelength: the base ``10000`` of ``theta_i = max_wavelength^(-2i/H)``.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        inputs: ``(B, T, N, H)`` (per head) or ``(B, T, D)``, with an even last dimension.
        start_index: int or scalar int tensor, the position of the first step, for
            incremental decoding.

    Returns:
        The rotated inputs, same shape.

    Example:
        >>> q = keras.random.normal((2, 6, 4, 8))
        >>> tuple(RotaryEmbedding()(q).shape)
        (2, 6, 4, 8)

    References:
        Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding",
        section 3.4.2, eq. (34).
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.supports_masking = True

    def call(self, inputs, start_index=0):
        return rotate(inputs, start_index, self.max_wavelength)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("rotary")
class RotaryAttention(MultiHeadAttention):
    """Multi-head attention with rotary position embeddings on the queries and keys.

    Queries and keys are rotated per head after their projections, at their absolute
    positions (``cache_index`` onwards when decoding with a KV cache, where the cache holds
    rotated keys). Values are not rotated. Everything else is ``MultiHeadAttention``.

    Args:
        max_wavelength: the base of the rotation frequencies, ``10000``.
        *args, **kwargs: as ``MultiHeadAttention``; ``key_dim`` must be even.

    Call arguments:
        As ``MultiHeadAttention``.

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = RotaryAttention(num_heads=4, key_dim=4)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding".
    """

    def __init__(self, *args, max_wavelength=10000, **kwargs):
        super().__init__(*args, **kwargs)
        if self.key_dim % 2:
            raise ValueError(
                f"Rotary attention rotates pairs of features; key_dim={self.key_dim} is odd."
            )
        self.max_wavelength = max_wavelength
        self.rotary = RotaryEmbedding(max_wavelength, dtype=self.dtype_policy, name="rotary")

    def _transform_qk(self, q, k, offset):
        q = self.rotary(q, start_index=offset)  # (B, T, N, H)
        if k is not None:
            k = self.rotary(k, start_index=offset)  # (B, S, N, H)
        return q, k

    def compute_cache(self, value, key=None):
        """Precompute cross-attention keys (rotated at positions 0..S-1) and values."""
        keys, values = super().compute_cache(value, key)  # (B, S, N, H) each
        return self.rotary(keys, start_index=0), values

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
