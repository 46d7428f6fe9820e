"""The encoder-only tagger of UD treebanks (UPOS, and XPOS, FEATS and lemma heads), in
keras-hub's shape.

A word is its (lowercased) word embedding plus a character feature (a convolution over its
characters, max-pooled), so that a word never seen in training still gets a good tag from its
spelling. A stack of transformer encoder blocks reads the sentence; per-token heads give the
scores of each column, as softmax logits or (UPOS, XPOS) as the potentials of a linear-chain CRF
(``zoo.layers.CRF``); the lemma head's classes are edit scripts from the form to the lemma.
``backbone`` holds the network (:class:`TaggerBackbone`), ``preprocessor`` the text around it
(:class:`TaggerPreprocessor`: tokens, ids, windows, tags and lemmas, in TensorFlow), and
``tagger`` the task model (:class:`Tagger`: ``tag``, ``from_preset``, ``export_serving``).
"""

from zoo.models.optional import HAS_TENSORFLOW
from zoo.models.tagger.backbone import TaggerBackbone, TaggerHead, build_tagger, tagger_heads
from zoo.models.tagger.config import (
    CRF_HEADS,
    HEAD_SIZES,
    HEADS,
    NUM_UPOS_TAGS,
    PRESETS,
    TaggerConfig,
    get_config,
)

if HAS_TENSORFLOW:  # the task model and its preprocessor (TensorFlow text ops)
    from zoo.models.tagger.preprocessor import TaggerPreprocessor
    from zoo.models.tagger.tagger import Tagger

__all__ = [
    "CRF_HEADS",
    "HEAD_SIZES",
    "HEADS",
    "NUM_UPOS_TAGS",
    "PRESETS",
    "Tagger",
    "TaggerBackbone",
    "TaggerConfig",
    "TaggerHead",
    "TaggerPreprocessor",
    "build_tagger",
    "get_config",
    "tagger_heads",
]
