"""ALiBi: attention with linear biases instead of position embeddings."""

import math

import keras
import numpy as np
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention


def alibi_slopes(num_heads):
    """The head-specific slopes ``m`` of ALiBi, as a list of ``num_heads`` floats.

    For ``n`` heads, a power of two, the slopes are the geometric sequence that starts at
    ``2^(-8/n)`` with that same ratio (``1/2, 1/4, ..., 1/256`` for 8 heads). Otherwise, as in
    the paper's reference code, they are the slopes of the closest smaller power of two
    ``p``, followed by every other slope of ``2p`` heads, up to ``n`` in all.
    """
    if num_heads < 1:
        raise ValueError(f"ALiBi needs at least one head; got num_heads={num_heads}.")

    def power_of_two(n):
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))  # 2^(-8/n)
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return power_of_two(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


def alibi_bias(num_heads, query_length, key_length, query_offset=0):
    """The ``(1, N, T, S)`` float32 ALiBi bias ``-m_n * |(t + query_offset) - s|``.

    For causal attention (``s <= t``) this is the paper's ``-m (t - s)``. Keys after the query,
    which only bidirectional attention sees, get the mirror-image penalty ``-m (s - t)``.

    Args:
        num_heads: N.
        query_length: T, an int or scalar int tensor.
        key_length: S, an int or scalar int tensor.
        query_offset: the position of the first query (the cache index when decoding).

    Returns:
        The bias, ``(1, N, T, S)`` float32.
    """
    slopes = ops.convert_to_tensor(np.asarray(alibi_slopes(num_heads), "float32"))  # (N,)
    queries = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")  # (T,)
    keys = ops.arange(key_length, dtype="int32")  # (S,)
    distance = ops.abs(ops.expand_dims(queries, 1) - ops.expand_dims(keys, 0))  # (T, S)
    distance = ops.cast(distance, "float32")
    return -ops.reshape(slopes, (1, num_heads, 1, 1)) * ops.expand_dims(distance, (0, 1))


@keras.saving.register_keras_serializable(package="zoo")
class ALiBiBias(keras.layers.Layer):
    """Adds the ALiBi linear biases to attention scores.

    Args:
        num_heads: N, the number of heads of the scores (one slope per head).
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        scores: attention scores ``(B, N, T, S)``, before the softmax.
        query_offset: int or scalar int tensor, the position of the first query (the cache
            index when decoding incrementally).

    Returns:
        ``scores + bias``, ``(B, N, T, S)``; see :func:`alibi_bias`.

    Example:
        >>> scores = keras.random.normal((2, 8, 5, 5))
        >>> tuple(ALiBiBias(num_heads=8)(scores).shape)
        (2, 8, 5, 5)

    References:
        Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases Enables
        Input Length Extrapolation", section 3.
    """

    def __init__(self, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.supports_masking = True

    def call(self, scores, query_offset=0):
        if isinstance(scores.shape[1], int) and scores.shape[1] != self.num_heads:
            raise ValueError(
                f"{self.name} has num_heads={self.num_heads} but got scores with "
                f"{scores.shape[1]} heads, shape {scores.shape}."
            )
        shape = ops.shape(scores)
        bias = alibi_bias(self.num_heads, shape[2], shape[3], query_offset)  # (1, N, T, S)
        return scores + ops.cast(bias, scores.dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("alibi")
class ALiBiAttention(MultiHeadAttention):
    """Multi-head attention with ALiBi linear biases on the scores; no position embeddings.

    The bias ``-m_n |t - s|`` is added to the scores of head ``n`` (see :func:`alibi_bias`),
    at the absolute query positions, so the KV cache works unchanged. Everything else is
    ``MultiHeadAttention``.

    Args:
        *args, **kwargs: as ``MultiHeadAttention``.

    Call arguments:
        As ``MultiHeadAttention``.

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = ALiBiAttention(num_heads=4, key_dim=4)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases Enables
        Input Length Extrapolation".
    """

    def _score_bias(self, query_length, key_length, offset):
        return alibi_bias(self.num_heads, query_length, key_length, offset)  # (1, N, T, S)
