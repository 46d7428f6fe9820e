"""The tagging task (UPOS, XPOS, FEATS and lemmas on a UD treebank, the encoder-only tagger):
the task, its training config, its evaluation and its dev-set validation."""

from zoo.tasks.tagging.task import TaggingTask

__all__ = ["TaggingTask"]
