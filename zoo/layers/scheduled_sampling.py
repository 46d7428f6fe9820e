"""Scheduled sampling: a decoder's second pass reads gold tokens mixed with its predictions."""

import math

import keras
from keras import ops

SCHEDULES = ("linear", "exponential", "inverse_sigmoid")
# The schedules' k when none is given: the gold probability is still about 0.5 (exponential),
# 0.7 (inverse sigmoid) and 0.4 (linear, with c = 1e-4) after 6,000 steps, the length of the
# small translator's 40 epochs.
DEFAULT_K = {"linear": 1.0, "exponential": 0.9999, "inverse_sigmoid": 1000.0}
_ARGUMENTS = {"schedule": "schedule", "k": "k", "c": "c", "minimum": "minimum"}


def add_step_counter(layer):
    """A layer's count of its training steps: a saved, non-trainable float32 weight ``step``.

    Never autocast, so that a schedule reads it exactly under ``mixed_bfloat16``; float32 is
    exact to 2**24 steps, and averaging checkpoints (``zoo average``) keeps it a number. Under
    ``tf.distribute`` every replica adds 1 per step; ``aggregation="only_first_replica"`` (as
    the optimizer's ``iterations``) writes the first replica's update to every copy, so it
    counts steps, not replicas.
    """
    return layer.add_weight(
        shape=(), initializer="zeros", dtype="float32", trainable=False, autocast=False,
        aggregation="only_first_replica", name="step",
    )  # fmt: skip


def check_schedule(schedule, k=None, c=1e-4, minimum=0.0, names=None):
    """Refuse a schedule that is not one of :data:`SCHEDULES`, or parameters it cannot take.

    Args:
        schedule, k, c, minimum: as :func:`gold_probability` takes them.
        names: the name of each argument in the error messages (a config names them by its
            own fields): a dict with the keys ``"schedule"``, ``"k"``, ``"c"``, ``"minimum"``.

    Raises:
        ValueError: naming the argument and the values it may take.
    """
    names = {**_ARGUMENTS, **(names or {})}
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown {names['schedule']} {schedule!r}; expected one of {SCHEDULES}.")
    bounds = {  # what k may be: a decay from (about) 1
        "linear": (lambda k: k >= 0, ">= 0"),
        "exponential": (lambda k: 0 < k <= 1, "in (0, 1]"),
        "inverse_sigmoid": (lambda k: k >= 1, ">= 1"),
    }
    valid, allowed = bounds[schedule]
    if k is not None and not (isinstance(k, (int, float)) and valid(k)):
        raise ValueError(f"{names['k']} must be {allowed} for the {schedule} schedule, got {k!r}.")
    if not (isinstance(c, (int, float)) and c >= 0):
        raise ValueError(f"{names['c']} (the linear slope) must be >= 0, got {c!r}.")
    if not (isinstance(minimum, (int, float)) and 0.0 <= minimum <= 1.0):
        raise ValueError(f"{names['minimum']} must be a probability in [0, 1], got {minimum!r}.")


def gold_probability(schedule, step, k=None, c=1e-4, minimum=0.0):
    """The probability of feeding the gold token at training step ``step`` (Bengio et al. 2015).

    Args:
        schedule: ``"linear"``: ``max(minimum, k - c * step)``; ``"exponential"``:
            ``k ** step`` (``k < 1``); ``"inverse_sigmoid"``: ``k / (k + exp(step / k))``
            (``k >= 1``).
        step: the training step, a number or a tensor (computed in float32).
        k: the schedule's ``k``; None takes :data:`DEFAULT_K`.
        c: the slope of the linear schedule.
        minimum: a floor under every schedule.

    Returns:
        The probability, a float (or a float32 tensor, for a tensor ``step``).

    Example:
        >>> round(gold_probability("linear", 2000, c=1e-4), 6)
        0.8
        >>> round(gold_probability("inverse_sigmoid", 0, k=1000.0), 6)  # 1000 / 1001
        0.999001
    """
    k = DEFAULT_K[schedule] if k is None else k
    if ops.is_tensor(step):
        step = ops.cast(step, "float32")
    if schedule == "linear":
        value = k - c * step
    elif schedule == "exponential":
        value = ops.power(k, step) if ops.is_tensor(step) else k**step
    else:
        value = k / (k + (ops.exp(step / k) if ops.is_tensor(step) else math.exp(step / k)))
    return ops.maximum(value, minimum) if ops.is_tensor(step) else max(value, minimum)


@keras.saving.register_keras_serializable(package="zoo")
class ScheduledSampling(keras.layers.Layer):
    """Mix the gold decoder input with the first decoder pass's predictions (training only).

    Two-pass scheduled sampling for transformers (Mihaylova & Martins 2019; Duckworth et al.
    2019): the second pass gets, at each position, the gold token with the schedule's
    probability (:func:`gold_probability`), else the first pass's argmax from the position
    before, never the padding id (it would mask a real position). BOS and padding stay. No
    gradient flows through the predictions. At inference the gold input passes through.

    The training step is a non-trainable float32 counter (never autocast, so the schedule reads
    it exactly under ``mixed_bfloat16``), saved with the weights so a resumed run keeps the
    schedule. Its ``aggregation="only_first_replica"`` makes it count steps under
    ``tf.distribute``, not replicas.

    Args:
        schedule: one of :data:`SCHEDULES`.
        k, c, minimum: the schedule's parameters (:func:`gold_probability`).
        seed: the seed of the coin flips.

    Call arguments:
        target_in: ``(B, T)`` int ids, the gold decoder input (BOS first, 0 is padding).
        logits: ``(B, T, V)``, the first pass's logits: position ``t`` predicts the token at
            ``t + 1``.
        training: mix (and count a step) only when True.

    Returns:
        ``(B, T)`` int ids, the second pass's input.

    Example:
        >>> mix = ScheduledSampling("linear", c=1.0, minimum=0.0)  # gold probability 1, then 0
        >>> target_in = keras.ops.convert_to_tensor([[2, 7, 8, 0]])
        >>> logits = keras.ops.one_hot(keras.ops.convert_to_tensor([[5, 6, 3, 3]]), 10)
        >>> keras.ops.convert_to_numpy(mix(target_in, logits, training=True)).tolist()  # step 0
        [[2, 7, 8, 0]]
        >>> keras.ops.convert_to_numpy(mix(target_in, logits, training=True)).tolist()  # step 1
        [[2, 5, 6, 0]]

    References:
        Bengio et al. 2015, "Scheduled Sampling for Sequence Prediction with Recurrent Neural
        Networks"; Mihaylova & Martins 2019, "Scheduled Sampling for Transformers"; Duckworth
        et al. 2019, "Parallel Scheduled Sampling".
    """

    def __init__(self, schedule, k=None, c=1e-4, minimum=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_schedule(schedule, k, c, minimum)
        self.schedule = schedule
        self.k = k
        self.c = c
        self.minimum = minimum
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, target_in_shape, logits_shape=None):
        self.step = add_step_counter(self)
        self.built = True

    def gold_probability(self):
        """The probability of the gold token at the current step."""
        return gold_probability(
            self.schedule, ops.convert_to_tensor(self.step), self.k, self.c, self.minimum
        )

    def call(self, target_in, logits, training=None):
        if not training:
            return target_in
        logits = ops.stop_gradient(logits)
        predicted = ops.argmax(logits[..., 1:], axis=-1) + 1  # (B, T), never 0
        predicted = ops.cast(predicted, target_in.dtype)
        shifted = ops.concatenate([target_in[:, :1], predicted[:, :-1]], axis=1)  # (B, T)
        coin = keras.random.uniform(ops.shape(target_in), seed=self.seed_generator)  # (B, T)
        keep = (coin < self.gold_probability()) | ops.equal(target_in, 0)
        self.step.assign_add(1.0)
        return ops.where(keep, target_in, shifted)

    def compute_output_spec(self, target_in, logits, training=None):
        return keras.KerasTensor(target_in.shape, target_in.dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "schedule": self.schedule,
            "k": self.k,
            "c": self.c,
            "minimum": self.minimum,
            "seed": self.seed,
        }
