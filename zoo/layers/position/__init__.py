"""Positional encodings, and the attention variants that carry positions (rotary, ALiBi, relative)."""
