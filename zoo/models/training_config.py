"""The training fields every model's config includes: optimizer, schedule, regularization, batch.

Each model's config subclasses :class:`TrainingConfig`, so that its fields are declared once and
:func:`zoo.training.make_optimizer` and ``train()`` read one thing for every model. It lives
beside the models, not in :mod:`zoo.training`, because a model config must import without
TensorFlow (models build on Keras's JAX backend too).
"""

from dataclasses import dataclass

__all__ = ["TrainingConfig"]


@dataclass(frozen=True)
class TrainingConfig:
    """How a model trains (each model's presets set their own values).

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
        dropout, attention_dropout: residual (and embedding) dropout, attention-weight dropout.
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
    dropout: float = 0.1
    attention_dropout: float = 0.1

    def __post_init__(self):
        if self.gradient_accumulation_steps < 1:
            raise ValueError(
                "gradient_accumulation_steps must be at least 1, got "
                f"{self.gradient_accumulation_steps}."
            )
