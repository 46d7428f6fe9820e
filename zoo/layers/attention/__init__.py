"""Attention layers. Each variant lives in its own file and registers a short name.

Full attention: ``mha``, and ``chunked`` (O(T * C) memory); with positions (zoo/layers/position/):
``relative``, ``rotary``, ``alibi``; efficient: ``local``, ``strided``, ``global``, ``clustered``,
``sinkhorn``, ``linformer``, ``performer``, ``linear``, ``synthesizer``; attention-free: ``aft``;
stateful cross attention: ``location_aware``, ``monotonic``. A new variant is a new file here.
"""

from zoo.layers.attention.aft import AFTAttention
from zoo.layers.attention.chunked import ChunkedAttention, chunked_attention
from zoo.layers.attention.clustered import ClusteredAttention
from zoo.layers.attention.global_attention import GlobalAttention
from zoo.layers.attention.linear import LinearAttention
from zoo.layers.attention.linformer import LinformerAttention
from zoo.layers.attention.local import LocalAttention
from zoo.layers.attention.location_aware import LocationAwareAttention
from zoo.layers.attention.monotonic import (
    MonotonicAttention,
    hard_monotonic_alignment,
    monotonic_alignment,
)
from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.performer import PerformerAttention
from zoo.layers.attention.registry import available_attention, get_attention, register_attention
from zoo.layers.attention.scaled_dot_product import attention_scores, scaled_dot_product_attention
from zoo.layers.attention.sinkhorn import SinkhornAttention
from zoo.layers.attention.stateful import StatefulAttention
from zoo.layers.attention.strided import StridedAttention
from zoo.layers.attention.synthesizer import SynthesizerAttention

__all__ = [
    "AFTAttention",
    "ChunkedAttention",
    "ClusteredAttention",
    "GlobalAttention",
    "LinearAttention",
    "LinformerAttention",
    "LocalAttention",
    "LocationAwareAttention",
    "MonotonicAttention",
    "MultiHeadAttention",
    "PerformerAttention",
    "SinkhornAttention",
    "StatefulAttention",
    "StridedAttention",
    "SynthesizerAttention",
    "attention_scores",
    "available_attention",
    "chunked_attention",
    "get_attention",
    "hard_monotonic_alignment",
    "monotonic_alignment",
    "register_attention",
    "scaled_dot_product_attention",
]
