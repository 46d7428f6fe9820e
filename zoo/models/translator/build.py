"""The functional translator: the stacks of :mod:`zoo.models.translator.stacks` on symbolic inputs."""

import keras

from zoo.layers import GuidedAttention, ScheduledSampling
from zoo.models.translator.stacks import NewLayers, copy_inputs, decoder_stack, encoder_stack

__all__ = ["build_translator"]


def build_translator(config, name="translator"):
    """A functional encoder-decoder: ``{"source", "target_in"}`` token ids -> target logits.

    Layer names are stable, so decoding and export find the parts by name
    (:func:`translator_layers`): ``source_embedding``/``target_embedding`` (one shared
    ``embedding`` when ``share_embeddings``), ``encoder_block_{i}``, ``encoder_norm``,
    ``decoder_block_{i}``, ``decoder_norm``, ``output_projection`` (absent when the
    embedding is tied) and ``pointer_generator`` (with ``copy_mechanism`` only).

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
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    layers = NewLayers(config)
    memory = encoder_stack(layers, source)  # (B, S, D) or one per block, with the padding mask
    decoder_input = target_in
    copy = copy_inputs(config.copy_mechanism, memory, source)
    if config.scheduled_sampling != "none":
        first, _, _ = decoder_stack(layers, target_in, memory, copy_source=copy)  # (B, T, V)
        mix = ScheduledSampling(
            config.scheduled_sampling,
            k=config.scheduled_sampling_k,
            c=config.scheduled_sampling_c,
            minimum=config.scheduled_sampling_min,
            name="scheduled_sampling",
        )
        decoder_input = mix(target_in, first)  # (B, T): the gold input at inference
    guided = config.guided_attention_weight > 0
    logits, _, cross = decoder_stack(
        layers, decoder_input, memory, return_cross_attention=guided, copy_source=copy
    )  # (B, T, V), one (B, N, T, S) per block
    if guided:
        guide = GuidedAttention(
            config.guided_attention_weight,
            decay=config.guided_attention_decay,
            sigma=config.guided_attention_sigma,
            name="guided_attention",
        )
        logits = guide(logits, cross, decoder_input, source)  # the loss added in training
    return keras.Model({"source": source, "target_in": target_in}, logits, name=name)


