"""The encoder-only tagger of UD treebanks (UPOS, and XPOS, FEATS and lemma heads), built with
the functional API.

A word is its (lowercased) word embedding plus a character feature (a convolution over its
characters, max-pooled), so that a word never seen in training still gets a good tag from its
spelling. A stack of transformer encoder blocks reads the sentence; per-token heads give the
scores of each column, as softmax logits or (UPOS, XPOS) as the potentials of a linear-chain CRF
(``zoo.layers.CRF``); the lemma head's classes are edit scripts from the form to the lemma.
:func:`tagger_heads` says which heads a built or reloaded tagger has. ``zoo.data.TaggerVocabulary``
turns sentences into its inputs; ``zoo.tasks.tagging.search`` turns its outputs into tags.
"""

from zoo.models.tagger.build import TaggerHead, build_tagger, tagger_heads
from zoo.models.tagger.config import (
    CRF_HEADS,
    HEAD_SIZES,
    HEADS,
    NUM_UPOS_TAGS,
    PRESETS,
    TaggerConfig,
    get_config,
)

__all__ = [
    "CRF_HEADS",
    "HEAD_SIZES",
    "HEADS",
    "NUM_UPOS_TAGS",
    "PRESETS",
    "TaggerConfig",
    "TaggerHead",
    "build_tagger",
    "get_config",
    "tagger_heads",
]
