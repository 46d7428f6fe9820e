"""The embedding of each word from its characters: a character CNN, max-pooled over the word."""

import keras
from keras import ops

__all__ = ["CharacterEmbedding"]


@keras.saving.register_keras_serializable(package="zoo")
class CharacterEmbedding(keras.layers.Layer):
    """Embeds each word from its spelling: character embeddings, a convolution, a max, a projection.

    For a word's characters the layer computes ``W . max_i relu(conv(e(c))_i) + b``: one
    convolution per width in ``kernel_size`` (Kim et al. 2016: affixes of each length get their
    own filters), padding characters as zero vectors (so the result does not depend on how far
    a word is padded), the maximum over the real characters, a dense projection. Added to a word
    embedding, it gives unseen words a representation from their affixes and capitalisation.

    Args:
        vocab_size: the number of character ids (id 0 is padding).
        embed_dim: D, the size of each word's output embedding.
        char_dim: E, the size of each character's embedding.
        filters: F, the number of filters of each convolution.
        kernel_size: the width of the convolution, in characters, or a tuple of widths (one
            convolution of ``filters`` filters per width).
        mask_zero: a word whose character ids are all 0 is padding: the output carries the
            Keras implicit mask ``any(char_ids != 0, axis=-1)``. Merged (``keras.layers.Add``)
            with a ``mask_zero`` word embedding, the masks agree and the sum keeps it.
        embeddings_initializer: initializer of the ``(vocab_size, E)`` character table.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        char_ids: ``(B, T, C)`` integer character ids of T words of up to C characters.

    Returns:
        ``(B, T, D)``. A word without characters gets the projection of zeros (its bias).

    Example:
        >>> layer = CharacterEmbedding(vocab_size=30, embed_dim=8)
        >>> char_ids = keras.ops.convert_to_tensor([[[2, 5, 6, 3], [2, 7, 3, 0], [0, 0, 0, 0]]])
        >>> tuple(layer(char_ids).shape)
        (1, 3, 8)

    References:
        dos Santos & Zadrozny 2014, "Learning Character-level Representations for Part-of-Speech
        Tagging"; Ma & Hovy 2016, "End-to-end Sequence Labeling via Bi-directional
        LSTM-CNNs-CRF", section 2.1.
    """

    def __init__(
        self,
        vocab_size,
        embed_dim,
        char_dim=32,
        filters=128,
        kernel_size=3,
        mask_zero=True,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.char_dim = char_dim
        self.filters = filters
        widths = (kernel_size,) if isinstance(kernel_size, int) else tuple(kernel_size)
        if not widths or len(set(widths)) < len(widths) or any(
            not isinstance(w, int) or w < 1 for w in widths
        ):
            raise ValueError(
                f"kernel_size must be a positive int or a tuple of distinct ones; got "
                f"{kernel_size!r}."
            )
        self.kernel_size = kernel_size if isinstance(kernel_size, int) else list(widths)
        self.mask_zero = mask_zero
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.char_embedding = keras.layers.Embedding(
            vocab_size,
            char_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="char_embedding",
        )
        # One attribute per convolution: Keras names saved weights by attribute, and one width
        # keeps the name "conv" of the models saved before there were several.
        single = isinstance(kernel_size, int)
        self._conv_names = ["conv"] if single else [f"conv_{width}" for width in widths]
        for name, width in zip(self._conv_names, widths):
            conv = keras.layers.Conv1D(
                filters, width, padding="same", activation="relu", dtype=self.dtype_policy,
                name=name,
            )
            setattr(self, name, conv)
        self.projection = keras.layers.Dense(embed_dim, dtype=self.dtype_policy, name="projection")

    @property
    def convs(self):
        """The convolutions, one per width."""
        return [getattr(self, name) for name in self._conv_names]

    def build(self, input_shape):
        self.char_embedding.build()
        for conv in self.convs:
            conv.build((None, input_shape[-1], self.char_dim))
        self.projection.build((None, self.filters * len(self.convs)))
        self.built = True

    def call(self, char_ids):
        shape = ops.shape(char_ids)
        # One row per word, and one padding word, dropped at the end, so that no batch is
        # empty (a replica's is under multi_worker once its worker's part is done): TensorFlow's
        # convolution gives an empty batch back with the input's channels.
        flat = ops.pad(ops.reshape(char_ids, (-1, shape[-1])), [[0, 1], [0, 0]])  # (B*T+1, C)
        real = ops.expand_dims(ops.not_equal(flat, 0), -1)  # (B*T+1, C, 1)
        x = self.char_embedding(flat)  # (B*T+1, C, E)
        x = ops.where(real, x, ops.zeros_like(x))
        pooled = []
        for conv in self.convs:
            h = conv(x)  # (B*T+1, C, F), >= 0 after the relu
            pooled.append(ops.max(ops.where(real, h, ops.zeros_like(h)), axis=1))  # (B*T+1, F)
        x = pooled[0] if len(pooled) == 1 else ops.concatenate(pooled, axis=-1)
        x = self.projection(x)[:-1]  # (B*T, D)
        return ops.reshape(x, (shape[0], shape[1], self.embed_dim))  # (B, T, D)

    def compute_mask(self, char_ids, previous_mask=None):
        if not self.mask_zero:
            return None
        return ops.any(ops.not_equal(char_ids, 0), axis=-1)  # (B, T)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (self.embed_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim,
                "char_dim": self.char_dim,
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
