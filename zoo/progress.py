"""A progress bar on standard error, so that standard output stays the command's result."""

import contextlib
import sys


class Progress:
    """``keras.utils.Progbar`` drawn on stderr; a no-op when ``enabled`` is False.

    Args:
        total: the number of steps (sentences, batches, stages).
        enabled: draw the bar at all (library calls default to silence).
        unit: what a step is, shown after the bar's count ("sentences").

    Example:
        >>> bar = Progress(3, enabled=False)
        >>> for _ in range(3):
        ...     bar.add(1)
    """

    def __init__(self, total, enabled=True, unit="step"):
        self.enabled = bool(enabled) and total > 0
        if self.enabled:
            import keras

            with contextlib.redirect_stdout(sys.stderr):
                self._bar = keras.utils.Progbar(total, unit_name=unit)

    def add(self, steps):
        if self.enabled:
            with contextlib.redirect_stdout(sys.stderr):
                self._bar.add(steps)
