"""zoo.training: losses, schedules, the optimizer, the distribution strategy, callbacks, train()
and warm_start(), a run started from another model's weights. It takes a task object and never
imports a task or a model."""

from zoo.training.callbacks import TimeLimit
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
    "get_strategy",
    "make_optimizer",
    "train",
    "warm_start",
]
