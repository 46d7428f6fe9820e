"""The translator's config and its named presets (``tiny`` for tests, ``demo``, ``small``, ``base``)."""

from dataclasses import dataclass, replace

from zoo.layers.attention.scaled_dot_product import SCORE_FUNCTIONS
from zoo.layers.scheduled_sampling import SCHEDULES, check_schedule
from zoo.models.presets import from_presets
from zoo.models.training_config import TrainingConfig

LONG_PAIRS = ("skip", "truncate")  # what training does with a pair over max_length

__all__ = ["CROSS_ATTENTIONS", "LONG_PAIRS", "PRESETS", "TranslatorConfig", "get_config"]

# The cross attentions a translator's decoder blocks can use (zoo/layers/attention/).
CROSS_ATTENTIONS = ("mha", "location_aware", "monotonic")


@dataclass(frozen=True)
class TranslatorConfig(TrainingConfig):
    """Everything that defines a translator and how it trains (the training fields are
    :class:`~zoo.models.training_config.TrainingConfig`'s).

    Model:
        vocab_size: size of the joint source/target SentencePiece vocabulary.
        max_length: the longest source or target sequence, in tokens (longer input is truncated).
        d_model, num_heads, ff_dim: sizes of every block.
        encoder_layers, decoder_layers: depth of each stack.
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
        cross_attention: the decoder's cross attention, for tasks whose alignment moves left
            to right: ``"mha"``; ``"location_aware"``, whose scores add features of the
            attention so far (Chorowski et al. 2015; :class:`~zoo.layers.attention.
            LocationAwareAttention`: in training a first pass of the decoder, no gradient,
            gives them; in decoding the searches' caches carry them); or ``"monotonic"``,
            which never goes back (Raffel et al. 2017; :class:`~zoo.layers.attention.
            MonotonicAttention`: the expected alignment in training, hard attention in the
            step-by-step searches; its score is the scaled dot product).
        cross_attention_layers: what each decoder block's cross attention reads. ``"last"``:
            the encoder's last layer. ``"mix"``: its own learned softmax mix of every encoder
            layer's output, the embeddings included (transparent attention, Bapna et al.
            2018; :class:`~zoo.layers.LayerMix`). A tuple of one index per decoder block: the
            output it reads, 0 the embeddings and ``encoder_layers`` the last block. In pre-LN
            models the encoder's final norm normalizes what each block reads (the mix, or the
            chosen output), so that index ``encoder_layers`` is the default model. The NAT
            refuses anything but ``"last"``.
        copy_mechanism: a pointer-generator on the output (See et al. 2017;
            :class:`~zoo.layers.PointerGenerator`): a one-head copy attention over the
            encoder output (the last decoder block's, when the blocks read chosen layers)
            and a learned generation probability mix the vocabulary distribution with copies
            of source tokens. The model's outputs are then log-probabilities, which the loss
            and the searches read as logits. Copying is piece by piece (byte pieces, with the
            byte fallback).

    Training:
        scheduled_sampling: ``"none"``, or the decay of the gold-token probability of
            two-pass scheduled sampling (:class:`~zoo.layers.ScheduledSampling`):
            ``"linear"``, ``"exponential"`` or ``"inverse_sigmoid"``. The model then runs its
            decoder twice in training, the second time over gold tokens mixed with the first
            pass's argmax predictions (no gradient through the first pass), and counts its
            training steps in a saved weight (a resumed run goes on with the schedule). At
            inference its outputs are the plain translator's, and decoding never runs the
            first pass. The NAT refuses it.
        scheduled_sampling_k, scheduled_sampling_c, scheduled_sampling_min: the schedule's
            ``k`` (None: the schedule's default; exponential ``0 < k <= 1``, inverse sigmoid
            ``k >= 1``), the linear slope ``c`` and the floor under every schedule
            (:func:`zoo.layers.scheduled_sampling.gold_probability`).
        guided_attention_weight: above 0, the weight of an auxiliary loss that pulls every
            decoder block's cross attention toward the diagonal (Tachibana et al. 2017;
            :class:`~zoo.layers.GuidedAttention`), for monotonic tasks.
        guided_attention_decay: the loss weight's factor per training step (1: constant).
        guided_attention_sigma: the width of the diagonal band that goes unpenalised.
        bucket_width: the length step between the batches' length buckets. Under XLA each
            bucket is one padded shape, so one compiled program: wider buckets mean fewer
            compilations (what a short run spends its time on) and more padding.
        vocab_sample_size: at most this many sentences, a uniform random sample of the
            training corpus, learn the SentencePiece model.
        source_lang, target_lang: the languages of the data (codes such as ``en``, ``cs``,
            ``zh``): recorded in the workdir and the export, and sacreBLEU's tokenizer follows
            the target's. The defaults are the bundled Multi30k's.
        shuffle_buffer: the training pairs in one shuffle window, and the lines of a piece of
            a file that an epoch reads in a drawn order (:class:`zoo.data.ParallelCorpus`).
        long_pairs: what training does with a pair over ``max_length``: ``"skip"`` it (and
            count it), or ``"truncate"`` it. Validation always truncates, so every pair counts.
    """

    vocab_size: int = 8000
    max_length: int = 128
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 4
    activation_dropout: float = 0.0
    activation: str = "relu"
    normalize_first: bool = True
    position: str = "sinusoidal"
    attention: str = "mha"
    share_embeddings: bool = True
    bucket_width: int = 8
    vocab_sample_size: int = 1_000_000
    source_lang: str = "en"
    target_lang: str = "de"
    shuffle_buffer: int = 100_000
    long_pairs: str = "skip"
    cross_attention_score: str = "scaled_dot"
    cross_attention: str = "mha"
    cross_attention_layers: str | tuple = "last"
    scheduled_sampling: str = "none"
    scheduled_sampling_k: float | None = None
    scheduled_sampling_c: float = 1e-4
    scheduled_sampling_min: float = 0.0
    guided_attention_weight: float = 0.0
    guided_attention_decay: float = 1.0
    guided_attention_sigma: float = 0.2
    copy_mechanism: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.cross_attention_score not in SCORE_FUNCTIONS:
            raise ValueError(
                f"Unknown cross_attention_score {self.cross_attention_score!r}; expected one "
                f"of {SCORE_FUNCTIONS}."
            )
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
        if self.long_pairs not in LONG_PAIRS:
            raise ValueError(f"long_pairs must be one of {LONG_PAIRS}, got {self.long_pairs!r}.")
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
    warmup_steps=100,
    batch_tokens=2048,
    epochs=2,
)
# `small`'s width with half its depth, a short warm-up at a higher peak and no attention dropout,
# so that `make demo`'s 6 minutes buy several epochs (one setting, not a sweep).
PRESETS["demo"] = replace(
    PRESETS["small"],
    vocab_size=4000,
    max_length=64,
    encoder_layers=2,
    decoder_layers=2,
    attention_dropout=0.0,
    learning_rate=2e-3,
    warmup_steps=300,
    epochs=100,
    # Fewer buckets, fewer XLA compiles in the first epoch of a 6-minute run.
    bucket_width=16,
)
# A deep encoder and a one-block decoder at `small`'s width: the fast autoregressive rival of the
# NAT (Kasai et al. 2021, "Deep Encoder, Shallow Decoder": 12+1 kept the BLEU of 6+6 and decoded
# 2.5 times faster at batch 1). The decoder's steps are what a search pays for, the encoder runs
# once per sentence.
PRESETS["deep_shallow"] = replace(PRESETS["small"], encoder_layers=7, decoder_layers=1)
PRESETS["base"] = replace(
    PRESETS["small"],
    d_model=512,
    num_heads=8,
    ff_dim=2048,
    encoder_layers=6,
    decoder_layers=6,
    warmup_steps=4000,
    learning_rate=7e-4,
)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", epochs=10)``."""
    return from_presets(PRESETS, preset, "translator", **overrides)

