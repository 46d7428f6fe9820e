"""zoo.evaluation: BLEU (sacreBLEU), tagging accuracy and the CoNLL 2018 tagging figures."""

from zoo.evaluation.bleu import corpus_bleu, save_evaluation
from zoo.evaluation.conll18 import conll18_scores, universal_features
from zoo.evaluation.tagging import tagging_accuracy

__all__ = [
    "conll18_scores",
    "corpus_bleu",
    "save_evaluation",
    "tagging_accuracy",
    "universal_features",
]
