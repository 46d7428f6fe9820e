"""Transformer building blocks: feed-forward, encoder block, decoder block."""
