"""Positional encodings, and the attention variants that carry positions (rotary, ALiBi, relative)."""

from zoo.layers.position.alibi import ALiBiAttention, ALiBiBias, alibi_bias, alibi_slopes
from zoo.layers.position.learned import LearnedPositionEmbedding
from zoo.layers.position.relative import RelativePositionAttention, relative_position_indices
from zoo.layers.position.rotary import RotaryAttention, RotaryEmbedding, rotate
from zoo.layers.position.sinusoidal import SinusoidalPositionEncoding, sinusoidal_encoding

__all__ = [
    "ALiBiAttention",
    "ALiBiBias",
    "LearnedPositionEmbedding",
    "RelativePositionAttention",
    "RotaryAttention",
    "RotaryEmbedding",
    "SinusoidalPositionEncoding",
    "alibi_bias",
    "alibi_slopes",
    "relative_position_indices",
    "rotate",
    "sinusoidal_encoding",
]
