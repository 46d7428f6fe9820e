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

__all__ = ["ARCHITECTURE_FIELDS", "TranslatorBackbone", "with_weights_of"]

# The fields of a TranslatorConfig that make the architecture: the backbone's arguments.
ARCHITECTURE_FIELDS = (
    "vocab_size", "max_length", "d_model", "num_heads", "ff_dim", "encoder_layers",
    "decoder_layers", "dropout", "attention_dropout", "activation_dropout", "activation",
    "normalize_first", "position", "attention", "share_embeddings", "cross_attention_score",
    "cross_attention", "cross_attention_layers", "copy_mechanism", "scheduled_sampling",
    "scheduled_sampling_k", "scheduled_sampling_c", "scheduled_sampling_min",
    "guided_attention_weight", "guided_attention_decay", "guided_attention_sigma",
)  # fmt: skip


@keras.saving.register_keras_serializable(package="zoo")
class TranslatorBackbone(Backbone):
    """The encoder-decoder transformer: ``{"source", "target_in"}`` token ids -> target logits.

    Args:
        vocab_size, max_length, d_model, num_heads, ff_dim, encoder_layers, decoder_layers,
        ...: the architecture, the fields of :class:`~zoo.models.translator.TranslatorConfig`
            named in :data:`ARCHITECTURE_FIELDS` (see it for each one's meaning).
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

    def __init__(
        self,
        vocab_size,
        max_length=128,
        d_model=128,
        num_heads=4,
        ff_dim=256,
        encoder_layers=4,
        decoder_layers=4,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.0,
        activation="relu",
        normalize_first=True,
        position="sinusoidal",
        attention="mha",
        share_embeddings=True,
        cross_attention_score="scaled_dot",
        cross_attention="mha",
        cross_attention_layers="last",
        copy_mechanism=False,
        scheduled_sampling="none",
        scheduled_sampling_k=None,
        scheduled_sampling_c=1e-4,
        scheduled_sampling_min=0.0,
        guided_attention_weight=0.0,
        guided_attention_decay=1.0,
        guided_attention_sigma=0.2,
        name="translator",
        dtype=None,
        **kwargs,
    ):
        arguments = {field: value for field, value in locals().items()
                     if field in ARCHITECTURE_FIELDS}  # fmt: skip
        if isinstance(arguments["cross_attention_layers"], list):  # read back from JSON
            arguments["cross_attention_layers"] = tuple(arguments["cross_attention_layers"])
        config = TranslatorConfig(**arguments)  # its checks name a bad argument
        # NewLayers makes each layer just before its first call: the order of the random
        # draws, and with it what a given seed builds, is the functional builder's of 0.1.0.
        made = NewLayers(config)
        source = keras.Input((None,), dtype="int32", name="source")
        target_in = keras.Input((None,), dtype="int32", name="target_in")
        memory = encoder_stack(made, source)  # (B, S, D) or one per block
        decoder_input = target_in
        copy = copy_inputs(copy_mechanism, memory, source)
        sampling = guide = None
        if scheduled_sampling != "none":
            first, _, _ = decoder_stack(made, target_in, memory, copy_source=copy)  # (B, T, V)
            sampling = ScheduledSampling(
                scheduled_sampling, k=scheduled_sampling_k, c=scheduled_sampling_c,
                minimum=scheduled_sampling_min, name="scheduled_sampling",
            )  # fmt: skip
            decoder_input = sampling(target_in, first)  # (B, T): the gold input at inference
        guided = guided_attention_weight > 0
        logits, _, cross = decoder_stack(
            made, decoder_input, memory, return_cross_attention=guided, copy_source=copy
        )  # (B, T, V), one (B, N, T, S) per block
        if guided:
            guide = GuidedAttention(
                guided_attention_weight, decay=guided_attention_decay,
                sigma=guided_attention_sigma, name="guided_attention",
            )  # fmt: skip
            logits = guide(logits, cross, decoder_input, source)  # the loss added in training
        roles = made.roles()
        super().__init__(
            inputs={"source": source, "target_in": target_in},
            outputs=logits,
            name=name,
            dtype=dtype,
            **kwargs,
        )
        # Private: a Functional model's weights are saved by its graph's layers, in their
        # order, so the weights files of 0.1.0's functional translators load as they are.
        self._roles = roles
        self._arguments = arguments

    @property
    def roles(self):
        """The :class:`~zoo.models.translator.TranslatorLayers` the stacks and searches run."""
        return self._roles

    @classmethod
    def from_training_config(cls, config, name="translator"):
        """The backbone of a :class:`~zoo.models.translator.TranslatorConfig`'s architecture."""
        return cls(**{field: getattr(config, field) for field in ARCHITECTURE_FIELDS}, name=name)

    @classmethod
    def from_functional(cls, model, config):
        """The backbone of a functional translator saved by zoo 0.1.0, with its weights.

        Args:
            model: the ``keras.Model`` of its ``model.keras`` file.
            config: the :class:`~zoo.models.translator.TranslatorConfig` of its workdir's
                ``config.json``.
        """
        return with_weights_of(cls.from_training_config(config, name=model.name), model)

    def get_config(self):
        config = super().get_config()
        arguments = dict(self._arguments)
        if isinstance(arguments["cross_attention_layers"], tuple):
            arguments["cross_attention_layers"] = list(arguments["cross_attention_layers"])
        config.update(arguments)
        return config


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
