"""The non-autoregressive translation task: the translation task's data and vocabulary with the
NAT's model and objective, and the NAT's training config."""

from zoo.tasks.nat.task import NATTask

__all__ = ["NATTask"]
