"""The translation task (Multi30k En->De, the autoregressive translator): the task, its
evaluation, its ``val_bleu`` callback, its serving SavedModel and ``zoo distill``."""

from zoo.tasks.translation.task import TranslationTask, bleu_line

__all__ = ["TranslationTask", "bleu_line"]
