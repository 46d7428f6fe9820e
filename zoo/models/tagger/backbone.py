"""The tagger's backbone: words and characters in, one score tensor per head out, as a keras-hub
Backbone that owns its layers and whose config is its architecture."""

from dataclasses import dataclass

import keras

from zoo.layers import (
    CRF,
    CharacterEmbedding,
    Dropout,
    LayerNormalization,
    TokenAndPositionEmbedding,
    TransformerEncoderBlock,
)
from zoo.models.backbone import ArchitectureBackbone
from zoo.models.tagger.config import HEAD_SIZES, TaggerConfig

__all__ = ["TaggerBackbone", "TaggerHead", "build_tagger"]


@dataclass(frozen=True)
class TaggerHead:
    """One output of a tagger: K, its number of classes, and whether it is a CRF.

    A CRF head outputs potentials ``(B, T, K, K)``, decoded with Viterbi; a softmax head outputs
    logits ``(B, T, K)``, decoded with the argmax.
    """

    num_tags: int
    use_crf: bool


@dataclass(frozen=True)
class TaggerLayers:
    """The tagger's layers by role that its users read: the two embeddings (their sizes and
    positions), their sum, the encoder blocks (their attention maps), and the heads' specs,
    ``{head: TaggerHead}`` in :data:`~zoo.models.tagger.HEADS` order."""

    word_embedding: keras.layers.Layer
    char_embedding: keras.layers.Layer
    word_and_char: keras.layers.Layer
    encoder_blocks: tuple
    heads: dict


@keras.saving.register_keras_serializable(package="zoo")
class TaggerBackbone(ArchitectureBackbone):
    """The encoder-only tagger: ``{"words", "chars"}`` ids -> per-token scores of each head.

    A word is its (lowercased) word embedding plus a character feature, so that a word never
    seen in training still gets a tag from its spelling; a stack of encoder blocks reads the
    sentence, and each head scores its column, as softmax logits or (UPOS, XPOS with
    ``use_crf``) as the potentials of a linear-chain CRF. The layer names are zoo 0.1.0's
    functional tagger's, so that its weights files load: ``word_embedding``,
    ``char_embedding``, ``word_and_char``, ``embedding_dropout``, ``encoder_block_{i}``,
    ``encoder_norm``, ``{head}_logits`` and ``{head}_crf``.

    Args:
        **architecture: the fields of :class:`~zoo.models.tagger.TaggerConfig` (see it for each
            one's meaning), the others at its defaults.
        name: the model's name, ``"tagger"`` (the task's).

    Call arguments:
        inputs: ``{"words": (B, T) int32, "chars": (B, T, C) int32}``, 0 the padding (word
            id 1 is OOV; :class:`~zoo.models.TaggerPreprocessor` makes them).

    Returns:
        The UPOS logits ``(B, T, K)`` or CRF potentials ``(B, T, K, K)``; with more heads a
        dict ``{head: scores}``. The outputs carry the padding mask (``words != 0``) as their
        Keras implicit mask, which the losses and metrics read.

    Example:
        >>> from zoo.models.tagger import get_config
        >>> backbone = TaggerBackbone.from_architecture(get_config("tiny", num_xpos_tags=5))
        >>> backbone.heads["upos"], backbone.heads["xpos"].num_tags
        (TaggerHead(num_tags=17, use_crf=True), 5)

    References:
        Kondratyuk and Straka 2019, "75 Languages, 1 Model: Parsing Universal Dependencies
        Universally"; Lample et al. 2016, "Neural Architectures for Named Entity Recognition".
    """

    config_class = TaggerConfig
    default_name = "tagger"

    @property
    def heads(self):
        """``{head: TaggerHead}``: ``"upos"`` and any of ``"xpos"``, ``"feats"``, ``"lemma"``."""
        return self.parts.heads

    @property
    def word_embedding(self):
        return self.parts.word_embedding

    @property
    def char_embedding(self):
        return self.parts.char_embedding

    @staticmethod
    def build_graph(config):
        words = keras.Input((None,), dtype="int32", name="words")
        chars = keras.Input((None, config.max_word_length), dtype="int32", name="chars")
        word_embedding = TokenAndPositionEmbedding(
            config.word_vocab_size, config.d_model, max_length=config.max_length,
            position="learned" if config.position == "learned" else None, mask_zero=True,
            name="word_embedding",
        )  # fmt: skip
        char_embedding = CharacterEmbedding(
            config.char_vocab_size, config.d_model, char_dim=config.char_embedding_dim,
            filters=config.char_filters, kernel_size=config.char_kernel_size,
            name="char_embedding",
        )  # fmt: skip
        # Merging keeps a mask only when every input has one; the two agree on padding words.
        word_and_char = keras.layers.Add(name="word_and_char")
        x = word_and_char([word_embedding(words), char_embedding(chars)])
        x = Dropout(config.dropout, name="embedding_dropout")(x)  # (B, T, D)
        attention, attention_kwargs = "mha", None
        if config.position == "relative":
            attention = "relative"
            attention_kwargs = {"max_relative_position": config.max_relative_position}
        blocks = tuple(TransformerEncoderBlock(
            num_heads=config.num_heads, ff_dim=config.ff_dim, dropout=config.dropout,
            attention_dropout=config.attention_dropout, activation=config.activation,
            normalize_first=config.normalize_first, attention=attention,
            attention_kwargs=attention_kwargs, name=f"encoder_block_{i}",
        ) for i in range(config.num_layers))  # fmt: skip
        for block in blocks:
            x = block(x)  # (B, T, D)
        if config.normalize_first:
            x = LayerNormalization(epsilon=1e-5, name="encoder_norm")(x)
        outputs, heads = {}, {}
        for head in config.heads:
            heads[head] = TaggerHead(getattr(config, HEAD_SIZES[head]), config.head_uses_crf(head))
            scores = keras.layers.Dense(heads[head].num_tags, name=f"{head}_logits")(x)
            outputs[head] = CRF(name=f"{head}_crf")(scores) if heads[head].use_crf else scores
        outputs = outputs if len(outputs) > 1 else outputs["upos"]  # (B, T, K[, K]) each
        layers = TaggerLayers(word_embedding, char_embedding, word_and_char, blocks, heads)
        return {"words": words, "chars": chars}, outputs, layers


def build_tagger(config, name=None):
    """A new :class:`TaggerBackbone` of a training config's architecture."""
    return TaggerBackbone.from_architecture(config, name=name)
