"""Token plus position embedding, with the tied output projection."""

import math
import numbers

import keras
from keras import ops

from zoo.layers.dropout import Dropout
from zoo.layers.position.learned import LearnedPositionEmbedding
from zoo.layers.position.sinusoidal import SinusoidalPositionEncoding
from zoo.layers.shapes import leading_axes

POSITIONS = ("sinusoidal", "learned", None)


@keras.saving.register_keras_serializable(package="zoo")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embedding, scaled by ``sqrt(embed_dim)``, plus a position encoding; and its transpose.

    Called on token ids, the layer embeds them. Called with ``reverse=True`` on hidden states,
    it multiplies them by the transposed token embedding matrix and returns logits: the
    output projection tied to the input embedding. Calling the same layer twice in a
    functional model shares one matrix between the two.

    Args:
        vocab_size: V, the number of tokens.
        embed_dim: D, the size of the embeddings.
        max_length: the number of positions of ``position="learned"`` (required there).
            With ``"sinusoidal"`` it is only checked: longer (static) lengths are a
            ``ValueError``.
        position: ``"sinusoidal"`` (Vaswani et al. 2017), ``"learned"`` or None (no position
            information, for models with rotary, ALiBi or relative attention).
        scale_embeddings: multiply the token embeddings by ``sqrt(embed_dim)`` before adding
            the positions, as in the paper.
        mask_zero: token id 0 is padding: the output carries the Keras implicit mask
            ``token_ids != 0``, which the zoo attention layers honour.
        dropout: dropout rate on the sum (the paper's ``P_drop``).
        embeddings_initializer: initializer of the ``(V, D)`` token matrix. Defaults to
            ``RandomNormal(stddev=embed_dim ** -0.5)``, so that the scaled embeddings have
            unit variance and the tied logits start small.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        token_ids: ``(B, T)`` integer ids; with ``reverse=True``, hidden states ``(B, T, D)``.
        start_index: int or scalar int tensor, the position of the first token, for
            incremental decoding.
        reverse: return the tied-projection logits of hidden states instead of embeddings.
        tokens_only: return the scaled token embeddings alone: no positions, no dropout.
        token_embeddings: optional ``(B, T, D)`` vectors that stand for the scaled token
            embeddings: the positions and dropout are added to them, and ``token_ids`` give
            only the length and the mask (a decoder whose input is not its tokens).
        training: whether dropout is active.

    Returns:
        Embeddings ``(B, T, D)``, or logits ``(B, T, V)`` with ``reverse=True``. A Keras
        implicit mask ``token_ids != 0`` comes with the embeddings when ``mask_zero``; the
        logits keep the mask of the hidden states.

    Example:
        >>> embedding = TokenAndPositionEmbedding(vocab_size=50, embed_dim=8, mask_zero=True)
        >>> ids = keras.ops.convert_to_tensor([[5, 7, 9, 0]])
        >>> hidden = embedding(ids)
        >>> logits = embedding(hidden, reverse=True)
        >>> tuple(hidden.shape), tuple(logits.shape)
        ((1, 4, 8), (1, 4, 50))

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.4 and 3.5;
        Press & Wolf 2017, "Using the Output Embedding to Improve Language Models".
    """

    def __init__(
        self,
        vocab_size,
        embed_dim,
        max_length=None,
        position="sinusoidal",
        scale_embeddings=True,
        mask_zero=False,
        dropout=0.0,
        embeddings_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if position not in POSITIONS:
            raise ValueError(f"Unknown position {position!r}; expected one of {POSITIONS}.")
        if position == "learned" and max_length is None:
            raise ValueError("position='learned' needs `max_length`, the number of positions.")
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.max_length = max_length
        self.position = position
        self.scale_embeddings = scale_embeddings
        self.mask_zero = mask_zero
        self.dropout = dropout
        self.embeddings_initializer = embeddings_initializer
        if embeddings_initializer is not None:
            self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        initializer = self.embeddings_initializer or keras.initializers.RandomNormal(
            stddev=embed_dim**-0.5
        )
        self.token_embedding = keras.layers.Embedding(
            vocab_size,
            embed_dim,
            embeddings_initializer=initializer,
            mask_zero=mask_zero,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        if position == "sinusoidal":
            self.position_embedding = SinusoidalPositionEncoding(
                dtype=self.dtype_policy, name="position_embedding"
            )
        elif position == "learned":
            self.position_embedding = LearnedPositionEmbedding(
                max_length, dtype=self.dtype_policy, name="position_embedding"
            )
        else:
            self.position_embedding = None
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        self.token_embedding.build()
        if self.position_embedding is not None:
            self.position_embedding.build((None, None, self.embed_dim))
        self.built = True

    @property
    def embeddings(self):
        """The ``(V, D)`` token matrix, shared by the embedding and the output projection."""
        return self.token_embedding.embeddings

    def call(
        self,
        token_ids,
        start_index=0,
        reverse=False,
        tokens_only=False,
        token_embeddings=None,
        training=None,
    ):
        if reverse:
            hidden = token_ids  # (B, T, D)
            # One plain matmul on (B*T, D): on rank 3 TensorFlow broadcasts the matrix.
            flat = ops.reshape(hidden, (-1, ops.shape(hidden)[-1]))
            if self.token_embedding.quantization_mode == "int8":
                logits = self._int8_logits(flat)
            else:
                matrix = ops.cast(self.token_embedding.embeddings, hidden.dtype)  # (V, D)
                logits = ops.einsum("ad,vd->av", flat, matrix)  # (B*T, V)
            return ops.reshape(logits, leading_axes(hidden) + (self.vocab_size,))  # (B, T, V)
        length = token_ids.shape[1]
        static = isinstance(length, int) and isinstance(start_index, numbers.Integral)
        if self.max_length is not None and static:
            if start_index + length > self.max_length:
                raise ValueError(
                    f"{self.name}: {length} tokens starting at position {start_index} need "
                    f"{start_index + length} positions, but max_length={self.max_length}."
                )
        if token_embeddings is None:
            x = self.token_embedding(token_ids)  # (B, T, D)
            if self.scale_embeddings:
                x = x * ops.cast(math.sqrt(self.embed_dim), x.dtype)
        else:
            x = ops.cast(token_embeddings, self.compute_dtype)  # (B, T, D)
        if tokens_only:
            return x
        if self.position_embedding is not None:
            x = x + self.position_embedding(x, start_index=start_index)
        return self.dropout_layer(x, training=training)

    def _int8_logits(self, flat):
        """The tied projection of ``flat`` (A, D) on a table that ``quantize("int8")`` made
        int8, with its scale per token (Keras's: the table is ``int8 / scale``): the hidden
        states quantized per row as Keras's int8 ``Dense`` does, then one int8 matmul."""
        table = self.token_embedding.embeddings  # (V, D) int8
        scale = ops.cast(self.token_embedding.embeddings_scale, "float32")  # (V,)
        flat_int8, flat_scale = keras.quantizers.abs_max_quantize(flat, axis=-1)  # (A, 1)
        products = ops.matmul(flat_int8, ops.transpose(table))  # (A, V) int32
        logits = ops.divide(ops.cast(products, "float32"), flat_scale * scale[None])
        return ops.cast(logits, flat.dtype)

    def compute_mask(self, token_ids, previous_mask=None):
        if len(token_ids.shape) == 3:  # reverse: hidden states, whose mask passes through
            return previous_mask
        if not self.mask_zero:
            return None
        return ops.not_equal(token_ids, 0)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim,
                "max_length": self.max_length,
                "position": self.position,
                "scale_embeddings": self.scale_embeddings,
                "mask_zero": self.mask_zero,
                "dropout": self.dropout,
                "embeddings_initializer": (
                    None
                    if self.embeddings_initializer is None
                    else keras.initializers.serialize(self.embeddings_initializer)
                ),
            }
        )
        return config
