"""The non-autoregressive translator: the translator's encoder, and a decoder without the causal
mask that fills every target position at once.

:class:`NATConfig` chooses a CMLM decoder with a :class:`~zoo.layers.LengthPredictor` (mask
tokens refined by Mask-Predict, or a copy of the source; the length predicted, or the widest cut
at the first EOS) or a CTC decoder over the upsampled source; :func:`nat_modes` reads the choices
back from a saved model's layers.
"""

from zoo.models.nat.backbone import NATBackbone, NATLayers, build_nat_translator
from zoo.models.nat.config import (
    DECODER_INPUTS,
    DECODERS,
    LENGTH_MODES,
    MASK_ID,
    PRESETS,
    NATConfig,
    get_config,
)
from zoo.models.nat.inference import (
    NATModes,
    ctc_logits,
    decode_and_lengths,
    nat_decode,
    nat_encode,
    nat_layers,
    nat_modes,
    nat_source_positions,
    widest_lengths,
)
from zoo.models.nat.search import (
    NAT_DEFAULTS,
    check_rescorer,
    nat_counts,
    nat_length_candidates,
    nat_translator_search,
)
from zoo.models.optional import HAS_TENSORFLOW

if HAS_TENSORFLOW:  # the task model and its preprocessor (tf-text), the training objectives
    from zoo.models.nat.objectives import CMLMObjective, CTCObjective, nat_objective
    from zoo.models.nat.translator import NATTranslator

__all__ = [
    "DECODERS",
    "DECODER_INPUTS",
    "LENGTH_MODES",
    "MASK_ID",
    "NAT_DEFAULTS",
    "PRESETS",
    "NATBackbone",
    "NATLayers",
    "NATConfig",
    "NATModes",
    "build_nat_translator",
    "check_rescorer",
    "ctc_logits",
    "decode_and_lengths",
    "get_config",
    "nat_counts",
    "nat_decode",
    "nat_encode",
    "nat_layers",
    "nat_length_candidates",
    "nat_modes",
    "nat_source_positions",
    "nat_translator_search",
    "widest_lengths",
]
