"""A new translator's backbone from a training config."""

from zoo.models.translator.backbone import TranslatorBackbone

__all__ = ["build_translator"]


def build_translator(config, name="translator"):
    """A new :class:`TranslatorBackbone`: ``{"source", "target_in"}`` token ids -> logits.

    Layer names are stable, as zoo 0.1.0's functional translators had them, so that their
    weights files load: ``source_embedding``/``target_embedding`` (one shared ``embedding``
    when ``share_embeddings``), ``encoder_block_{i}``, ``encoder_norm``, ``decoder_block_{i}``,
    ``decoder_norm``, ``output_projection`` (absent when the embedding is tied) and
    ``pointer_generator`` (with ``copy_mechanism`` only). The searches read them by role
    (:attr:`TranslatorBackbone.roles`).

    Args:
        config: a :class:`TranslatorConfig`.
        name: the model's name, which names its task (a task that reuses the translator, such
            as the transliterator, gives its own).

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding) to logits ``(B, T, vocab_size)`` (log-probabilities with ``copy_mechanism``).

    Example:
        >>> from zoo.models.translator import build_translator, get_config
        >>> model = build_translator(get_config("tiny"))
        >>> model.output_shape
        (None, None, 1000)

    References:
        Vaswani et al. 2017, "Attention Is All You Need".
    """
    return TranslatorBackbone.from_training_config(config, name=name)
