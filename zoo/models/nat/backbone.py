"""The NAT's backbone: the translator's public stacks, a length predictor, and a decoder
without the causal mask (reading mask tokens, or a uniform copy of the source), as a keras-hub
Backbone whose config is its architecture."""

import dataclasses

import keras

from zoo.layers import (
    AllMasked,
    CTCBlankPadding,
    CTCGlancingSampler,
    GlancingSampler,
    LengthPredictor,
    LossMask,
    SourceUpsampling,
    UniformCopy,
)
from zoo.models.nat.config import MASK_ID, NATConfig
from zoo.models.backbone import ArchitectureBackbone
from zoo.models.translator.config import TranslatorConfig, seq2seq_fields
from zoo.models.translator.stacks import decoder_stack, encoder_stack, make_translator_layers

__all__ = [
    "NATBackbone", "NATLayers", "build_nat_translator", "nat_decoder_stack",
]  # fmt: skip

@dataclasses.dataclass(frozen=True)
class NATLayers:
    """The NAT's own layers, None where its choices have none: the length predictor and the
    uniform copy of a CMLM decoder, the upsampling and blank padding of a CTC decoder."""

    length_predictor: keras.layers.Layer = None
    source_copy: keras.layers.Layer = None
    ctc_upsampling: keras.layers.Layer = None
    ctc_output: keras.layers.Layer = None


def build_nat_translator(config):
    """A new :class:`NATBackbone` of a :class:`NATConfig`."""
    return NATBackbone.from_architecture(config)


@keras.saving.register_keras_serializable(package="zoo")
class NATBackbone(ArchitectureBackbone):
    """The NAT: ``{"source", "target_in"}`` ids -> token logits and length scores.

    Layer names are the translator's (:func:`~zoo.models.translator.stacks.
    make_translator_layers`) plus ``length_predictor`` (which records ``length_mode``)
    and, with ``decoder_input="copy"``, ``source_copy``. A ``decoder="ctc"`` model has
    ``ctc_upsampling`` and ``ctc_output`` instead of the length predictor, and maps
    ``{"source"}`` alone to ``{"tokens": (B, k S, V) logits}``. With ``glancing_ratio``,
    ``target_in`` is the gold target (the model masks it, or for CTC aligns it), and the token
    logits carry the loss positions as their Keras mask.

    Args:
        **architecture: the fields of :class:`NATConfig` (see it for each one's meaning); the
            others at its defaults.
        name: the model's name, ``"nat"`` (the task's).

    Call arguments:
        inputs: ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (``{"source"}`` alone
            for a CTC decoder without glancing).

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding; ``target_in`` holds :data:`MASK_ID` where a token is to be predicted, and with
        ``"copy"`` only its padding matters) to ``{"tokens": (B, T, V) logits, "length":
        (B, 2K + 1) offset scores}``.

    Example:
        >>> from zoo.models.nat import NATBackbone, get_config
        >>> model = NATBackbone.from_architecture(get_config("tiny"))
        >>> {name: tuple(output.shape) for name, output in sorted(model.output.items())}
        {'length': (None, 17), 'tokens': (None, None, 1000)}

    References:
        Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models"; Gu et al. 2018, "Non-Autoregressive Neural Machine Translation".
    """

    config_class = NATConfig
    default_name = "nat"

    @staticmethod
    def build_graph(config):
        # The translator's layers of the shared architecture (its decoder's own options off).
        layers = make_translator_layers(TranslatorConfig(**seq2seq_fields(config)))
        inputs, outputs, own_layers = _nat_graph(config, layers)
        return inputs, outputs, (layers, own_layers)

    @property
    def roles(self):
        """The translator's layers it runs (:class:`~zoo.models.translator.TranslatorLayers`)."""
        return self.parts[0]

    @property
    def nat_layers(self):
        """Its own layers beside the translator's (:class:`NATLayers`)."""
        return self.parts[1]


def _nat_graph(config, layers):
    """The NAT's inputs and outputs on symbolic inputs, over the translator's layers, and
    its own layers (:class:`NATLayers`)."""
    source = keras.Input((None,), dtype="int32", name="source")
    memory = encoder_stack(layers, source)  # (B, S, D), carries the padding mask
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    if config.decoder == "ctc":
        return _ctc_model(config, layers, source, memory, target_in)
    predictor = LengthPredictor(
        config.max_offset, length_mode=config.length_mode, name="length_predictor"
    )
    length = predictor(memory)  # (B, 2K + 1)
    copy = UniformCopy(name="source_copy") if config.decoder_input == "copy" else None
    if config.glancing_ratio:
        # Two passes in training: target_in is the gold target, masked here (GLAT).
        first_input = AllMasked(MASK_ID, name="glancing_first_input")(target_in)
        first = nat_decoder_stack(layers, copy, first_input, memory, source)  # (B, T, V)
        second_input, positions = _glancing(config, GlancingSampler)(target_in, first)
        logits = nat_decoder_stack(layers, copy, second_input, memory, source)
        logits = LossMask(name="glancing_loss_positions")([logits, positions])
    else:
        logits = nat_decoder_stack(layers, copy, target_in, memory, source)
    inputs = {"source": source, "target_in": target_in}
    outputs = {"tokens": logits, "length": length}
    return inputs, outputs, NATLayers(length_predictor=predictor, source_copy=copy)


def _ctc_model(config, layers, source, memory, target):
    """``{"source"}`` (and with glancing the gold ``target_in``) -> ``{"tokens": (B, kS, V)}``."""
    upsampling = SourceUpsampling(config.ctc_upsample, name="ctc_upsampling")
    ids = upsampling(source)  # (B, kS)
    blank_padding = CTCBlankPadding(MASK_ID, name="ctc_output")
    inputs = {"source": source}
    if config.glancing_ratio:  # a first pass, aligned to the gold target, shows some of it
        first, _, _ = decoder_stack(layers, ids, memory, use_causal_mask=False)
        first = blank_padding(first, ids)
        ids = _glancing(config, CTCGlancingSampler)(ids, target, first)
        inputs["target_in"] = target
    logits, _, _ = decoder_stack(layers, ids, memory, use_causal_mask=False)
    logits = blank_padding(logits, ids)  # (B, kS, V)
    return inputs, {"tokens": logits}, NATLayers(ctc_upsampling=upsampling,
                                                 ctc_output=blank_padding)


def _glancing(config, sampler):
    return sampler(
        config.glancing_ratio, config.glancing_ratio_end, config.glancing_anneal_steps,
        mask_id=MASK_ID, name="glancing",
    )  # fmt: skip


def nat_decoder_stack(
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
    logits, _, _ = decoder_stack(
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

