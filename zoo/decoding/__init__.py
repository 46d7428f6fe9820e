"""zoo.decoding: greedy, beam, sampling and non-autoregressive searches, XLA-safe.

A search sees only ``step(token_ids, caches, index) -> (logits, caches)`` and the initial
caches (a nested structure of batch-major tensors, the encoder output in them), as keras-hub's
samplers and flax's ``decode.py`` do; a model provides both (for the translator,
:func:`zoo.models.translator.step_and_caches`). The loops are ``keras.ops`` that compile with
``tf.function(jit_compile=True)`` and trace in plain graph mode for a SavedModel.
:func:`uncached_greedy_search` is the slow reference that re-runs the whole model every step;
:func:`translate_strings` is the strings-to-strings frame around a search, and
:func:`translate` goes from sentences to sentences with a translator.
A non-autoregressive (CMLM) translator takes :func:`nat_search` instead, over ``decode(target_in)``
(:func:`length_candidates`, then :func:`mask_predict`, then :func:`cut_at_first_eos`).
"""

from zoo.decoding.beam import beam_search, length_penalty
from zoo.decoding.greedy import greedy_search, uncached_greedy_search
from zoo.decoding.nat import cut_at_first_eos, length_candidates, mask_predict, nat_search
from zoo.decoding.sampling import sample, sample_from_logits
from zoo.decoding.search_helpers import tile_for_beams
from zoo.decoding.tagging import predict_tags, tag_sentences
from zoo.decoding.translation import output_length, translate, translate_strings

__all__ = [
    "beam_search",
    "cut_at_first_eos",
    "greedy_search",
    "length_candidates",
    "length_penalty",
    "mask_predict",
    "nat_search",
    "output_length",
    "predict_tags",
    "sample",
    "sample_from_logits",
    "tag_sentences",
    "tile_for_beams",
    "translate",
    "translate_strings",
    "uncached_greedy_search",
]
