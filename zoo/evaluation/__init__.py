"""zoo.evaluation: BLEU (sacreBLEU) and tagging accuracy."""

from zoo.evaluation.bleu import corpus_bleu, save_evaluation
from zoo.evaluation.tagging import tagging_accuracy

__all__ = ["corpus_bleu", "save_evaluation", "tagging_accuracy"]
