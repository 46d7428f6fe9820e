"""The translation task (any language pair, the autoregressive translator): the task, its
training config, its evaluation, its ``val_bleu`` callback and ``zoo distill``."""

from zoo.tasks.translation.task import TranslationTask, bleu_line

__all__ = ["TranslationTask", "bleu_line"]
