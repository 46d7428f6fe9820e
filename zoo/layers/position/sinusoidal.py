"""The fixed sinusoidal position encoding of the original Transformer."""

import keras
from keras import ops


def sinusoidal_encoding(length, dim, start_index=0, max_wavelength=10000):
    """The ``(T, D)`` float32 sinusoidal encoding of positions ``start_index .. start_index+T-1``.

    ``PE(pos, 2i) = sin(pos / w^(2i/D))`` and ``PE(pos, 2i+1) = cos(pos / w^(2i/D))`` with
    ``w = max_wavelength``: sines on the even features and cosines on the odd ones,
    interleaved as in the paper.
    """
    positions = ops.arange(length, dtype="int32") + ops.cast(start_index, "int32")
    positions = ops.cast(positions, "float32")  # (T,)
    features = ops.arange(dim, dtype="int32")  # (D,)
    # 2i / D for the features 2i and 2i+1.
    exponent = ops.cast((features // 2) * 2, "float32") / float(dim)
    inverse_wavelength = ops.power(float(max_wavelength), -exponent)  # (D,)
    angles = ops.expand_dims(positions, 1) * ops.expand_dims(inverse_wavelength, 0)  # (T, D)
    is_even = ops.expand_dims(ops.equal(features % 2, 0), 0)  # (1, D)
    return ops.where(is_even, ops.sin(angles), ops.cos(angles))  # (T, D)


@keras.saving.register_keras_serializable(package="zoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The sinusoidal position encoding of Vaswani et al. 2017, with a start offset.

    The layer returns the encoding itself, not its sum with the inputs, so that it can be
    scaled or combined freely: ``x + SinusoidalPositionEncoding()(x)``. It has no weights,
    so it extrapolates to any length.

    Args:
        max_wavelength: the base ``10000`` of the wavelengths ``2 pi .. 2 pi * max_wavelength``.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        inputs: ``(B, T, D)``; only its shape is used.
        start_index: int or scalar int tensor, the position of the first step. Used in
            incremental decoding, where ``inputs`` holds only the new steps.

    Returns:
        The encoding ``(B, T, D)`` of positions ``start_index .. start_index + T - 1``, in the
        layer's compute dtype, the same for every batch row.

    Example:
        >>> x = keras.random.normal((2, 6, 8))
        >>> pe = SinusoidalPositionEncoding()(x)
        >>> tuple(pe.shape)
        (2, 6, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5.
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.supports_masking = True  # the mask of the inputs passes through

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        encoding = sinusoidal_encoding(shape[1], inputs.shape[-1], start_index, self.max_wavelength)
        encoding = ops.cast(encoding, self.compute_dtype)  # (T, D)
        return ops.broadcast_to(ops.expand_dims(encoding, 0), shape)  # (B, T, D)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
