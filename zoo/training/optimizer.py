"""The optimizer of every zoo run: AdamW with an inverse-square-root warm-up and clipping."""

import keras

from zoo.training.schedules import InverseSquareRootSchedule

__all__ = ["make_optimizer"]


def make_optimizer(config):
    """AdamW with the inverse-sqrt warm-up schedule and gradient clipping, from ``config``.

    Reads ``learning_rate`` (the peak), ``warmup_steps``, ``weight_decay``, ``clipnorm`` and,
    where the config has it, ``ema_momentum`` (nonzero: keep an exponential moving average of
    the weights; ``train()`` then evaluates and checkpoints the average).
    """
    ema_momentum = getattr(config, "ema_momentum", 0.0)
    optimizer = keras.optimizers.AdamW(
        learning_rate=InverseSquareRootSchedule(config.learning_rate, config.warmup_steps),
        weight_decay=config.weight_decay,
        clipnorm=config.clipnorm,
        beta_2=0.98,
        use_ema=bool(ema_momentum),
        ema_momentum=ema_momentum or 0.99,
    )
    # No decay on norms, biases and embeddings.
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias", "embeddings"])
    return optimizer
