"""The translator's training config (the optimizer's and the data's settings), and the config of
a run, which joins it with the translator's architecture; their presets."""

from dataclasses import dataclass, replace

from zoo.models.translator import PRESETS as ARCHITECTURES
from zoo.models.translator import TranslatorConfig
from zoo.models.presets import from_presets
from zoo.training.config import TrainingConfig, run_presets

__all__ = [
    "LONG_PAIRS", "PRESETS", "TRAINING_PRESETS", "TranslationTraining", "TranslatorRun",
    "get_config",
]  # fmt: skip

LONG_PAIRS = ("skip", "truncate")  # what training does with a pair over max_length


@dataclass(frozen=True)
class TranslationTraining(TrainingConfig):
    """How a translator trains: :class:`~zoo.training.config.TrainingConfig`'s fields, and the
    settings of its data.

    Args:
        bucket_width: the length step between the batches' length buckets. Under XLA each
            bucket is one padded shape, so one compiled program: wider buckets mean fewer
            compilations (what a short run spends its time on) and more padding.
        vocab_sample_size: at most this many sentences, a uniform random sample of the
            training corpus, learn the SentencePiece model.
        source_lang, target_lang: the languages of the data (codes such as ``en``, ``cs``,
            ``zh``): recorded in the workdir and the export, and sacreBLEU's tokenizer follows
            the target's. The defaults are the bundled Multi30k's.
        shuffle_buffer: the training pairs in one window: a corpus's are shuffled within it
            (:meth:`zoo.data.ParallelCorpus.windows`), in-memory pairs are shuffled whole; an
            epoch is bucketed window by window, and a resumed run starts in its window.
        long_pairs: what training does with a pair over ``max_length``: ``"skip"`` it (and
            count it), or ``"truncate"`` it. Validation always truncates, so every pair counts.
    """

    bucket_width: int = 8
    vocab_sample_size: int = 1_000_000
    source_lang: str = "en"
    target_lang: str = "de"
    shuffle_buffer: int = 100_000
    long_pairs: str = "skip"

    def __post_init__(self):
        super().__post_init__()
        if self.long_pairs not in LONG_PAIRS:
            raise ValueError(f"long_pairs must be one of {LONG_PAIRS}, got {self.long_pairs!r}.")


@dataclass(frozen=True)
class TranslatorRun(TranslatorConfig, TranslationTraining):
    """A translator's run, as its workdir's ``config.json`` records it: the architecture
    (:class:`~zoo.models.translator.TranslatorConfig`, the backbone's arguments) and how it
    trains (:class:`TranslationTraining`), each checked by its own class."""

    def __post_init__(self):
        TranslatorConfig.__post_init__(self)
        TranslationTraining.__post_init__(self)


TRAINING_PRESETS = {"small": TranslationTraining()}
TRAINING_PRESETS["tiny"] = replace(TRAINING_PRESETS["small"], warmup_steps=100, batch_tokens=2048,
                                   epochs=2)  # fmt: skip
# A short warm-up at a higher peak, so that `make demo`'s 6 minutes buy several epochs, and
# fewer buckets, fewer XLA compiles in its first epoch.
TRAINING_PRESETS["demo"] = replace(TRAINING_PRESETS["small"], learning_rate=2e-3,
                                   warmup_steps=300, epochs=100, bucket_width=16)  # fmt: skip
TRAINING_PRESETS["deep_shallow"] = TRAINING_PRESETS["small"]
TRAINING_PRESETS["base"] = replace(TRAINING_PRESETS["small"], warmup_steps=4000,
                                   learning_rate=7e-4)  # fmt: skip
PRESETS = run_presets(TranslatorRun, ARCHITECTURES, TRAINING_PRESETS)


def get_config(preset, **overrides):
    """The run config of the named preset, with any field (of the architecture or the
    training) overridden: ``get_config("tiny", epochs=3, d_model=64)``."""
    return from_presets(PRESETS, preset, "translator", **overrides)
