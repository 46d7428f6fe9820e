"""zoo.decoding: greedy, beam, sampling and non-autoregressive searches, XLA-safe, and the
strings-to-strings frame around them. Never imports a model.

A search sees only ``step(token_ids, caches, index) -> (logits, caches)`` and the initial caches
(the encoder output in them), as keras-hub's samplers and flax's ``decode.py`` do; a NAT search
sees ``decode(target_in)``. The loops are ``keras.ops`` that compile under XLA and trace in plain
graph mode for a SavedModel.
"""

from zoo.decoding.beam import beam_search, length_penalty
from zoo.decoding.greedy import greedy_search, uncached_greedy_search
from zoo.decoding.nat import cut_at_first_eos, length_candidates, mask_predict, nat_search
from zoo.decoding.sampling import sample, sample_from_logits
from zoo.decoding.search_helpers import tile_for_beams
from zoo.decoding.text import output_length, translate_sentences, translate_strings

__all__ = [
    "beam_search",
    "cut_at_first_eos",
    "greedy_search",
    "length_candidates",
    "length_penalty",
    "mask_predict",
    "nat_search",
    "output_length",
    "sample",
    "sample_from_logits",
    "tile_for_beams",
    "translate_sentences",
    "translate_strings",
    "uncached_greedy_search",
]
