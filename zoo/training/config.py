"""The training config: how a model trains (optimizer, schedule, batches), the same fields for
every task. A task's own training config subclasses it with its data settings, and a run's config
joins that with the model's config, which holds only the architecture (its backbone's arguments):
the workdir records the two together in ``config.json``.
"""

from dataclasses import dataclass, fields

__all__ = ["TrainingConfig", "field_values", "run_presets"]


@dataclass(frozen=True)
class TrainingConfig:
    """How a model trains (each task's presets set their own values).

    Args:
        epochs: training epochs.
        batch_tokens: the token (or word) budget of one batch.
        gradient_accumulation_steps: above 1, each update applies the mean gradient of this
            many batches, for a device too small for ``batch_tokens``; ``warmup_steps`` then
            counts updates.
        learning_rate, warmup_steps: the peak of the inverse-square-root schedule and its
            linear warm-up (:class:`zoo.training.InverseSquareRootSchedule`).
        weight_decay, clipnorm: AdamW's decoupled weight decay and the gradient norm clip.
        ema_momentum: nonzero keeps an exponential moving average of the weights (Polyak
            averaging), which is what is validated, checkpointed and shipped; 0 turns it off.
        label_smoothing: of the cross entropy (a CRF head has none).
    """

    epochs: int = 40
    batch_tokens: int = 4096
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1e-3
    warmup_steps: int = 1000
    weight_decay: float = 1e-4
    clipnorm: float = 1.0
    ema_momentum: float = 0.0
    label_smoothing: float = 0.1

    # Fields that a workdir's config.json may hold from an older form of a run's config, each
    # with the value that meant what the config does now: a resume ignores them at that value.
    # data_dir "" was the bundled corpus (a folder of `zoo distill` is --train now).
    retired_fields = {"data_dir": ""}

    def __post_init__(self):
        if self.gradient_accumulation_steps < 1:
            raise ValueError(
                "gradient_accumulation_steps must be at least 1, got "
                f"{self.gradient_accumulation_steps}."
            )


def field_values(config):
    """A dataclass config's fields by name, as they are (no copy of their values)."""
    return {field.name: getattr(config, field.name) for field in fields(config)}


def run_presets(run_class, architectures, trainings):
    """The run configs of the presets named in both ``architectures`` (a model's) and
    ``trainings`` (a task's): ``run_class`` of the one's fields and the other's."""
    return {name: run_class(**field_values(architectures[name]), **field_values(trainings[name]))
            for name in architectures if name in trainings}  # fmt: skip
