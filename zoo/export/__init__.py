"""zoo.export: the ``.keras`` model, its vocabulary and a serving SavedModel with tf-text inside.

:func:`export_translator` (:func:`export_nat` for a non-autoregressive one) writes a folder that
a Python user (``model.keras`` with ``import zoo``) and a TensorFlow Serving user (``serving/``,
strings in and strings out) can both use;
``python -m zoo.export.compare DIR [DIR ...]`` prints the translations of exported folders side
by side.
"""

from zoo.export.nat_serving import NAT_SIGNATURES, NATServing, export_nat
from zoo.export.translator_serving import (
    MAX_BEAM_SIZE,
    SIGNATURES,
    TranslatorServing,
    export_translator,
)
from zoo.export.tagger_serving import TaggerServing, export_tagger

__all__ = [
    "MAX_BEAM_SIZE",
    "NATServing",
    "NAT_SIGNATURES",
    "SIGNATURES",
    "TaggerServing",
    "TranslatorServing",
    "export_nat",
    "export_tagger",
    "export_translator",
]
