"""zoo.evaluation: BLEU (sacreBLEU) and tagging accuracy."""

from zoo.evaluation.bleu import corpus_bleu, save_evaluation

__all__ = ["corpus_bleu", "save_evaluation"]
