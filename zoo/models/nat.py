"""The non-autoregressive translator (CMLM): the translator's encoder, a length predictor, and a
decoder without the causal mask that fills every masked target position at once.

The encoder and the decoder blocks are the translator's own (:mod:`zoo.models.translator`
builds and runs them); what differs is the decoder's input, mask tokens (the UNK id, as in
fairseq) at the positions to predict, its attention, which sees the whole target, and the
:class:`~zoo.layers.LengthPredictor` on the encoder output. :mod:`zoo.decoding.nat` decodes it.
"""

import dataclasses
from dataclasses import dataclass

import keras
from keras import ops

from zoo.layers import LengthPredictor
from zoo.models.presets import from_presets
from zoo.models.translator import PRESETS as TRANSLATOR_PRESETS
from zoo.models.translator import (
    TranslatorConfig,
    _decoder_stack,
    _encoder_stack,
    _NewLayers,
    encode,
    translator_layers,
)

__all__ = [
    "DECODER_INPUTS",
    "MASK_ID",
    "PRESETS",
    "NATConfig",
    "build_nat_translator",
    "decode_and_lengths",
    "get_config",
    "nat_decode",
    "nat_encode",
]

MASK_ID = 1  # the SentencePiece UNK id: byte fallback means real text never needs it
DECODER_INPUTS = ("mask",)


@dataclass(frozen=True)
class NATConfig(TranslatorConfig):
    """A :class:`~zoo.models.TranslatorConfig` and what the non-autoregressive model adds.

    Model:
        decoder_input: ``"mask"``: the decoder reads the target with mask tokens
            (:data:`MASK_ID`) at the positions to predict (CMLM, Ghazvininejad et al. 2019);
            at inference every position starts masked.
        max_offset: K of the length predictor: target lengths from ``source - K`` to
            ``source + K`` (in pieces, EOS included) are told apart.

    Training:
        length_loss_weight: the weight of the length predictor's cross entropy beside the
            tokens' (fairseq's default, 0.1).
    """

    decoder_input: str = "mask"
    max_offset: int = 24
    length_loss_weight: float = 0.1

    def __post_init__(self):
        if self.decoder_input not in DECODER_INPUTS:
            raise ValueError(
                f"Unknown decoder_input {self.decoder_input!r}; expected one of {DECODER_INPUTS}."
            )


# The translator's presets with the NAT's defaults: the same shapes, so a NAT and its teacher
# compare at equal size.
PRESETS = {
    name: NATConfig(**dataclasses.asdict(TRANSLATOR_PRESETS[name])) for name in ("tiny", "small")
}
PRESETS["tiny"] = dataclasses.replace(PRESETS["tiny"], max_offset=8)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", max_offset=16)``."""
    return from_presets(PRESETS, preset, "NAT translator", **overrides)


def build_nat_translator(config):
    """A functional CMLM: ``{"source", "target_in"}`` ids -> token logits and length scores.

    Layer names are the translator's (``embedding`` or ``source_embedding``/
    ``target_embedding``, ``encoder_block_{i}``, ``encoder_norm``, ``decoder_block_{i}``,
    ``decoder_norm``, ``output_projection``) plus ``length_predictor``.

    Args:
        config: a :class:`NATConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding; ``target_in`` holds :data:`MASK_ID` where a token is to be predicted) to
        ``{"tokens": (B, T, V) logits, "length": (B, 2K + 1) offset scores}``.

    Example:
        >>> model = build_nat_translator(get_config("tiny"))
        >>> {name: tuple(output.shape) for name, output in sorted(model.output.items())}
        {'length': (None, 17), 'tokens': (None, None, 1000)}

    References:
        Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models"; Gu et al. 2018, "Non-Autoregressive Neural Machine Translation".
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    layers = _NewLayers(config)
    memory = _encoder_stack(layers, source)  # (B, S, D), carries the padding mask
    length = LengthPredictor(config.max_offset, name="length_predictor")(memory)  # (B, 2K + 1)
    logits, _, _ = _decoder_stack(layers, target_in, memory, use_causal_mask=False)
    return keras.Model(
        {"source": source, "target_in": target_in},
        {"tokens": logits, "length": length},
        name="nat",
    )


def nat_encode(model, source_ids):
    """Run the encoder and the length predictor once.

    Args:
        model: a model of :func:`build_nat_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.

    Returns:
        ``(memory, source_padding, length_scores)``: the encoder output ``(B, S, D)``, the
        boolean ``(B, S)`` mask (True on real tokens) and the float32 offset scores
        ``(B, 2K + 1)``.
    """
    memory, source_padding = encode(model, source_ids)  # the translator's encoder, as it runs
    scores = model.get_layer("length_predictor")(memory, padding_mask=source_padding)
    return memory, source_padding, ops.cast(scores, "float32")


def nat_decode(model, memory, source_padding, target_in):
    """One decoder pass: ``(B, T)`` decoder inputs -> float32 token logits ``(B, T, V)``.

    Args:
        model: a model of :func:`build_nat_translator`.
        memory: ``(B, S, D)``, the encoder output of :func:`nat_encode`.
        source_padding: ``(B, S)`` boolean, True on real source tokens.
        target_in: ``(B, T)`` int ids: tokens, :data:`MASK_ID` where to predict, 0 after the
            target's length.
    """
    layers = translator_layers(model)
    target_in = ops.cast(target_in, "int32")
    logits, _, _ = _decoder_stack(
        layers,
        target_in,
        memory,
        padding_mask=layers.target_embedding.compute_mask(target_in),
        encoder_padding_mask=source_padding,
        use_causal_mask=False,
        training=False,
    )
    return ops.cast(logits, "float32")


def decode_and_lengths(model, source_ids, length_beam=1):
    """What :func:`zoo.decoding.nat_search` takes, with the encoder run here once.

    Args:
        model: a model of :func:`build_nat_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.
        length_beam: l, the candidate lengths decoded per sentence (an int, or a scalar int
            tensor in graph mode, already clamped as the search clamps it).

    Returns:
        ``(decode, length_scores, source_lengths)``: ``decode(target_in)`` maps ``(B * l, T)``
        decoder inputs to logits over the memory repeated per candidate (row ``b * l + k`` is
        candidate ``k`` of sentence ``b``), the ``(B, 2K + 1)`` length scores and the ``(B,)``
        source lengths.

    Example:
        >>> from zoo.decoding import nat_search
        >>> model = build_nat_translator(get_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
        >>> decode, scores, lengths = decode_and_lengths(model, source, length_beam=2)
        >>> tokens, _ = nat_search(decode, scores, lengths, max_length=8, length_beam=2)
        >>> tuple(tokens.shape)
        (2, 8)
    """
    memory, source_padding, scores = nat_encode(model, source_ids)
    memory, source_padding = (ops.repeat(x, length_beam, axis=0) for x in (memory, source_padding))
    source_lengths = ops.sum(ops.cast(ops.not_equal(source_ids, 0), "int32"), axis=1)  # (B,)

    def decode(target_in):
        return nat_decode(model, memory, source_padding, target_in)

    return decode, scores, source_lengths
