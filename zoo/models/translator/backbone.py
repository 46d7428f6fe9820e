"""The translator's backbone: a Keras model that owns its layers, in keras-hub's shape.

Its config is its constructor arguments (the architecture, nothing about data or training), so
``keras.models.load_model`` rebuilds it from a ``.keras`` file, and the searches get the layers
by role from :attr:`TranslatorBackbone.roles`, never by their names.
"""

import keras

from zoo.layers import GuidedAttention, ScheduledSampling
from zoo.models.backbone import ArchitectureBackbone
from zoo.models.translator.config import TranslatorConfig
from zoo.models.translator.stacks import (
    copy_inputs,
    decoder_stack,
    encoder_stack,
    make_translator_layers,
)

__all__ = ["TranslatorBackbone", "build_translator"]

@keras.saving.register_keras_serializable(package="zoo")
class TranslatorBackbone(ArchitectureBackbone):
    """The encoder-decoder transformer: ``{"source", "target_in"}`` token ids -> target logits.

    Args:
        **architecture: the fields of :class:`~zoo.models.translator.TranslatorConfig`
            (``vocab_size``, ``d_model``, ...; see it for each one's meaning), the others at its
            defaults.
        name: the model's name (the task's: ``"translator"``, ``"transliterator"``).

    Call arguments:
        inputs: ``{"source": (B, S), "target_in": (B, T)}`` int32 ids, 0 the padding.

    Returns:
        Logits ``(B, T, vocab_size)`` (log-probabilities with ``copy_mechanism``).

    Example:
        >>> from zoo.models.translator import TranslatorBackbone, get_config
        >>> backbone = TranslatorBackbone.from_architecture(get_config("tiny"))
        >>> backbone.output_shape
        (None, None, 1000)
        >>> backbone.roles.num_caches
        2

    References:
        Vaswani et al. 2017, "Attention Is All You Need".
    """

    config_class = TranslatorConfig
    default_name = "translator"

    @property
    def roles(self):
        """The :class:`~zoo.models.translator.TranslatorLayers` the stacks and searches run."""
        return self.parts

    @staticmethod
    def build_graph(config):
        layers = make_translator_layers(config)
        source = keras.Input((None,), dtype="int32", name="source")
        target_in = keras.Input((None,), dtype="int32", name="target_in")
        memory = encoder_stack(layers, source)  # (B, S, D) or one per block
        decoder_input = target_in
        copy = copy_inputs(config.copy_mechanism, memory, source)
        if config.scheduled_sampling != "none":
            first, _, _ = decoder_stack(layers, target_in, memory, copy_source=copy)  # (B, T, V)
            sampling = ScheduledSampling(
                config.scheduled_sampling, k=config.scheduled_sampling_k,
                c=config.scheduled_sampling_c, minimum=config.scheduled_sampling_min,
                name="scheduled_sampling",
            )  # fmt: skip
            decoder_input = sampling(target_in, first)  # (B, T): the gold input at inference
        guided = config.guided_attention_weight > 0
        logits, _, cross = decoder_stack(
            layers, decoder_input, memory, return_cross_attention=guided, copy_source=copy
        )  # (B, T, V), one (B, N, T, S) per block
        if guided:
            guide = GuidedAttention(
                config.guided_attention_weight, decay=config.guided_attention_decay,
                sigma=config.guided_attention_sigma, name="guided_attention",
            )  # fmt: skip
            logits = guide(logits, cross, decoder_input, source)  # the loss added in training
        return {"source": source, "target_in": target_in}, logits, layers


def build_translator(config, name=None):
    """A new :class:`TranslatorBackbone` of a training config's architecture (``name``: the
    task's, by default ``"translator"``)."""
    return TranslatorBackbone.from_architecture(config, name=name)
