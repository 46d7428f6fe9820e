"""Transformer building blocks: feed-forward, encoder block, decoder block."""

from zoo.layers.blocks.decoder_block import TransformerDecoderBlock
from zoo.layers.blocks.encoder_block import TransformerEncoderBlock
from zoo.layers.blocks.feed_forward import FeedForward

__all__ = ["FeedForward", "TransformerDecoderBlock", "TransformerEncoderBlock"]
