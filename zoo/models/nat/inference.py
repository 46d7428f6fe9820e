"""A trained NAT's inference API: its modes as its layers record them, the encoder and length
predictor run once, and one parallel decoder pass (what Mask-Predict refines)."""

from dataclasses import dataclass

from keras import ops

from zoo.models.nat.backbone import nat_decoder_stack
from zoo.models.translator import encode, translator_layers
from zoo.models.translator.stacks import decoder_stack

__all__ = [
    "NATModes",
    "ctc_logits",
    "decode_and_lengths",
    "nat_decode",
    "nat_encode",
    "nat_layers",
    "nat_modes",
    "nat_source_positions",
    "widest_lengths",
]


@dataclass(frozen=True)
class NATModes:
    """How a built or loaded NAT decodes, as its layers record it (:func:`nat_modes`).

    Attributes:
        decoder_input: ``"mask"`` or ``"copy"`` (:class:`NATConfig`); ``"upsampled"`` for a
            CTC decoder.
        length_mode: ``"predict"`` or ``"max"``; ``"none"`` for a CTC decoder.
        max_offset: K, the length predictor's largest offset (0 without one).
        ctc_upsample: a CTC decoder's upsampling ratio; 0 for a CMLM.
    """

    decoder_input: str
    length_mode: str
    max_offset: int
    ctc_upsample: int = 0

    @property
    def ctc(self):
        """Whether the decoder is a CTC decoder (one pass, no length candidates)."""
        return self.ctc_upsample > 0

    @property
    def refines(self):
        """Whether Mask-Predict iterations can change the output (the decoder reads tokens)."""
        return self.decoder_input == "mask"

    @property
    def predicts_length(self):
        """Whether the length comes from the length predictor's candidates."""
        return self.length_mode == "predict"


def nat_modes(model):
    """The :class:`NATModes` of a NAT (a backbone or a task model), from its own layers
    (:func:`nat_layers`): the copy is a layer of its own, the length predictor's config holds
    ``length_mode`` and ``max_offset``, and a CTC decoder's upsampling layer its ratio.

    Raises:
        ValueError: the model is no NAT.
    """
    layers = nat_layers(model)
    if layers.ctc_upsampling is not None:
        return NATModes("upsampled", "none", 0, layers.ctc_upsampling.factor)
    predictor = layers.length_predictor
    decoder_input = "copy" if layers.source_copy is not None else "mask"
    return NATModes(decoder_input, predictor.length_mode, predictor.max_offset)


def nat_layers(model):
    """The NAT's own layers (:class:`~zoo.models.nat.NATLayers`): its backbone's."""
    backbone = getattr(model, "backbone", None) or model  # a task model: its backbone
    if not hasattr(backbone, "nat_layers"):
        raise ValueError(f"{model.name!r} is no NAT's backbone (a functional model of zoo "
                         "0.1.0? zoo.tasks.load reads it as today's)")  # fmt: skip
    return backbone.nat_layers


def widest_lengths(source_lengths, max_offset, max_length):
    """The target width of ``length_mode="max"``: ``min(max(source + K, 2), max_length)``.

    As wide as the length predictor's largest class, and at least a token and its EOS. The
    training examples (:class:`~zoo.models.nat.objectives.CMLMObjective` with
    ``length_mode="max"``) pad each target with EOS to this width.

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
    scores = nat_layers(model).length_predictor(memory, padding_mask=source_padding)
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
    copy = nat_layers(model).source_copy
    if copy is not None:
        if source_ids is None:
            raise ValueError(
                "A model with decoder_input='copy' decodes from the source's embeddings: "
                "pass source_ids."
            )
        source_ids = ops.cast(source_ids, "int32")
    target_in = ops.cast(target_in, "int32")
    logits = nat_decoder_stack(
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


def ctc_logits(model, source_ids):
    """A CTC decoder's one pass: ``(B, S)`` source ids -> float32 logits ``(B, k S, V)``,
    the blank certain at the padded positions (as :func:`build_nat_translator` runs it)."""
    layers = translator_layers(model)
    memory, source_padding = encode(model, source_ids)
    layers_of_nat = nat_layers(model)
    ids = layers_of_nat.ctc_upsampling(ops.cast(source_ids, "int32"))  # (B, kS)
    logits, _, _ = decoder_stack(
        layers, ids, memory, padding_mask=ops.not_equal(ids, 0),
        encoder_padding_mask=source_padding, use_causal_mask=False, training=False,
    )  # fmt: skip
    return ops.cast(layers_of_nat.ctc_output(logits, ids), "float32")


def nat_source_positions(model):
    """The most source tokens the NAT reads: its source positions, or for a CTC decoder that
    many divided by its ratio (the upsampled source fills the decoder's positions)."""
    positions = translator_layers(model).max_source_length
    upsample = nat_modes(model).ctc_upsample
    return positions // upsample if upsample and positions is not None else positions


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
        >>> from zoo.models.nat import build_nat_translator, get_config
        >>> model = build_nat_translator(get_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
        >>> decode, lengths = decode_and_lengths(model, source, max_length=8, length_beam=2)
        >>> tokens, _ = nat_search(decode, **lengths, max_length=8, length_beam=2)
        >>> tuple(tokens.shape)
        (2, 8)
    """
    modes = nat_modes(model)
    if modes.ctc:
        raise ValueError("A CTC decoder has no length candidates to refine: see ctc_logits.")
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