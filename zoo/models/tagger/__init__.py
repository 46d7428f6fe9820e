"""The encoder-only tagger of UD treebanks (UPOS, and XPOS, FEATS and lemma heads), in
keras-hub's shape: :class:`TaggerBackbone` (word embeddings plus a character convolution, so
unseen words are tagged by their spelling; encoder blocks; softmax or CRF heads),
:class:`TaggerPreprocessor` (the text around it) and :class:`Tagger` (the task model).
"""

from zoo.models.optional import HAS_TENSORFLOW
from zoo.models.tagger.backbone import TaggerBackbone, TaggerHead, build_tagger
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
]
