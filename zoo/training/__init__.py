"""zoo.training: losses, schedules, the distribution strategy, callbacks and train()."""

from zoo.training.callbacks import TimeLimit
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.schedules import InverseSquareRootSchedule
from zoo.training.strategy import STRATEGIES, get_strategy
from zoo.training.train import compile_translator, prepare_vocabulary, train
from zoo.training.train_tagger import compile_tagger, train_tagger

__all__ = [
    "InverseSquareRootSchedule",
    "MaskedSparseCrossEntropy",
    "STRATEGIES",
    "TimeLimit",
    "compile_tagger",
    "compile_translator",
    "get_strategy",
    "prepare_vocabulary",
    "train",
    "train_tagger",
]
