"""Attention layers. Each variant lives in its own file and registers a short name."""

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import available_attention, get_attention, register_attention
from zoo.layers.attention.scaled_dot_product import attention_scores, scaled_dot_product_attention

__all__ = [
    "MultiHeadAttention",
    "attention_scores",
    "available_attention",
    "get_attention",
    "register_attention",
    "scaled_dot_product_attention",
]
