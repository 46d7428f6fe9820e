"""Which encoder layer a decoder block reads: a learned mix of all of them, or one chosen."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class LayerMix(keras.layers.Layer):
    """A learned softmax-weighted sum of a stack's layer outputs, or one of them as it is.

    Transparent attention (Bapna et al. 2018) lets each decoder block attend over its own mix
    of the encoder's layers, the embeddings included, instead of the last layer only:
    ``sum_l softmax(w)_l * inputs[l]``, with ``w`` learned and zero at the start (an even mix).
    With ``index`` the layer has no weights and passes ``inputs[index]`` through: a decoder
    block that reads one chosen layer.

    Args:
        num_inputs: L, how many layer outputs it reads (at least 1).
        index: None to learn the mix, or the position in ``inputs`` of the one it passes
            through (``0 <= index < num_inputs``).

    Call arguments:
        inputs: a list of L tensors of one shape ``(B, S, D)``. Keras implicit masks on them
            (the padding of one source) pass through: the first one is the output's.

    Returns:
        ``(B, S, D)``.

    Example:
        >>> outputs = [keras.ops.ones((2, 3, 4)) * i for i in range(3)]
        >>> float(LayerMix(3)(outputs)[0, 0, 0])  # an even mix of 0, 1 and 2
        1.0
        >>> float(LayerMix(3, index=2)(outputs)[0, 0, 0])
        2.0

    References:
        Bapna et al. 2018, "Training Deeper Neural Machine Translation Models with Transparent
        Attention".
    """

    def __init__(self, num_inputs, index=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_inputs, int) or num_inputs < 1:
            raise ValueError(f"num_inputs must be a positive int, got {num_inputs!r}.")
        if index is not None and not (isinstance(index, int) and 0 <= index < num_inputs):
            raise ValueError(f"index must be None or an int in [0, {num_inputs}), got {index!r}.")
        self.num_inputs = num_inputs
        self.index = index
        self.supports_masking = True

    def build(self, input_shape):
        if self.index is None:
            self.mix_logits = self.add_weight(
                shape=(self.num_inputs,), initializer="zeros", name="mix_logits"
            )
        self.built = True

    def call(self, inputs):
        if len(inputs) != self.num_inputs:
            raise ValueError(f"{self.name} mixes {self.num_inputs} inputs, got {len(inputs)}.")
        if self.index is not None:
            return inputs[self.index]
        stacked = ops.stack(inputs, axis=0)  # (L, B, S, D)
        weights = ops.cast(ops.softmax(self.mix_logits), stacked.dtype)  # (L,)
        return ops.tensordot(weights, stacked, axes=1)  # (B, S, D)

    def compute_mask(self, inputs, mask=None):
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        return {**super().get_config(), "num_inputs": self.num_inputs, "index": self.index}
