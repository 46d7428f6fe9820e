"""Dropout whose random keep mask is a counter-based hash: cheap under XLA, on every backend.

The mask follows ``keras.random.dropout`` (a Bernoulli(1 - rate) keep, kept values scaled by
``1 / (1 - rate)``, a new seed per call from a ``SeedGenerator``, so runs resume reproducibly);
only the bits differ: a hash of each element's index (MurmurHash3's ``fmix32``), the
counter-based idea of Salmon et al. 2011. Why: TensorFlow's stateless random ops are slow under
XLA on a CPU when the seed is only known at run time; the hash is cheaper with and without XLA
(``benchmarks/dropout.py``, RESULTS.md).
"""

import math

import keras
import numpy as np
from keras import ops
from keras.src.random.seed_generator import draw_seed  # Keras's own seed rules (see dropout)

__all__ = ["Dropout", "dropout", "dropout_bits", "fmix32"]

_GOLDEN = np.uint32(0x9E3779B9)  # 2**32 / golden ratio: spreads consecutive seeds apart


def fmix32(h):
    """MurmurHash3's 32-bit finalizer: a bijection of uint32 whose every output bit depends on
    every input bit (``h`` a uint32 tensor)."""
    h = ops.bitwise_xor(h, ops.right_shift(h, np.uint32(16)))
    h = ops.multiply(h, np.uint32(0x85EBCA6B))
    h = ops.bitwise_xor(h, ops.right_shift(h, np.uint32(13)))
    h = ops.multiply(h, np.uint32(0xC2B2AE35))
    return ops.bitwise_xor(h, ops.right_shift(h, np.uint32(16)))


def dropout_bits(shape, seed):
    """uint32 random bits of ``shape`` (ints, or a shape tensor's entries) from a seed pair.

    Element ``i`` (row-major) gets ``fmix32((i * G + k0) ^ k1)``, with ``G`` the golden-ratio
    constant and the keys ``k0, k1`` hashed from ``seed`` (2 integers): the two keys make the
    streams of two seeds unrelated, not shifted copies. One round of fmix32 only: a second
    made it slower than Keras's dropout without XLA.
    """
    state = ops.cast(seed, "uint32")
    k0 = fmix32(ops.bitwise_xor(state[0], fmix32(state[1] + _GOLDEN)))
    k1 = fmix32(k0 + _GOLDEN)
    index = ops.cast(ops.arange(math.prod(shape), dtype="int32"), "uint32")  # uint32 ranges fail in XLA
    bits = fmix32(ops.bitwise_xor(index * _GOLDEN + k0, k1))
    return ops.reshape(bits, shape)


def dropout(inputs, rate, seed=None, noise_shape=None):
    """``keras.random.dropout`` with the hashed keep mask of this module.

    Args:
        inputs: a float tensor.
        rate: the fraction dropped, in [0, 1).
        seed: a ``keras.random.SeedGenerator`` (a new seed per call), an int (the same mask
            every call) or None (Keras's global generator), as ``keras.random.dropout``.
        noise_shape: the shape of the mask, broadcast over ``inputs`` (None: ``inputs``' own);
            None entries take ``inputs``' size.

    Returns:
        ``inputs`` with each element (or mask cell) dropped with probability ``rate`` and the
        rest scaled by ``1 / (1 - rate)``.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be in [0, 1), got {rate}.")
    if rate == 0.0:
        return inputs
    shape = ops.shape(inputs)
    if noise_shape is not None:
        shape = tuple(shape[i] if d is None else d for i, d in enumerate(noise_shape))
    bits = dropout_bits(shape, draw_seed(seed))
    # P(bits >= threshold) = 1 - threshold / 2**32, within 2**-32 of 1 - rate (rate < 1, so
    # the threshold fits in uint32).
    keep = ops.greater_equal(bits, np.uint32(int(rate * 2**32)))
    scaled = inputs * ops.cast(1.0 / (1.0 - rate), inputs.dtype)
    return ops.where(keep, scaled, ops.zeros_like(scaled))


@keras.saving.register_keras_serializable(package="zoo")
class Dropout(keras.layers.Dropout):
    """``keras.layers.Dropout`` drawing its mask with :func:`dropout` (same arguments, same
    seed generator and weights, so models built with either load the other's files).

    Example:
        >>> layer = Dropout(0.5, seed=1)
        >>> x = keras.ops.ones((2, 4))
        >>> bool(keras.ops.all(layer(x) == x))  # inference: the identity
        True
        >>> sorted(set(keras.ops.convert_to_numpy(layer(x, training=True)).ravel().tolist()))
        [0.0, 2.0]
    """

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return dropout(inputs, self.rate, seed=self.seed_generator,
                           noise_shape=self.noise_shape)
        return inputs
