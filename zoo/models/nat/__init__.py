"""The non-autoregressive translator: the translator's encoder, a length predictor, and a
decoder without the causal mask that fills every target position at once.

The encoder and the decoder blocks are the translator's public stacks; what differs is the
decoder's attention, which sees the whole target, the :class:`~zoo.layers.LengthPredictor`,
and two choices (:class:`NATConfig`): the decoder's input (mask tokens, CMLM; or the source's
embeddings copied uniformly) and the target length (predicted, or the widest cut at the first
EOS). The saved model's layers record both (:func:`nat_modes`).
"""

from zoo.models.nat.build import build_nat_translator
from zoo.models.nat.config import (
    DECODER_INPUTS,
    LENGTH_MODES,
    MASK_ID,
    PRESETS,
    NATConfig,
    get_config,
)
from zoo.models.nat.inference import (
    NATModes,
    decode_and_lengths,
    nat_decode,
    nat_encode,
    nat_modes,
    widest_lengths,
)

from zoo.models.nat.search import (
    NAT_DEFAULTS,
    check_rescorer,
    nat_counts,
    nat_length_candidates,
    nat_translator_search,
)
__all__ = [
    "nat_translator_search",
    "nat_length_candidates",
    "nat_counts",
    "check_rescorer",
    "NAT_DEFAULTS",
    "DECODER_INPUTS",
    "LENGTH_MODES",
    "MASK_ID",
    "PRESETS",
    "NATConfig",
    "NATModes",
    "build_nat_translator",
    "decode_and_lengths",
    "get_config",
    "nat_decode",
    "nat_encode",
    "nat_modes",
    "widest_lengths",
]
