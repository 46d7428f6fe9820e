"""zoo.decoding: greedy, beam and sampling searches for the translator, XLA-safe.

Every search runs the trained model incrementally through :class:`IncrementalTranslator`
(the encoder once, the decoder one token at a time with its KV caches), in ``keras.ops``
loops that compile with ``tf.function(jit_compile=True)`` and trace in plain graph mode
for a SavedModel. :func:`uncached_greedy_search` is the slow reference that re-runs the
whole model every step; :func:`translate` goes from sentences to sentences.
"""

from zoo.decoding.beam import beam_search, length_penalty
from zoo.decoding.greedy import greedy_search, uncached_greedy_search
from zoo.decoding.incremental import IncrementalTranslator, tile_for_beams
from zoo.decoding.sampling import sample, sample_from_logits
from zoo.decoding.tagging import predict_tags, tag_sentences
from zoo.decoding.translation import translate

__all__ = [
    "IncrementalTranslator",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "predict_tags",
    "sample",
    "sample_from_logits",
    "tag_sentences",
    "tile_for_beams",
    "translate",
    "uncached_greedy_search",
]
