"""The transformer encoder block: self-attention and a feed-forward network, post-LN or pre-LN.

The residual wiring (post-LN or pre-LN) shared with the decoder block is written once, in
``_TransformerBlock``.
"""

import keras

from zoo.layers.attention.registry import get_attention
from zoo.layers.blocks.feed_forward import FeedForward
from zoo.layers.dropout import Dropout
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.masking import implicit_mask

# Arguments that a block gives its attention layers itself; `attention_kwargs` may not set them.
_RESERVED_ATTENTION_KWARGS = (
    "num_heads",
    "key_dim",
    "dropout",
    "fused_qkv",
    "kernel_initializer",
    "bias_initializer",
    "dtype",
    "name",
)


def _check_attention_kwargs(attention_kwargs, argument):
    """A copy of ``attention_kwargs`` (None gives {}); raises on arguments the block sets."""
    attention_kwargs = dict(attention_kwargs or {})
    reserved = sorted(set(attention_kwargs) & set(_RESERVED_ATTENTION_KWARGS))
    if reserved:
        raise ValueError(
            f"`{argument}` may not set {reserved}: the block sets them itself "
            "(use the block's own arguments: num_heads, key_dim, attention_dropout, ...)."
        )
    return attention_kwargs


def _as_tuple(outputs):
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


class _TransformerBlock(keras.layers.Layer):
    """What the encoder and decoder blocks share: arguments, sublayers, residual wiring."""

    def __init__(
        self,
        num_heads,
        ff_dim,
        key_dim=None,
        dropout=0.0,
        attention_dropout=0.0,
        ff_dropout=0.0,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        attention="mha",
        attention_kwargs=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.ff_dim = ff_dim
        self.key_dim = key_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.ff_dropout = ff_dropout
        self.activation = activation
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention = attention
        self.attention_kwargs = None if attention_kwargs is None else dict(attention_kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        # Fail here, not at the first call, on an unknown variant or a reserved argument.
        self._attention_cls = get_attention(attention)
        self._attention_kwargs = _check_attention_kwargs(attention_kwargs, "attention_kwargs")

        self.self_attention_layer = None  # made in build(): key_dim may depend on D
        self.self_attention_norm = self._layer_norm("self_attention_norm")
        self.self_attention_residual_dropout = self._dropout("self_attention_residual_dropout")
        self.feed_forward = FeedForward(
            ff_dim,
            activation=activation,
            dropout=ff_dropout,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        self.feed_forward_norm = self._layer_norm("feed_forward_norm")
        self.feed_forward_residual_dropout = self._dropout("feed_forward_residual_dropout")

    # ------------------------------------------------------------------ sublayers
    def _layer_norm(self, name):
        return LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _dropout(self, name):
        return Dropout(self.dropout, dtype=self.dtype_policy, name=name)

    def _make_attention(self, attention_cls, attention_kwargs, model_dim, fused_qkv, name):
        key_dim = self.key_dim
        if key_dim is None:
            if model_dim % self.num_heads:
                raise ValueError(
                    f"The model size {model_dim} is not divisible by num_heads="
                    f"{self.num_heads}; pass key_dim explicitly."
                )
            key_dim = model_dim // self.num_heads
        return attention_cls(
            num_heads=self.num_heads,
            key_dim=key_dim,
            dropout=self.attention_dropout,
            fused_qkv=fused_qkv,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
            **attention_kwargs,
        )

    def _build_common(self, x_shape):
        self.self_attention_layer = self._make_attention(
            self._attention_cls, self._attention_kwargs, x_shape[-1], True, "self_attention"
        )
        self.self_attention_layer.build(x_shape)
        for layer in (
            self.self_attention_norm,
            self.self_attention_residual_dropout,
            self.feed_forward,
            self.feed_forward_norm,
            self.feed_forward_residual_dropout,
        ):
            layer.build(x_shape)

    # ------------------------------------------------------------------ residual wiring
    def _residual(self, x, sublayer, norm, dropout, training):
        """``sublayer`` in its residual connection: post-LN or pre-LN, written once.

        post-LN: ``LN(x + dropout(f(x)))``; pre-LN: ``x + dropout(f(LN(x)))``.
        Returns the new ``x`` and the sublayer's further outputs (weights, cache), a tuple.
        """
        h = norm(x) if self.normalize_first else x  # (B, T, D)
        outputs = _as_tuple(sublayer(h))
        x = x + dropout(outputs[0], training=training)  # (B, T, D)
        if not self.normalize_first:
            x = norm(x)
        return x, outputs[1:]

    def _self_attention_sublayer(self, x, training, **attention_kwargs):
        """Self-attention in its residual connection; returns ``x`` and its further outputs."""
        return self._residual(
            x,
            lambda h: self.self_attention_layer(h, training=training, **attention_kwargs),
            self.self_attention_norm,
            self.self_attention_residual_dropout,
            training,
        )

    def _feed_forward_sublayer(self, x, training):
        x, _ = self._residual(
            x,
            lambda h: self.feed_forward(h, training=training),
            self.feed_forward_norm,
            self.feed_forward_residual_dropout,
            training,
        )
        return x  # (B, T, D)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "ff_dim": self.ff_dim,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "ff_dropout": self.ff_dropout,
                "activation": self.activation,
                "normalize_first": self.normalize_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention": self.attention,
                "attention_kwargs": (
                    None if self.attention_kwargs is None else dict(self.attention_kwargs)
                ),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoderBlock(_TransformerBlock):
    """One transformer encoder block: self-attention, then a position-wise feed-forward net.

    Each sublayer ``f`` sits in a residual connection with dropout and a layer normalization:
    post-LN ``x = LN(x + dropout(f(x)))`` (Vaswani et al.), or with ``normalize_first`` pre-LN
    ``x = x + dropout(f(LN(x)))`` (Xiong et al.; a stack then needs one final
    ``LayerNormalization``, which the model adds). The self-attention is
    ``get_attention(attention)(num_heads=..., key_dim=..., dropout=attention_dropout,
    fused_qkv=True, name="self_attention", **attention_kwargs)``; no variant is special-cased.

    Args:
        num_heads: N, the number of attention heads.
        ff_dim: the inner size of the feed-forward network.
        key_dim: H, the size of each attention head; defaults to ``D // num_heads`` where
            D is the input's last dimension.
        dropout: dropout rate on each sublayer's output, before the residual sum.
        attention_dropout: dropout rate on the attention weights.
        ff_dropout: dropout rate on the inner activations of the feed-forward network.
        activation: the feed-forward activation: ``"relu"``, ``"gelu"`` or one of the GLU
            variants ``"glu"``, ``"reglu"``, ``"geglu"``, ``"swiglu"`` (see ``FeedForward``).
        normalize_first: pre-LN when True, post-LN (the default) when False.
        layer_norm_epsilon: epsilon of the layer normalizations.
        attention: the registered name of the self-attention variant (default ``"mha"``).
        attention_kwargs: extra constructor arguments of that variant, for example
            ``{"score": "cosine"}``. It may not set what the block sets itself (num_heads,
            key_dim, dropout, fused_qkv, initializers, dtype, name).
        kernel_initializer: initializer of every projection kernel.
        bias_initializer: initializer of every projection bias.

    Call arguments:
        x: ``(B, T, D)``. A Keras implicit mask on it is used as the padding mask.
        padding_mask: ``(B, T)`` boolean, True for real tokens.
        attention_mask: ``(B, T, T)`` boolean, True where query t may attend key s.
        use_causal_mask: mask out keys after each query.
        return_attention_scores: also return the attention weights.
        training: whether dropout is active.

    Returns:
        ``(B, T, D)``, or ``(outputs, weights)`` with the weights ``(B, N, T, T)`` when
        ``return_attention_scores``. Outputs at padded positions are meaningless. The
        implicit mask of ``x`` is passed on to the output.

    Example:
        >>> block = TransformerEncoderBlock(num_heads=2, ff_dim=32, normalize_first=True)
        >>> x = keras.random.normal((2, 6, 16))
        >>> tuple(block(x, padding_mask=keras.ops.ones((2, 6), "bool")).shape)
        (2, 6, 16)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.1 (post-LN).
        Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture" (pre-LN).
    """

    def build(self, input_shape):
        self._build_common(input_shape)
        self.built = True

    def call(
        self,
        x,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        if padding_mask is None:
            padding_mask = implicit_mask(x)  # (B, T) or None
        x, weights = self._self_attention_sublayer(
            x,
            training,
            padding_mask=padding_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
        )
        x = self._feed_forward_sublayer(x, training)  # (B, T, D)
        if return_attention_scores:
            return x, weights[0]  # (B, T, D), (B, N, T, T)
        return x
