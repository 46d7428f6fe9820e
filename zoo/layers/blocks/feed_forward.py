"""The position-wise feed-forward network of a transformer block, with the GLU variants."""

import keras
from keras import ops

from zoo.layers.dropout import Dropout
from zoo.layers.shapes import leading_axes

# The plain activations: FFN(x) = act(x W1 + b1) W2 + b2.
_PLAIN = ("relu", "gelu")
# The gated variants of Shazeer 2020: FFN(x) = (gate(x W + b) * (x V + c)) W2 + b2.
_GATED = ("glu", "reglu", "geglu", "swiglu")
ACTIVATIONS = _PLAIN + _GATED


def _activate(name, x):
    """The activation ``name`` of the plain FFN, or the gate of a GLU variant."""
    if name in ("relu", "reglu"):
        return ops.relu(x)
    if name in ("gelu", "geglu"):
        return ops.gelu(x, approximate=False)
    if name == "glu":
        return ops.sigmoid(x)
    return ops.silu(x)  # swiglu: Swish with beta = 1


@keras.saving.register_keras_serializable(package="zoo")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network: two projections around an activation or a gate.

    With a plain activation (``relu``, ``gelu``) this is ``act(x W1 + b1) W2 + b2`` (Vaswani et
    al.); with a GLU variant (``glu``, ``reglu``, ``geglu``, ``swiglu``) it is
    ``(gate(x W + b) * (x V + c)) W2 + b2`` (Shazeer 2020), ``W`` and ``V`` one fused ``Dense``
    of ``2 * hidden_dim`` units, gate half first. GELU is the exact (erf) GELU. Positions are
    transformed independently, so padding needs no mask; the input's implicit mask is passed on.

    Args:
        hidden_dim: the inner size (of each half, for the GLU variants).
        activation: ``"relu"`` (default), ``"gelu"``, ``"glu"``, ``"reglu"``, ``"geglu"``
            or ``"swiglu"``.
        dropout: dropout rate on the inner activations.
        use_bias: whether the projections have biases.
        output_dim: size of the output; defaults to the input's last dimension.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.

    Call arguments:
        inputs: ``(B, T, D)``.
        training: whether dropout is active.

    Returns:
        ``(B, T, output_dim)``.

    Example:
        >>> ffn = FeedForward(hidden_dim=32, activation="swiglu")
        >>> tuple(ffn(keras.random.normal((2, 6, 16))).shape)
        (2, 6, 16)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.3.
        Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202.
    """

    def __init__(
        self,
        hidden_dim,
        activation="relu",
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown feed-forward activation {activation!r}; expected one of {ACTIVATIONS}."
            )
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.dropout = dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.gated = activation in _GATED

        self.inner_dense = self._dense(2 * hidden_dim if self.gated else hidden_dim, "inner")
        self.inner_dropout = Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.output_dense = None  # made in build(), once the input size is known

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, input_shape):
        self.inner_dense.build(input_shape)
        inner_shape = tuple(input_shape[:-1]) + (self.hidden_dim,)
        self.inner_dropout.build(inner_shape)
        self.output_dense = self._dense(self.output_dim or input_shape[-1], "output")
        self.output_dense.build(inner_shape)
        self.built = True

    def call(self, inputs, training=None):
        # The denses run on (B*T, D): Keras's Dense on rank 3 is a tensordot, a dozen shape
        # ops in TensorFlow's graph mode.
        leading = leading_axes(inputs)  # (B, T)
        h = self.inner_dense(ops.reshape(inputs, (-1, inputs.shape[-1])))  # (B*T, F|2F)
        if self.gated:
            gate, linear = h[..., : self.hidden_dim], h[..., self.hidden_dim :]  # (B, T, F) each
            h = _activate(self.activation, gate) * linear
        else:
            h = _activate(self.activation, h)
        h = self.inner_dropout(h, training=training)  # (B*T, F)
        h = self.output_dense(h)  # (B*T, output_dim)
        return ops.reshape(h, leading + (h.shape[-1],))  # (B, T, output_dim)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
