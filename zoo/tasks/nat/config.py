"""The NAT's training config and the config of its run (its architecture and how it trains)."""

from dataclasses import dataclass

from zoo.models.nat import PRESETS as ARCHITECTURES
from zoo.models.nat import NATConfig
from zoo.tasks.translation.config import TRAINING_PRESETS as TRANSLATION_TRAINING
from zoo.tasks.translation.config import TranslationTraining
from zoo.models.presets import from_presets
from zoo.training.config import field_values, run_presets

__all__ = ["NATRun", "NATTraining", "PRESETS", "get_config"]


@dataclass(frozen=True)
class NATTraining(TranslationTraining):
    """How the NAT trains: a translator's training config and the weight of its length loss.

    Args:
        length_loss_weight: the weight of the length predictor's cross entropy beside the
            tokens' (fairseq's default, 0.1).
    """

    length_loss_weight: float = 0.1


@dataclass(frozen=True)
class NATRun(NATConfig, NATTraining):
    """A NAT's run, as its workdir's ``config.json`` records it: the architecture
    (:class:`~zoo.models.nat.NATConfig`) and how it trains (:class:`NATTraining`)."""

    # The translator's decoder options that a NAT's config held until it had its own
    # architecture, at the values it had to keep: a workdir of then resumes.
    retired_fields = {
        **NATTraining.retired_fields,
        "cross_attention": "mha", "cross_attention_layers": "last", "copy_mechanism": False,
        "scheduled_sampling": "none", "scheduled_sampling_k": None, "scheduled_sampling_c": 1e-4,
        "scheduled_sampling_min": 0.0, "guided_attention_weight": 0.0,
        "guided_attention_decay": 1.0, "guided_attention_sigma": 0.2,
    }  # fmt: skip

    def __post_init__(self):
        NATConfig.__post_init__(self)
        NATTraining.__post_init__(self)


TRAINING_PRESETS = {name: NATTraining(**field_values(TRANSLATION_TRAINING[name]))
                    for name in ("tiny", "small")}  # fmt: skip
PRESETS = run_presets(NATRun, ARCHITECTURES, TRAINING_PRESETS)


def get_config(preset, **overrides):
    """The run config of the named preset, with any field (of the architecture or the
    training) overridden: ``get_config("tiny", epochs=3, d_model=64)``."""
    return from_presets(PRESETS, preset, "NAT translator", **overrides)
