"""zoo.layers: attention, positional encodings, embeddings and transformer blocks."""

from zoo.layers import masking
from zoo.layers.attention import (
    MultiHeadAttention,
    attention_scores,
    available_attention,
    get_attention,
    register_attention,
    scaled_dot_product_attention,
)
