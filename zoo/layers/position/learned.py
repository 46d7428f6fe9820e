"""A trained, absolute position embedding."""

import numbers

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class LearnedPositionEmbedding(keras.layers.Layer):
    """One trained vector per position, up to ``max_length`` positions (BERT, GPT-2).

    The layer returns the position embeddings, not their sum with the inputs:
    ``x + LearnedPositionEmbedding(max_length)(x)``.

    Args:
        max_length: the number of positions that have an embedding. Longer sequences are a
            ``ValueError`` when their length is known statically. With a traced
            ``start_index`` or length that cannot be checked: positions past the end
            reuse the last embedding.
        initializer: initializer of the ``(max_length, D)`` embedding table.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        inputs: ``(B, T, D)``; only its shape is used.
        start_index: int or scalar int tensor, the position of the first step, for
            incremental decoding.

    Returns:
        The embeddings ``(B, T, D)`` of positions ``start_index .. start_index + T - 1``.

    Example:
        >>> x = keras.random.normal((2, 6, 8))
        >>> pe = LearnedPositionEmbedding(max_length=16)(x)
        >>> tuple(pe.shape)
        (2, 6, 8)

    References:
        Gehring et al. 2017, "Convolutional Sequence to Sequence Learning", section 3.1;
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5 (the comparison).
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True  # the mask of the inputs passes through

    def build(self, input_shape):
        self._check_length(input_shape[1])
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def _check_length(self, length, start_index=0):
        if not isinstance(length, int) or not isinstance(start_index, numbers.Integral):
            return
        if start_index + length > self.max_length:
            raise ValueError(
                f"{self.name}: a sequence of length {length} starting at position "
                f"{start_index} needs {start_index + length} positions, but the layer has "
                f"max_length={self.max_length}."
            )

    def call(self, inputs, start_index=0):
        self._check_length(inputs.shape[1], start_index)
        shape = ops.shape(inputs)
        # A gather rather than a slice: JAX traces it with a symbolic T.
        positions = ops.arange(shape[1], dtype="int32") + ops.cast(start_index, "int32")  # (T,)
        positions = ops.minimum(positions, self.max_length - 1)
        embeddings = ops.take(ops.cast(self.embeddings, self.compute_dtype), positions, axis=0)
        return ops.broadcast_to(ops.expand_dims(embeddings, 0), shape)  # (B, T, D)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
