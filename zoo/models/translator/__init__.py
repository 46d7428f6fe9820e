"""The autoregressive encoder-decoder translator (Multi30k En->De), in keras-hub's shape.

``translator`` is the task model (:class:`Translator`: ``generate``, ``fit`` on strings,
``from_preset``), ``backbone`` and ``preprocessor`` its two parts; ``config`` holds
:class:`TranslatorConfig` and its presets; ``stacks`` the layers by role and the forward pass,
written once (public, so that the NAT builds on them); ``inference`` what the searches of
:mod:`zoo.decoding` run (encode once, then one step at a time with KV caches), the rescorer
and the attention pictures.
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
