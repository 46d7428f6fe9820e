"""The functional tagger and :func:`tagger_heads`, which reads the heads of a built or loaded one."""

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
from zoo.models.tagger.config import HEAD_SIZES, HEADS

__all__ = ["TaggerHead", "build_tagger", "tagger_heads"]


@dataclass(frozen=True)
class TaggerHead:
    """One output of a tagger: K, its number of tags, and whether it is a CRF.

    A CRF head outputs potentials ``(B, T, K, K)``, decoded with Viterbi; a softmax head outputs
    logits ``(B, T, K)``, decoded with the argmax.
    """

    num_tags: int
    use_crf: bool


def tagger_heads(model):
    """The heads of a tagger of :func:`build_tagger`, built or reloaded from a ``.keras`` file.

    The one place that tells a CRF head from a softmax head: by the layers that
    :func:`build_tagger` names, ``{head}_logits`` (its ``units`` are K) and ``{head}_crf``.

    Args:
        model: a tagger of :func:`build_tagger`.

    Returns:
        ``{head: TaggerHead}``, the heads in :data:`HEADS` order: ``"upos"`` and any of
        ``"xpos"``, ``"feats"``, ``"lemma"``.

    Raises:
        ValueError: a model that is not a tagger (no ``upos_logits`` layer, other outputs).

    Example:
        >>> from zoo.models.tagger import get_config
        >>> heads = tagger_heads(build_tagger(get_config("tiny", num_xpos_tags=5)))
        >>> heads["upos"], heads["xpos"].num_tags
        (TaggerHead(num_tags=17, use_crf=True), 5)
    """
    layers = {layer.name: layer for layer in model.layers}
    if "upos_logits" not in layers:
        raise ValueError(
            f"Model {model.name!r} has no layer 'upos_logits': it is not a tagger of "
            "zoo.models.build_tagger."
        )
    outputs = model.output if isinstance(model.output, dict) else {"upos": model.output}
    if set(outputs) - set(HEADS) or "upos" not in outputs:
        raise ValueError(
            f"Model {model.name!r} has outputs {sorted(outputs)}; a tagger has 'upos' and "
            f"optionally {', '.join(repr(head) for head in HEADS[1:])}."
        )
    return {
        head: TaggerHead(layers[f"{head}_logits"].units, f"{head}_crf" in layers)
        for head in HEADS
        if head in outputs
    }


def _head(x, config, name, num_tags):
    scores = keras.layers.Dense(num_tags, name=f"{name}_logits")(x)  # (B, T, K)
    if config.head_uses_crf(name):
        return CRF(name=f"{name}_crf")(scores)  # (B, T, K, K)
    return scores


def build_tagger(config):
    """A functional tagger: ``{"words", "chars"}`` ids -> per-token UPOS scores.

    Layer names are stable: ``word_embedding`` (a ``TokenAndPositionEmbedding``, with the
    learned positions when ``position="learned"``), ``char_embedding`` (a
    ``CharacterEmbedding``), ``word_and_char`` (their sum), ``embedding_dropout``,
    ``encoder_block_{i}``, ``encoder_norm``, ``upos_logits`` and, with ``use_crf``,
    ``upos_crf`` (likewise ``xpos_logits``/``xpos_crf``; ``feats_logits`` and
    ``lemma_logits``, never with a CRF).

    Args:
        config: a :class:`TaggerConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"words": (B, T) int32, "chars": (B, T, C) int32}`` (0 is
        padding, word id 1 is OOV; see ``zoo.data.TaggerVocabulary``) to the UPOS logits
        ``(B, T, K)``, or with ``use_crf`` the CRF potentials ``(B, T, K, K)``. With an XPOS
        head the output is a dict ``{"upos": ..., "xpos": ...}``. The outputs carry the padding
        mask as their Keras implicit mask (losses and metrics read it): ``words != 0`` (or a
        word with characters; ``zoo.data.TaggerVocabulary`` gives every word both, padding
        neither). Outputs at padding are meaningless (zero for the CRF). With more heads
        (``config.heads``) the output is a dict of them.

    Example:
        >>> from zoo.models.tagger import get_config
        >>> model = build_tagger(get_config("tiny"))
        >>> model.output_shape
        (None, None, 17, 17)
    """
    words = keras.Input((None,), dtype="int32", name="words")
    chars = keras.Input((None, config.max_word_length), dtype="int32", name="chars")

    x = TokenAndPositionEmbedding(
        config.word_vocab_size,
        config.d_model,
        max_length=config.max_length,
        position="learned" if config.position == "learned" else None,
        mask_zero=True,
        name="word_embedding",
    )(words)  # (B, T, D), masked where words == 0
    c = CharacterEmbedding(
        config.char_vocab_size,
        config.d_model,
        char_dim=config.char_embedding_dim,
        filters=config.char_filters,
        kernel_size=config.char_kernel_size,
        name="char_embedding",
    )(chars)  # (B, T, D), masked where a word has no characters
    # Merging keeps a mask only when every input has one; the two agree on padding words.
    x = keras.layers.Add(name="word_and_char")([x, c])  # (B, T, D)
    x = Dropout(config.dropout, name="embedding_dropout")(x)
    if config.position == "relative":
        attention = "relative"
        attention_kwargs = {"max_relative_position": config.max_relative_position}
    else:
        attention, attention_kwargs = "mha", None
    for i in range(config.num_layers):
        x = TransformerEncoderBlock(
            num_heads=config.num_heads,
            ff_dim=config.ff_dim,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation=config.activation,
            normalize_first=config.normalize_first,
            attention=attention,
            attention_kwargs=attention_kwargs,
            name=f"encoder_block_{i}",
        )(x)
    if config.normalize_first:
        x = LayerNormalization(epsilon=1e-5, name="encoder_norm")(x)

    outputs = {head: _head(x, config, head, getattr(config, HEAD_SIZES[head]))
               for head in config.heads}  # fmt: skip
    outputs = outputs if len(outputs) > 1 else outputs["upos"]
    return keras.Model({"words": words, "chars": chars}, outputs, name="tagger")