"""zoo.layers: attention, positional encodings, embeddings and transformer blocks."""

from zoo.layers import masking
from zoo.layers.attention import *  # noqa: F401,F403
from zoo.layers.blocks import *  # noqa: F401,F403  (each package lists its public names in __all__)
from zoo.layers.position import *  # noqa: F401,F403
from zoo.layers.dropout import Dropout  # and zoo.layers.dropout.dropout, the function
from zoo.layers.embedding import TokenAndPositionEmbedding
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.crf import *  # noqa: F401,F403
from zoo.layers.character_embedding import CharacterEmbedding
from zoo.layers.guided_attention import GuidedAttention
from zoo.layers.layer_mix import LayerMix
from zoo.layers.pointer_generator import PointerGenerator
from zoo.layers.length_predictor import LengthPredictor
from zoo.layers.scheduled_sampling import ScheduledSampling
from zoo.layers.uniform_copy import UniformCopy
from zoo.layers.ctc import (
    CTCBlankPadding,
    SourceUpsampling,
    ctc_best_alignment,
    ctc_log_likelihood,
    ctc_positions_needed,
)
from zoo.layers.glancing import AllMasked, CTCGlancingSampler, GlancingSampler, LossMask
