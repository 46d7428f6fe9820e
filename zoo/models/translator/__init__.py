"""The autoregressive encoder-decoder translator, in keras-hub's shape.

:class:`Translator` is the task model, with its backbone, preprocessor and config (presets);
``stacks`` holds the layers by role and the forward pass, written once (public: the NAT builds on
them); ``inference`` what the searches run (encode once, then cached steps), the rescorer and the
attention pictures.
"""

from zoo.models.translator.backbone import TranslatorBackbone, build_translator
from zoo.models.translator.config import PRESETS, TranslatorConfig, get_config
from zoo.models.translator.inference import (
    attention_weights,
    encode,
    full_logits,
    init_caches,
    rescorer,
    step,
    step_and_caches,
)
from zoo.models.optional import HAS_TENSORFLOW
from zoo.models.translator.search import METHODS, translator_search
from zoo.models.translator.stacks import TranslatorLayers, translator_layers

if HAS_TENSORFLOW:  # the task model and its preprocessor (tf-text)
    from zoo.models.translator.preprocessor import TranslatorPreprocessor
    from zoo.models.translator.translator import Translator

__all__ = [
    "Translator",
    "TranslatorBackbone",
    "TranslatorPreprocessor",
    "translator_search",
    "PRESETS",
    "TranslatorConfig",
    "TranslatorLayers",
    "build_translator",
    "attention_weights",
    "encode",
    "full_logits",
    "get_config",
    "init_caches",
    "rescorer",
    "step",
    "step_and_caches",
    "translator_layers",
]
