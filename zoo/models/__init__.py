"""zoo.models: the models (keras-hub's shape: backbone, preprocessor, task model), their
builders and presets."""

from zoo.models.translator import PRESETS as TRANSLATOR_PRESETS
from zoo.models.optional import HAS_TENSORFLOW
from zoo.models.translator import TranslatorBackbone, TranslatorConfig, build_translator
from zoo.models.translator import get_config as translator_config
from zoo.models.tagger import PRESETS as TAGGER_PRESETS
from zoo.models.tagger import TaggerBackbone, TaggerConfig, TaggerHead, build_tagger
from zoo.models.tagger import get_config as tagger_config
from zoo.models.nat import PRESETS as NAT_PRESETS
from zoo.models.nat import NATBackbone, NATConfig, build_nat_translator
from zoo.models.nat import get_config as nat_config

__all__ = [
    "TRANSLATOR_PRESETS",
    "TranslatorBackbone",
    "TranslatorConfig",
    "build_translator",
    "translator_config",
    "TAGGER_PRESETS",
    "TaggerBackbone",
    "TaggerConfig",
    "TaggerHead",
    "build_tagger",
    "tagger_config",
    "NAT_PRESETS",
    "NATBackbone",
    "NATConfig",
    "build_nat_translator",
    "nat_config",
]

if HAS_TENSORFLOW:  # the task models and their preprocessors tokenize with tf-text
    from zoo.models.nat import NATTranslator
    from zoo.models.tagger import Tagger, TaggerPreprocessor
    from zoo.models.translator import Translator, TranslatorPreprocessor

    __all__ += ["NATTranslator", "Tagger", "TaggerPreprocessor", "Translator",
                "TranslatorPreprocessor"]
