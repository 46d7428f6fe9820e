"""The transliteration task: the translator on a rule-made monotonic character task."""

from zoo.tasks.transliteration.task import PRESETS, TransliterationTask

__all__ = ["PRESETS", "TransliterationTask"]
