"""The translator's architecture and its named presets (``tiny`` for tests, ``demo``, ``small``,
``base``): what its backbone is built from. How it trains is the task's training config."""

from dataclasses import dataclass, fields, replace

from zoo.layers.attention.scaled_dot_product import SCORE_FUNCTIONS
from zoo.layers.scheduled_sampling import SCHEDULES, check_schedule
from zoo.models.presets import from_presets

__all__ = [
    "CROSS_ATTENTIONS", "PRESETS", "Seq2SeqConfig", "TranslatorConfig", "get_config",
    "seq2seq_fields",
]  # fmt: skip

# The cross attentions a translator's decoder blocks can use (zoo/layers/attention/).
CROSS_ATTENTIONS = ("mha", "location_aware", "monotonic")


@dataclass(frozen=True)
class Seq2SeqConfig:
    """The architecture that the translator and the NAT share: an encoder-decoder transformer,
    the arguments of its backbone.

    Args:
        vocab_size: size of the joint source/target SentencePiece vocabulary.
        max_length: the longest source or target sequence, in tokens (longer input is truncated).
        d_model, num_heads, ff_dim: sizes of every block.
        encoder_layers, decoder_layers: depth of each stack.
        dropout, attention_dropout: residual (and embedding) dropout, attention-weight dropout.
        activation_dropout: dropout on the feed-forward network's inner activations.
        activation: the feed-forward activation (``relu``, ``gelu``, ``swiglu``, ...).
        normalize_first: pre-LN blocks (with a final norm after each stack) when True.
        position: ``"sinusoidal"`` or ``"learned"`` positions on the token embeddings.
        attention: the registered self-attention variant of every block.
        share_embeddings: one embedding matrix for source, target and the output projection.
        cross_attention_score: the score function of the decoder's cross attention:
            ``"scaled_dot"`` (Vaswani et al. 2017), ``"dot"`` (Luong et al. 2015),
            ``"cosine"`` or ``"additive"`` (Bahdanau et al. 2015). Self-attention keeps the
            scaled dot product.
    """

    vocab_size: int = 8000
    max_length: int = 128
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 4
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    activation: str = "relu"
    normalize_first: bool = True
    position: str = "sinusoidal"
    attention: str = "mha"
    share_embeddings: bool = True
    cross_attention_score: str = "scaled_dot"

    def __post_init__(self):
        if self.cross_attention_score not in SCORE_FUNCTIONS:
            raise ValueError(
                f"Unknown cross_attention_score {self.cross_attention_score!r}; expected one "
                f"of {SCORE_FUNCTIONS}."
            )


def seq2seq_fields(config):
    """The :class:`Seq2SeqConfig` fields of ``config`` (a translator's or a NAT's), by name."""
    return {field.name: getattr(config, field.name) for field in fields(Seq2SeqConfig)}


@dataclass(frozen=True)
class TranslatorConfig(Seq2SeqConfig):
    """The translator's architecture, the arguments of its backbone: :class:`Seq2SeqConfig`'s
    and the left-to-right decoder's own (how it trains is the task's training config).

    Args:
        cross_attention: the decoder's cross attention: ``"mha"``; ``"location_aware"``, whose
            scores add features of the attention so far (Chorowski et al. 2015;
            :class:`~zoo.layers.attention.LocationAwareAttention`); or ``"monotonic"``, which
            never goes back (Raffel et al. 2017; :class:`~zoo.layers.attention.
            MonotonicAttention`; its score is the scaled dot product).
        cross_attention_layers: what each decoder block's cross attention reads: ``"last"``
            (the encoder's last layer), ``"mix"`` (a learned softmax mix of every encoder
            layer, the embeddings included: Bapna et al. 2018, :class:`~zoo.layers.LayerMix`),
            or a tuple of one index per decoder block (0 the embeddings, ``encoder_layers`` the
            last block). In pre-LN models the encoder's final norm applies to what each reads.
        copy_mechanism: a pointer-generator on the output (See et al. 2017;
            :class:`~zoo.layers.PointerGenerator`); the outputs are then log-probabilities,
            which the loss and the searches read as logits.
        scheduled_sampling: ``"none"``, or the decay of two-pass scheduled sampling's
            gold-token probability (:class:`~zoo.layers.ScheduledSampling`): ``"linear"``,
            ``"exponential"`` or ``"inverse_sigmoid"``. Training runs the decoder twice and
            counts its steps in a saved weight (a resumed run keeps the schedule); inference is
            the plain translator's.
        scheduled_sampling_k, scheduled_sampling_c, scheduled_sampling_min: the schedule's
            ``k`` (None: its default; exponential ``0 < k <= 1``, inverse sigmoid ``k >= 1``),
            the linear slope ``c`` and the floor
            (:func:`zoo.layers.scheduled_sampling.gold_probability`).
        guided_attention_weight: above 0, the weight of an auxiliary loss that pulls every
            decoder block's cross attention toward the diagonal (Tachibana et al. 2017;
            :class:`~zoo.layers.GuidedAttention`), for monotonic tasks.
        guided_attention_decay: the loss weight's factor per training step (1: constant).
        guided_attention_sigma: the width of the diagonal band that goes unpenalised.
    """

    cross_attention: str = "mha"
    cross_attention_layers: str | tuple = "last"
    copy_mechanism: bool = False
    scheduled_sampling: str = "none"
    scheduled_sampling_k: float | None = None
    scheduled_sampling_c: float = 1e-4
    scheduled_sampling_min: float = 0.0
    guided_attention_weight: float = 0.0
    guided_attention_decay: float = 1.0
    guided_attention_sigma: float = 0.2

    def __post_init__(self):
        super().__post_init__()
        if self.cross_attention not in CROSS_ATTENTIONS:
            raise ValueError(
                f"Unknown cross_attention {self.cross_attention!r}; expected one of "
                f"{CROSS_ATTENTIONS}."
            )
        if self.cross_attention == "monotonic" and self.cross_attention_score != "scaled_dot":
            raise ValueError(
                "cross_attention='monotonic' scores with the scaled dot product: "
                f"cross_attention_score must stay 'scaled_dot', got {self.cross_attention_score!r}."
            )
        if isinstance(self.cross_attention_layers, list):  # read back from config.json
            object.__setattr__(self, "cross_attention_layers", tuple(self.cross_attention_layers))
        _check_cross_attention_layers(self)
        if (
            self.guided_attention_weight < 0
            or not 0 < self.guided_attention_decay <= 1
            or self.guided_attention_sigma <= 0
        ):
            raise ValueError(
                "guided_attention_weight must be >= 0, guided_attention_decay in (0, 1] and "
                f"guided_attention_sigma > 0; got {self.guided_attention_weight!r}, "
                f"{self.guided_attention_decay!r}, {self.guided_attention_sigma!r}."
            )
        if not isinstance(self.copy_mechanism, bool):
            raise ValueError(
                f"copy_mechanism must be True or False, got {self.copy_mechanism!r}."
            )
        if self.scheduled_sampling not in ("none",) + SCHEDULES:
            raise ValueError(
                f"Unknown scheduled_sampling {self.scheduled_sampling!r}; expected one of "
                f"{('none',) + SCHEDULES}."
            )
        if self.scheduled_sampling != "none":
            check_schedule(
                self.scheduled_sampling, self.scheduled_sampling_k, self.scheduled_sampling_c,
                self.scheduled_sampling_min, names=_SCHEDULE_FIELDS,
            )  # fmt: skip


# What the schedule's checks call its arguments: the config's fields.
_SCHEDULE_FIELDS = {
    "schedule": "scheduled_sampling",
    "k": "scheduled_sampling_k",
    "c": "scheduled_sampling_c",
    "minimum": "scheduled_sampling_min",
}


def _check_cross_attention_layers(config):
    layers = config.cross_attention_layers
    if isinstance(layers, str):
        if layers not in ("last", "mix"):
            raise ValueError(
                f"Unknown cross_attention_layers {layers!r}; expected 'last', 'mix' or a tuple "
                "of encoder-layer indices, one per decoder block."
            )
        return
    indices = range(config.encoder_layers + 1)
    if (
        not isinstance(layers, tuple)
        or len(layers) != config.decoder_layers
        or not all(isinstance(i, int) and not isinstance(i, bool) and i in indices for i in layers)
    ):
        raise ValueError(
            f"cross_attention_layers={layers!r} must be 'last', 'mix' or a tuple of "
            f"{config.decoder_layers} indices (one per decoder block), each from 0 (the "
            f"embeddings) to {config.encoder_layers} (the last encoder block)."
        )


# `small` is the fairseq transformer-tiny shape the issue compares against (4+4 layers,
# d=128, ff=256, 4 heads, shared embeddings); `tiny` is for tests; `demo` is sized for `make
# demo`'s 6 minutes of training on 2 CPU cores.
PRESETS = {"small": TranslatorConfig()}
PRESETS["tiny"] = replace(
    PRESETS["small"],
    vocab_size=1000,
    max_length=48,
    d_model=32,
    num_heads=2,
    ff_dim=64,
    encoder_layers=1,
    decoder_layers=1,
    dropout=0.0,
    attention_dropout=0.0,
)
# `small`'s width with half its depth and no attention dropout, so that `make demo`'s 6 minutes
# buy several epochs (its training is the task's `demo` preset).
PRESETS["demo"] = replace(
    PRESETS["small"],
    vocab_size=4000,
    max_length=64,
    encoder_layers=2,
    decoder_layers=2,
    attention_dropout=0.0,
)
# A deep encoder and a one-block decoder at `small`'s width: the fast autoregressive rival of the
# NAT (Kasai et al. 2021, "Deep Encoder, Shallow Decoder"): a search pays for the decoder's
# steps, while the encoder runs once per sentence.
PRESETS["deep_shallow"] = replace(PRESETS["small"], encoder_layers=7, decoder_layers=1)
PRESETS["base"] = replace(
    PRESETS["small"],
    d_model=512,
    num_heads=8,
    ff_dim=2048,
    encoder_layers=6,
    decoder_layers=6,
)


def get_config(preset, **overrides):
    """The named architecture, with any field overridden: ``get_config("small", d_model=256)``."""
    return from_presets(PRESETS, preset, "translator", **overrides)

