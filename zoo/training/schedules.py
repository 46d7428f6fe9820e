"""Learning-rate schedules."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak_learning_rate``, then decay as ``1 / sqrt(step)``.

    ``lr(step) = peak * min(step / warmup, sqrt(warmup / step))``: the schedule of Vaswani et
    al. 2017 (section 5.3), parameterised by its peak instead of ``d_model ** -0.5``.

    Args:
        peak_learning_rate: the learning rate at the end of the warm-up.
        warmup_steps: steps of linear warm-up.
        steps_per_update: the optimizer steps of one update. Under gradient accumulation Keras
            calls the schedule with its step count, which counts every accumulated batch; the
            schedule counts updates (``step // steps_per_update``).

    Example:
        >>> schedule = InverseSquareRootSchedule(1e-3, warmup_steps=100)
        >>> round(float(schedule(400)), 6)
        0.0005
    """

    def __init__(self, peak_learning_rate, warmup_steps, steps_per_update=1):
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}.")
        if steps_per_update < 1:
            raise ValueError(f"steps_per_update must be >= 1, got {steps_per_update}.")
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.steps_per_update = steps_per_update

    def __call__(self, step):
        if self.steps_per_update > 1:
            step = ops.floor_divide(step, self.steps_per_update)
        step = ops.maximum(ops.cast(step, "float32"), 1.0)
        warmup = float(self.warmup_steps)
        return self.peak_learning_rate * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "steps_per_update": self.steps_per_update,
        }
