"""The autoregressive encoder-decoder translator (Multi30k En->De), built with the functional API."""

from dataclasses import dataclass, replace

import keras

from zoo.layers import TokenAndPositionEmbedding, TransformerDecoderBlock, TransformerEncoderBlock
from zoo.models.presets import from_presets


@dataclass(frozen=True)
class TranslatorConfig:
    """Everything that defines a translator and how it trains.

    Model:
        vocab_size: size of the joint source/target SentencePiece vocabulary.
        max_length: the longest source or target sequence, in tokens (longer input is truncated).
        d_model, num_heads, ff_dim: sizes of every block.
        encoder_layers, decoder_layers: depth of each stack.
        dropout, attention_dropout: residual and attention-weight dropout.
        activation: the feed-forward activation (``relu``, ``gelu``, ``swiglu``, ...).
        normalize_first: pre-LN blocks (with a final norm after each stack) when True.
        position: ``"sinusoidal"`` or ``"learned"`` positions on the token embeddings.
        attention: the registered self-attention variant of every block.
        share_embeddings: one embedding matrix for source, target and the output projection.

    Training:
        label_smoothing, learning_rate (peak), warmup_steps, weight_decay, clipnorm: the
            optimisation (AdamW with an inverse-square-root warm-up schedule).
        batch_tokens: the token budget of one batch.
        epochs: training epochs.
        vocab_sample_size: sentences sampled to learn the SentencePiece model.
    """

    vocab_size: int = 8000
    max_length: int = 128
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 4
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation: str = "relu"
    normalize_first: bool = True
    position: str = "sinusoidal"
    attention: str = "mha"
    share_embeddings: bool = True
    label_smoothing: float = 0.1
    learning_rate: float = 1e-3
    warmup_steps: int = 1000
    weight_decay: float = 1e-4
    clipnorm: float = 1.0
    batch_tokens: int = 4096
    epochs: int = 40
    vocab_sample_size: int = 200_000


# `small` is the fairseq transformer-tiny shape the issue compares against (4+4 layers,
# d=128, ff=256, 4 heads, shared embeddings); `tiny` is for tests and the demo.
PRESETS = {"small": TranslatorConfig()}
PRESETS["tiny"] = replace(
    PRESETS["small"],
    vocab_size=1000,
    max_length=48,
    d_model=32,
    num_heads=2,
    ff_dim=64,
    encoder_layers=1,
    decoder_layers=1,
    dropout=0.0,
    attention_dropout=0.0,
    warmup_steps=100,
    batch_tokens=2048,
    epochs=2,
)
PRESETS["base"] = replace(
    PRESETS["small"],
    d_model=512,
    num_heads=8,
    ff_dim=2048,
    encoder_layers=6,
    decoder_layers=6,
    warmup_steps=4000,
    learning_rate=7e-4,
)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", epochs=10)``."""
    return from_presets(PRESETS, preset, "translator", **overrides)


def _embedding(config, name):
    return TokenAndPositionEmbedding(
        config.vocab_size,
        config.d_model,
        max_length=config.max_length,
        position=config.position,
        mask_zero=True,
        dropout=config.dropout,
        name=name,
    )


def _block_kwargs(config):
    return dict(
        num_heads=config.num_heads,
        ff_dim=config.ff_dim,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation=config.activation,
        normalize_first=config.normalize_first,
        attention=config.attention,
    )


def build_translator(config):
    """A functional encoder-decoder: ``{"source", "target_in"}`` token ids -> target logits.

    Layer names are stable, so decoding and export find the parts by name:
    ``source_embedding``/``target_embedding`` (one shared ``embedding`` when
    ``share_embeddings``), ``encoder_block_{i}``, ``encoder_norm``, ``decoder_block_{i}``,
    ``decoder_norm`` and ``output_projection`` (absent when the embedding is tied).

    Args:
        config: a :class:`TranslatorConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding) to logits ``(B, T, vocab_size)``.

    Example:
        >>> model = build_translator(get_config("tiny"))
        >>> model.output_shape
        (None, None, 1000)
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    if config.share_embeddings:
        source_embedding = target_embedding = _embedding(config, "embedding")
    else:
        source_embedding = _embedding(config, "source_embedding")
        target_embedding = _embedding(config, "target_embedding")

    x = source_embedding(source)  # (B, S, D), carries the padding mask
    for i in range(config.encoder_layers):
        x = TransformerEncoderBlock(**_block_kwargs(config), name=f"encoder_block_{i}")(x)
    if config.normalize_first:
        x = keras.layers.LayerNormalization(epsilon=1e-5, name="encoder_norm")(x)

    y = target_embedding(target_in)  # (B, T, D)
    for i in range(config.decoder_layers):
        y = TransformerDecoderBlock(**_block_kwargs(config), name=f"decoder_block_{i}")(y, x)
    if config.normalize_first:
        y = keras.layers.LayerNormalization(epsilon=1e-5, name="decoder_norm")(y)

    if config.share_embeddings:
        logits = target_embedding(y, reverse=True)  # (B, T, V), the tied projection
    else:
        logits = keras.layers.Dense(config.vocab_size, name="output_projection")(y)
    return keras.Model({"source": source, "target_in": target_in}, logits, name="translator")
