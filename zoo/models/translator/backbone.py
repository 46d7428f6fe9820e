"""The translator's backbone: a Keras model that owns its layers, in keras-hub's shape.

Its config is its constructor arguments (the architecture, nothing about data or training), so
``keras.models.load_model`` rebuilds it from a ``.keras`` file, and the searches get the layers
by role from :attr:`TranslatorBackbone.roles`, never by their names.
"""

import keras
from keras_hub.models import Backbone

from zoo.layers import GuidedAttention, ScheduledSampling
from zoo.models.translator.config import TranslatorConfig
from zoo.models.translator.stacks import (
    NewLayers,
    copy_inputs,
    decoder_stack,
    encoder_stack,
)

__all__ = [
    "ARCHITECTURE_FIELDS", "ArchitectureBackbone", "TranslatorBackbone", "with_weights_of",
]  # fmt: skip

# The fields of a TranslatorConfig that make the architecture: the backbone's arguments.
ARCHITECTURE_FIELDS = (
    "vocab_size", "max_length", "d_model", "num_heads", "ff_dim", "encoder_layers",
    "decoder_layers", "dropout", "attention_dropout", "activation_dropout", "activation",
    "normalize_first", "position", "attention", "share_embeddings", "cross_attention_score",
    "cross_attention", "cross_attention_layers", "copy_mechanism", "scheduled_sampling",
    "scheduled_sampling_k", "scheduled_sampling_c", "scheduled_sampling_min",
    "guided_attention_weight", "guided_attention_decay", "guided_attention_sigma",
)  # fmt: skip


class ArchitectureBackbone(Backbone):
    """A keras-hub backbone whose config is its architecture: the :attr:`architecture_fields`
    of :attr:`config_class`, whose checks name a bad argument and whose defaults fill the
    others. A subclass builds its graph (:meth:`build_graph`) over the layers of
    :class:`~zoo.models.translator.stacks.NewLayers`, which makes each layer just before its
    first call: the order of the random draws, and with it what a given seed builds, is the
    functional builder's of 0.1.0. A Functional model's weights are saved by its graph's
    layers, in their order, so the weights files of 0.1.0's functional models load as they are.
    """

    config_class = None
    architecture_fields = ()
    default_name = None

    def __init__(self, name=None, dtype=None, **kwargs):
        architecture = {field: kwargs.pop(field) for field in self.architecture_fields
                        if field in kwargs}  # fmt: skip
        config = self.config_class(**architecture)
        made = NewLayers(config)
        inputs, outputs, own_layers = self.build_graph(config, made)
        super().__init__(inputs=inputs, outputs=outputs, name=name or self.default_name,
                         dtype=dtype, **kwargs)  # fmt: skip
        self._roles = made.roles()
        self._own_layers = own_layers
        self._architecture = architecture

    @staticmethod
    def build_graph(config, layers):
        """``(inputs, outputs, own_layers)`` on symbolic inputs, over ``layers``."""
        raise NotImplementedError

    @property
    def roles(self):
        """The :class:`~zoo.models.translator.TranslatorLayers` the stacks and searches run."""
        return self._roles

    @classmethod
    def from_training_config(cls, config, name=None):
        """The backbone of a training config's architecture."""
        return cls(**{field: getattr(config, field) for field in cls.architecture_fields},
                   name=name)  # fmt: skip

    @classmethod
    def from_functional(cls, model, config):
        """The backbone of a functional model saved by zoo 0.1.0, with its weights.

        Args:
            model: the ``keras.Model`` of its ``model.keras`` file.
            config: the training config of its workdir's ``config.json``.
        """
        return with_weights_of(cls.from_training_config(config, name=model.name), model)

    def get_config(self):
        architecture = {field: list(value) if isinstance(value, tuple) else value
                        for field, value in self._architecture.items()}  # fmt: skip
        return {**super().get_config(), **architecture}


@keras.saving.register_keras_serializable(package="zoo")
class TranslatorBackbone(ArchitectureBackbone):
    """The encoder-decoder transformer: ``{"source", "target_in"}`` token ids -> target logits.

    Args:
        **architecture: the fields of :class:`~zoo.models.translator.TranslatorConfig` named in
            :data:`ARCHITECTURE_FIELDS` (``vocab_size``, ``d_model``, ...; see it for each
            one's meaning), the others at its defaults.
        name: the model's name (the task's: ``"translator"``, ``"transliterator"``).

    Call arguments:
        inputs: ``{"source": (B, S), "target_in": (B, T)}`` int32 ids, 0 the padding.

    Returns:
        Logits ``(B, T, vocab_size)`` (log-probabilities with ``copy_mechanism``).

    Example:
        >>> from zoo.models.translator import TranslatorBackbone, get_config
        >>> backbone = TranslatorBackbone.from_training_config(get_config("tiny"))
        >>> backbone.output_shape
        (None, None, 1000)
        >>> backbone.roles.num_caches
        2

    References:
        Vaswani et al. 2017, "Attention Is All You Need".
    """

    config_class = TranslatorConfig
    architecture_fields = ARCHITECTURE_FIELDS
    default_name = "translator"

    @staticmethod
    def build_graph(config, layers):
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
        return {"source": source, "target_in": target_in}, logits, None


def with_weights_of(backbone, model):
    """``backbone`` with the weights of ``model``, a functional model of zoo 0.1.0 of the same
    layers (its weights in the same order, by the same paths); a one-line error otherwise."""
    old = [weight.path for weight in model.weights]
    new = [weight.path for weight in backbone.weights]
    if old != new:
        raise ValueError(f"{model.name!r} does not have the weights of its config.json's "
                         f"{backbone.name}: {len(old)} weights against {len(new)}")  # fmt: skip
    backbone.set_weights(model.get_weights())
    return backbone
