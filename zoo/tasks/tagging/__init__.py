"""The tagging task (UPOS on UD English-EWT, the encoder-only tagger): the task, its search
(windows, Viterbi), its evaluation and its serving SavedModel."""

from zoo.tasks.tagging.task import TaggingTask

__all__ = ["TaggingTask"]
