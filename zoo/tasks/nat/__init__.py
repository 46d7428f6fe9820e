"""The non-autoregressive translation task: the translation task's data and vocabulary with the
NAT's model, objective, Mask-Predict search and serving SavedModel."""

from zoo.tasks.nat.task import NATTask

__all__ = ["NATTask"]
