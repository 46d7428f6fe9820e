"""The optimizer of every zoo run: AdamW with an inverse-square-root warm-up and clipping."""

import keras

from zoo.training.schedules import InverseSquareRootSchedule

__all__ = ["make_optimizer"]


def make_optimizer(config):
    """AdamW with the inverse-sqrt warm-up schedule and gradient clipping, from ``config``.

    ``config`` is a :class:`~zoo.training.config.TrainingConfig` (every run's config is
    one): ``learning_rate`` (the peak), ``warmup_steps``, ``weight_decay``, ``clipnorm``,
    ``gradient_accumulation_steps`` and ``ema_momentum`` (nonzero: keep an exponential moving
    average of the weights; ``train()`` then evaluates and checkpoints the average).

    With ``gradient_accumulation_steps`` N above 1, Keras's optimizer sums the gradients of N
    steps and applies their mean (clipped, then with weight decay) on the N-th; the schedule
    and Adam's bias correction count updates.
    """
    ema_momentum = config.ema_momentum
    accumulation = config.gradient_accumulation_steps
    if accumulation < 1:
        raise ValueError(f"gradient_accumulation_steps must be at least 1, got {accumulation}.")
    optimizer = keras.optimizers.AdamW(
        learning_rate=InverseSquareRootSchedule(
            config.learning_rate, config.warmup_steps, steps_per_update=accumulation
        ),
        weight_decay=config.weight_decay,
        clipnorm=config.clipnorm,
        beta_2=0.98,
        use_ema=bool(ema_momentum),
        ema_momentum=ema_momentum or 0.99,
        gradient_accumulation_steps=accumulation if accumulation > 1 else None,
    )
    # No decay on norms, biases and embeddings.
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias", "embeddings"])
    return optimizer
