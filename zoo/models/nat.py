"""The non-autoregressive translator: the translator's encoder, a length predictor, and a
decoder without the causal mask that fills every target position at once.

The encoder and the decoder blocks are the translator's own (:mod:`zoo.models.translator`
builds and runs them); what differs is the decoder's attention, which sees the whole target,
the :class:`~zoo.layers.LengthPredictor` on the encoder output, and two choices
(:class:`NATConfig`): the decoder's input, mask tokens at the positions to predict (CMLM) or
the source's embeddings copied uniformly (:class:`~zoo.layers.UniformCopy`); and the target
length, predicted from the source or the widest the model allows, cut at the first EOS. The
saved model's layers record both, so that :mod:`zoo.decoding.nat` decodes it as it trained.
"""

import dataclasses
from dataclasses import dataclass

import keras
from keras import ops

from zoo.layers import LengthPredictor, UniformCopy
from zoo.layers.length_predictor import LENGTH_MODES
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
    "LENGTH_MODES",
    "MASK_ID",
    "PRESETS",
    "NATConfig",
    "NATModes",
    "build_nat_translator",
    "decode_and_lengths",
    "get_config",
    "nat_decode",
    "nat_encode",
    "nat_modes",
    "widest_lengths",
]

MASK_ID = 1  # the SentencePiece UNK id: byte fallback means real text never needs it
DECODER_INPUTS = ("mask", "copy")
_COPY = "source_copy"  # the name of the UniformCopy layer: its presence means decoder_input="copy"


@dataclass(frozen=True)
class NATConfig(TranslatorConfig):
    """A :class:`~zoo.models.TranslatorConfig` and what the non-autoregressive model adds.

    Model:
        decoder_input: what the decoder reads. ``"mask"``: the target with mask tokens
            (:data:`MASK_ID`) at the positions to predict (CMLM, Ghazvininejad et al. 2019);
            at inference every position starts masked, and Mask-Predict refines. ``"copy"``:
            at each target position the source token embedding that
            :class:`~zoo.layers.UniformCopy` maps there, plus the decoder's positions (Gu et
            al. 2018). The target ids then give only the length, so every target position is
            a label, and decoding is one pass: refinement could not change the output, so
            more iterations are refused (:func:`zoo.decoding.translation.nat_counts`).
        length_mode: how the target length is chosen. ``"predict"``: from the length
            predictor's best offsets to the source length. ``"max"``: every sentence is
            decoded at the widest length the offsets reach, :func:`widest_lengths` (the
            ceiling the length classes imply, the same in training and decoding, and a cost
            that grows with the source rather than with ``max_length``), and ends at its
            first EOS. The labels are the target, EOS, then EOS up to that width, so
            refinement works over a defined sequence and the model, not a length classifier,
            decides where the sentence ends. The length predictor is still trained (a small
            auxiliary loss on the encoder, and the ``length_accuracy`` of both modes stays
            comparable) but decides nothing; ``length_loss_weight=0`` drops it.
        max_offset: K of the length predictor: target lengths from ``source - K`` to
            ``source + K`` (in pieces, EOS included) are told apart. With ``"max"``, the room
            a target has beyond its source.

    Training:
        length_loss_weight: the weight of the length predictor's cross entropy beside the
            tokens' (fairseq's default, 0.1).
    """

    decoder_input: str = "mask"
    length_mode: str = "predict"
    max_offset: int = 24
    length_loss_weight: float = 0.1

    def __post_init__(self):
        super().__post_init__()
        if self.scheduled_sampling != "none":
            raise ValueError(
                "Scheduled sampling mixes a left-to-right decoder's own predictions into its "
                f"input; the NAT has none: scheduled_sampling must be 'none', got "
                f"{self.scheduled_sampling!r}."
            )
        if self.copy_mechanism:
            raise ValueError(
                "The copy mechanism of the translator mixes copies into a left-to-right "
                "decoder's output, through its step function; the NAT has none: "
                "copy_mechanism must be False."
            )
        if self.cross_attention_layers != "last":
            # The length predictor and the decoder read one encoder output.
            raise ValueError(
                f"The NAT reads the encoder's last layer: cross_attention_layers must be "
                f"'last', got {self.cross_attention_layers!r}."
            )
        for field, value, choices in (
            ("decoder_input", self.decoder_input, DECODER_INPUTS),
            ("length_mode", self.length_mode, LENGTH_MODES),
        ):
            if value not in choices:
                raise ValueError(f"Unknown {field} {value!r}; expected one of {choices}.")


@dataclass(frozen=True)
class NATModes:
    """How a built or loaded NAT decodes, as its layers record it (:func:`nat_modes`).

    Attributes:
        decoder_input: ``"mask"`` or ``"copy"`` (:class:`NATConfig`).
        length_mode: ``"predict"`` or ``"max"``.
        max_offset: K, the length predictor's largest offset.
    """

    decoder_input: str
    length_mode: str
    max_offset: int

    @property
    def refines(self):
        """Whether Mask-Predict iterations can change the output (the decoder reads tokens)."""
        return self.decoder_input == "mask"

    @property
    def predicts_length(self):
        """Whether the length comes from the length predictor's candidates."""
        return self.length_mode == "predict"


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
    """A functional NAT: ``{"source", "target_in"}`` ids -> token logits and length scores.

    Layer names are the translator's (``embedding`` or ``source_embedding``/
    ``target_embedding``, ``encoder_block_{i}``, ``encoder_norm``, ``decoder_block_{i}``,
    ``decoder_norm``, ``output_projection``) plus ``length_predictor`` (which records
    ``length_mode``) and, with ``decoder_input="copy"``, ``source_copy``.

    Args:
        config: a :class:`NATConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding; ``target_in`` holds :data:`MASK_ID` where a token is to be predicted, and with
        ``"copy"`` only its padding matters) to ``{"tokens": (B, T, V) logits, "length":
        (B, 2K + 1) offset scores}``.

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
    length = LengthPredictor(
        config.max_offset, length_mode=config.length_mode, name="length_predictor"
    )(memory)  # (B, 2K + 1)
    copy = UniformCopy(name=_COPY) if config.decoder_input == "copy" else None
    logits = _nat_decoder_stack(layers, copy, target_in, memory, source)
    return keras.Model(
        {"source": source, "target_in": target_in},
        {"tokens": logits, "length": length},
        name="nat",
    )


def _nat_decoder_stack(
    layers,
    copy,
    target_ids,
    memory,
    source_ids,
    padding_mask=None,
    encoder_padding_mask=None,
    training=None,
):
    """The translator's decoder stack without the causal mask: ``(B, T)`` ids -> logits.

    With ``copy`` (a :class:`~zoo.layers.UniformCopy`), the decoder's token embeddings are
    the source's, copied to the real target positions. Without masks (the builder) the
    padding comes from the ids' implicit masks.
    """
    token_embeddings = None
    if copy is not None:
        source = layers.source_embedding(source_ids, tokens_only=True)  # (B, S, D)
        if padding_mask is None:
            target_padding = layers.target_embedding.compute_mask(target_ids)
        else:
            target_padding = padding_mask
        token_embeddings = copy(source, target_padding, padding_mask=encoder_padding_mask)
    logits, _, _ = _decoder_stack(
        layers,
        target_ids,
        memory,
        padding_mask=padding_mask,
        encoder_padding_mask=encoder_padding_mask,
        use_causal_mask=False,
        token_embeddings=token_embeddings,
        training=training,
    )
    return logits  # (B, T, V)


def nat_modes(model):
    """The :class:`NATModes` of a model of :func:`build_nat_translator`, from its layers.

    A ``.keras`` file alone decodes right: the copy is a layer of its own (``source_copy``)
    and the length predictor's config holds ``length_mode`` and ``max_offset``.

    Raises:
        ValueError: the model has no ``length_predictor`` (not a NAT).
    """
    layers = {layer.name: layer for layer in model.layers}
    if "length_predictor" not in layers:
        raise ValueError(
            f"Model {model.name!r} has no layer 'length_predictor': not a model of "
            "zoo.models.nat.build_nat_translator."
        )
    predictor = layers["length_predictor"]
    decoder_input = "copy" if _COPY in layers else "mask"
    return NATModes(decoder_input, predictor.length_mode, predictor.max_offset)


def widest_lengths(source_lengths, max_offset, max_length):
    """The target width of ``length_mode="max"``: ``min(max(source + K, 2), max_length)``.

    As wide as the length predictor's largest class, and at least a token and its EOS. The
    training data (``make_translation_dataset(length_mode="max")``) pads each target with
    EOS to this width.

    Args:
        source_lengths: ``(B,)`` int source lengths.
        max_offset: K.
        max_length: the longest target (EOS included).

    Returns:
        ``(B,)`` int32 widths.
    """
    widths = ops.cast(source_lengths, "int32") + max_offset
    return ops.minimum(ops.maximum(widths, 2), max_length)


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


def nat_decode(model, memory, source_padding, target_in, source_ids=None):
    """One decoder pass: ``(B, T)`` decoder inputs -> float32 token logits ``(B, T, V)``.

    Args:
        model: a model of :func:`build_nat_translator`.
        memory: ``(B, S, D)``, the encoder output of :func:`nat_encode`.
        source_padding: ``(B, S)`` boolean, True on real source tokens.
        target_in: ``(B, T)`` int ids: tokens, :data:`MASK_ID` where to predict, 0 after the
            target's length.
        source_ids: ``(B, S)`` int source ids, 0-padded: what a ``"copy"`` model's decoder
            reads (its embeddings); unused by a ``"mask"`` model.

    Raises:
        ValueError: a ``"copy"`` model without ``source_ids``.
    """
    layers = translator_layers(model)
    copy = _copy_layer(model)
    if copy is not None:
        if source_ids is None:
            raise ValueError(
                "A model with decoder_input='copy' decodes from the source's embeddings: "
                "pass source_ids."
            )
        source_ids = ops.cast(source_ids, "int32")
    target_in = ops.cast(target_in, "int32")
    logits = _nat_decoder_stack(
        layers,
        copy,
        target_in,
        memory,
        source_ids,
        padding_mask=layers.target_embedding.compute_mask(target_in),
        encoder_padding_mask=source_padding,
        training=False,
    )
    return ops.cast(logits, "float32")


def _copy_layer(model):
    return next((layer for layer in model.layers if layer.name == _COPY), None)


def decode_and_lengths(model, source_ids, max_length, length_beam=1):
    """What :func:`zoo.decoding.nat_search` takes, with the encoder run here once.

    Args:
        model: a model of :func:`build_nat_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.
        max_length: Python int, the longest target the search decodes (EOS included).
        length_beam: l, the candidate lengths decoded per sentence (an int, or a scalar int
            tensor in graph mode, already clamped as the search clamps it); 1 for a
            ``length_mode="max"`` model, which decodes one width per sentence.

    Returns:
        ``(decode, lengths)``: ``decode(target_in)`` maps ``(B * l, T)`` decoder inputs to
        logits over the memory repeated per candidate (row ``b * l + k`` is candidate ``k``
        of sentence ``b``); ``lengths`` is the keyword arguments of ``nat_search`` that
        choose the lengths: the ``(B, 2K + 1)`` ``length_logits`` and the ``(B,)``
        ``source_lengths``, or for ``length_mode="max"`` the ``(B,)`` ``lengths`` of
        :func:`widest_lengths`.

    Raises:
        ValueError: a ``length_beam`` int other than 1 for a ``length_mode="max"`` model.

    Example:
        >>> from zoo.decoding import nat_search
        >>> model = build_nat_translator(get_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
        >>> decode, lengths = decode_and_lengths(model, source, max_length=8, length_beam=2)
        >>> tokens, _ = nat_search(decode, **lengths, max_length=8, length_beam=2)
        >>> tuple(tokens.shape)
        (2, 8)
    """
    modes = nat_modes(model)
    if not modes.predicts_length and isinstance(length_beam, int) and length_beam != 1:
        raise ValueError(
            f"length_beam={length_beam}: a model with length_mode='max' decodes one length "
            "per sentence."
        )
    source_ids = ops.cast(source_ids, "int32")
    memory, source_padding, scores = nat_encode(model, source_ids)
    source_lengths = ops.sum(ops.cast(source_padding, "int32"), axis=1)  # (B,)
    if modes.predicts_length:
        lengths = {"length_logits": scores, "source_lengths": source_lengths}
    else:
        lengths = {"lengths": widest_lengths(source_lengths, modes.max_offset, max_length)}
    memory, source_padding, source_ids = (
        ops.repeat(x, length_beam, axis=0) for x in (memory, source_padding, source_ids)
    )

    def decode(target_in):
        return nat_decode(model, memory, source_padding, target_in, source_ids=source_ids)

    return decode, lengths
