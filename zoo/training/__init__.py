"""zoo.training: losses, schedules, the optimizer, the distribution strategy, callbacks, train(),
distill(), a teacher's translations for a student to train on, and warm_start(), a run started
from another model's weights."""

from zoo.training.callbacks import TimeLimit
from zoo.training.distillation import distill, read_distilled
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.optimizer import make_optimizer
from zoo.training.schedules import InverseSquareRootSchedule
from zoo.training.strategy import STRATEGIES, get_strategy
from zoo.training.train import train
from zoo.training.warm_start import warm_start

__all__ = [
    "InverseSquareRootSchedule",
    "MaskedSparseCrossEntropy",
    "STRATEGIES",
    "TimeLimit",
    "distill",
    "get_strategy",
    "make_optimizer",
    "read_distilled",
    "train",
    "warm_start",
]
