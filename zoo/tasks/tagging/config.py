"""The tagger's training config (the optimizer's, the vocabulary's and the treebank's settings),
and the config of a run, which joins it with the tagger's architecture; their presets."""

from dataclasses import dataclass, replace

from zoo.models.tagger import PRESETS as ARCHITECTURES
from zoo.models.tagger import TaggerConfig
from zoo.models.presets import from_presets
from zoo.training.config import TrainingConfig, run_presets

__all__ = ["PRESETS", "TRAINING_PRESETS", "TaggerRun", "TaggingTraining", "get_config"]


@dataclass(frozen=True)
class TaggingTraining(TrainingConfig):
    """How a tagger trains: :class:`~zoo.training.config.TrainingConfig`'s fields, and the
    settings of its vocabulary and data.

    Args:
        lowercase: lowercase words before the word-vocabulary lookup (characters keep case).
        min_word_count: words seen fewer times in training are OOV; the training singletons
            that become OOV teach the model to tag from characters alone.
        word_dropout: the probability with which the training pipeline replaces a word id by
            the OOV id (1), so that every word is also learned from its characters (Kiperwasser
            & Goldberg 2016, Plank et al. 2016). Not applied by the model.
        language: the treebank's language (``en``; recorded in the workdir and the export;
            read from a UD file name, or given).
        treebank: the treebank's name (``EWT``).
    """

    lowercase: bool = True
    min_word_count: int = 2
    word_dropout: float = 0.25
    language: str = "en"
    treebank: str = "EWT"


@dataclass(frozen=True)
class TaggerRun(TaggerConfig, TaggingTraining):
    """A tagger's run, as its workdir's ``config.json`` records it: the architecture
    (:class:`~zoo.models.tagger.TaggerConfig`, the backbone's arguments) and how it trains
    (:class:`TaggingTraining`)."""

    def __post_init__(self):
        TaggerConfig.__post_init__(self)
        TaggingTraining.__post_init__(self)


# `small` trains the EWT model (the reasons are with the architecture's preset): strong
# regularisation, and averaged weights, because the raw ones overfit.
TRAINING_PRESETS = {
    "small": TaggingTraining(label_smoothing=0.0, learning_rate=2e-3, warmup_steps=400,
                             ema_momentum=0.998, batch_tokens=1024, epochs=16),
}  # fmt: skip
TRAINING_PRESETS["tiny"] = replace(
    TRAINING_PRESETS["small"],
    ema_momentum=0.0,  # a few hundred steps: the average would lag far behind
    warmup_steps=20,
    batch_tokens=256,
    epochs=2,
)
PRESETS = run_presets(TaggerRun, ARCHITECTURES, TRAINING_PRESETS)


def get_config(preset, **overrides):
    """The run config of the named preset, with any field (of the architecture or the
    training) overridden: ``get_config("tiny", epochs=3, d_model=64)``."""
    return from_presets(PRESETS, preset, "tagger", **overrides)
