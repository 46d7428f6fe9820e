"""Layer normalization in fewer graph ops than Keras's: the same weights, the same numbers.

Why: a served translator's plain signatures pay a cost per op at every decoding step, and layer
norms are a large share of a step's ops (``benchmarks/studies/serving_profile.py``,
RESULTS.md). This computes ``(x - mean) * rsqrt(var + eps) * gamma + beta`` without Keras's
extra moments and reshapes. It keeps Keras's class name, which names a functional model's
weights in a ``.weights.h5`` file, so checkpoints load between the two layers both ways.
"""

import keras
from keras import ops

__all__ = ["LayerNormalization"]


@keras.saving.register_keras_serializable(package="zoo")
class LayerNormalization(keras.layers.LayerNormalization):
    """``keras.layers.LayerNormalization`` over the last axis, in fewer ops (same arguments,
    weights and outputs to float32 tolerance, so models built with either load the other's
    weights files). Other axes and ``rms_scaling`` go to Keras's own.

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
        >>> ours = LayerNormalization(epsilon=1e-5)
        >>> theirs = keras.layers.LayerNormalization(epsilon=1e-5)
        >>> bool(np.allclose(ours(x), theirs(x), atol=1e-5))
        True
    """

    def call(self, inputs):
        rank = len(inputs.shape)
        if self.rms_scaling or [axis % rank for axis in self.axis] != [rank - 1]:
            return super().call(inputs)
        # Statistics in float32 at least, as Keras computes them under mixed precision.
        dtype = "float32" if keras.backend.standardize_dtype(inputs.dtype) in (
            "float16", "bfloat16") else inputs.dtype  # fmt: skip
        x = ops.cast(inputs, dtype)
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
        outputs = centered * ops.rsqrt(variance + self.epsilon)
        if self.scale:
            outputs = outputs * ops.cast(self.gamma, dtype)
        if self.center:
            outputs = outputs + ops.cast(self.beta, dtype)
        return ops.cast(outputs, self.compute_dtype)
