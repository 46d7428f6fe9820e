"""zoo.models: functional-API model builders and their presets."""

from zoo.models.translator import PRESETS as TRANSLATOR_PRESETS
from zoo.models.translator import TranslatorConfig, build_translator
from zoo.models.translator import get_config as translator_config

__all__ = ["TRANSLATOR_PRESETS", "TranslatorConfig", "build_translator", "translator_config"]
