"""The translator's layers by role and the forward pass, written once: the encoder stack and
the decoder stack. The builder runs them on symbolic inputs, the inference functions on tensors
(one token at a time with KV caches), and the NAT on its own inputs, without the causal mask.
"""

from dataclasses import dataclass

import keras

from zoo.layers import (
    LayerMix,
    LayerNormalization,
    PointerGenerator,
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from zoo.layers.attention import get_attention

__all__ = [
    "TranslatorLayers",
    "block_memory",
    "copy_inputs",
    "cross_attention_of",
    "decoder_stack",
    "encoder_stack",
    "make_translator_layers",
    "translator_layers",
]


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
        ff_dropout=config.activation_dropout,
        activation=config.activation,
        normalize_first=config.normalize_first,
        attention=config.attention,
    )


@dataclass(frozen=True)
class TranslatorLayers:
    """A translator's layers by role: what its encoder and decoder stacks run.

    ``source_embedding`` and ``target_embedding`` are one layer when the embeddings are shared;
    ``output_projection`` is None when it is tied to the target embedding, and the final norms
    are None in post-LN models.

    Attributes:
        vocab_size: V, the size of the target vocabulary.
        max_length: the number of target positions (None when unbounded: sinusoidal encodings
            without ``max_length``). A search of ``max_length`` steps uses positions
            ``0 .. max_length - 1``.
        max_source_length: the number of source positions (None when unbounded).
        num_caches: the number of KV caches of a search: two per decoder block.
        encoder_outputs: one :class:`~zoo.layers.LayerMix` per decoder block, choosing the
            encoder output it reads; empty when every block reads the last layer.
        pointer_generator: the :class:`~zoo.layers.PointerGenerator` on the output, or None
            (no copy mechanism).
    """

    source_embedding: keras.layers.Layer
    target_embedding: keras.layers.Layer
    encoder_blocks: tuple
    decoder_blocks: tuple
    encoder_norm: keras.layers.Layer = None
    decoder_norm: keras.layers.Layer = None
    output_projection: keras.layers.Layer = None
    encoder_outputs: tuple = ()
    pointer_generator: keras.layers.Layer = None

    @property
    def vocab_size(self):
        return self.target_embedding.vocab_size

    @property
    def max_length(self):
        return self.target_embedding.max_length

    @property
    def max_source_length(self):
        return self.source_embedding.max_length

    @property
    def num_caches(self):
        return 2 * len(self.decoder_blocks)

    @property
    def cross_attention_class(self):
        """The class of the decoder blocks' cross attention (None without one)."""
        block = self.decoder_blocks[0]
        return get_attention(block.cross_attention_variant) if block.cross_attention else None


def make_translator_layers(config):
    """The :class:`TranslatorLayers` of a new translator of ``config`` (a
    :class:`~zoo.models.translator.TranslatorConfig`), each with its stable name: the names of
    zoo 0.1.0's functional translators, so that their weights files load."""
    kwargs = _block_kwargs(config)
    if config.share_embeddings:
        source_embedding = target_embedding = _embedding(config, "embedding")
    else:
        source_embedding = _embedding(config, "source_embedding")
        target_embedding = _embedding(config, "target_embedding")
    decoder_kwargs = dict(kwargs)
    # Only when chosen: the saved configs of existing models stay as they were.
    if config.cross_attention_score != "scaled_dot":
        decoder_kwargs["cross_attention_kwargs"] = {"score": config.cross_attention_score}
    if config.cross_attention != "mha":
        decoder_kwargs["cross_attention_variant"] = config.cross_attention
    choice = config.cross_attention_layers  # "last", "mix" or one encoder layer per block
    indices = {"last": (), "mix": [None] * config.decoder_layers}.get(choice, choice)

    def final_norm(name):
        if not config.normalize_first:
            return None  # post-LN blocks end normalized
        return LayerNormalization(epsilon=1e-5, name=name)

    return TranslatorLayers(
        source_embedding,
        target_embedding,
        tuple(TransformerEncoderBlock(**kwargs, name=f"encoder_block_{i}")
              for i in range(config.encoder_layers)),
        tuple(TransformerDecoderBlock(**decoder_kwargs, name=f"decoder_block_{i}")
              for i in range(config.decoder_layers)),
        encoder_norm=final_norm("encoder_norm"),
        decoder_norm=final_norm("decoder_norm"),
        # None when tied to the target embedding
        output_projection=None if config.share_embeddings
        else keras.layers.Dense(config.vocab_size, name="output_projection"),
        encoder_outputs=tuple(LayerMix(config.encoder_layers + 1, index=index,
                                       name=f"encoder_output_{i}")
                              for i, index in enumerate(indices)),
        pointer_generator=PointerGenerator(name="pointer_generator")
        if config.copy_mechanism else None,
    )  # fmt: skip


def translator_layers(model):
    """The :class:`TranslatorLayers` of a translator (a backbone or a task model): its
    backbone's :attr:`~zoo.models.translator.TranslatorBackbone.roles`.

    Raises:
        ValueError: the model has no backbone of zoo's (a functional model of zoo 0.1.0,
            which ``zoo.tasks.load`` upgrades).
    """
    backbone = getattr(model, "backbone", None) or model  # a task model: its backbone
    if not hasattr(backbone, "roles"):
        raise ValueError(f"{model.name!r} is no translator's backbone (a functional model of "
                         "zoo 0.1.0? zoo.tasks.load reads it as today's)")  # fmt: skip
    return backbone.roles


# ---------------------------------------------------------------------- the forward pass
def encoder_stack(layers, source_ids, padding_mask=None, training=None,
                  return_attention=False):  # fmt: skip
    """Embed and encode the source: ``(B, S)`` ids -> the memory the decoder reads.

    The memory is ``(B, S, D)``, the last layer after the final norm, or, when the decoder
    blocks read chosen encoder layers (``layers.encoder_outputs``), a tuple of one such tensor
    per decoder block. Without ``padding_mask`` (the builder's symbolic inputs) the blocks
    read the padding from the embedding's implicit Keras mask. With ``return_attention``:
    ``(memory, weights)``, one ``(B, N, S, S)`` self-attention map per block.
    """
    x = layers.source_embedding(source_ids, training=training)  # (B, S, D)
    outputs, weights = [x], []
    for block in layers.encoder_blocks:
        x = block(x, padding_mask=padding_mask, training=training,
                  return_attention_scores=return_attention)  # fmt: skip
        if return_attention:
            x, w = x  # (B, S, D), (B, N, S, S)
            weights.append(w)
        outputs.append(x)
    norm = layers.encoder_norm or (lambda x: x)
    if not layers.encoder_outputs:
        memory = norm(x)
    else:
        memory = tuple(norm(choose(outputs)) for choose in layers.encoder_outputs)
    return (memory, weights) if return_attention else memory


def block_memory(memory, i):
    """What decoder block ``i`` reads: its own memory, or the one all blocks share."""
    return memory[i] if isinstance(memory, tuple) else memory


def decoder_stack(
    layers,
    target_ids,
    encoder_output=None,
    padding_mask=None,
    encoder_padding_mask=None,
    caches=None,
    index=0,
    return_cross_attention=False,
    use_causal_mask=True,
    token_embeddings=None,
    copy_source=None,
    cross_states=None,
    training=None,
    return_self_attention=False,
):
    """Embed and decode the target, then project: ``(B, T)`` ids -> logits ``(B, T, V)``.

    Over a whole target it attends over ``encoder_output`` (of :func:`encoder_stack`: one
    tensor or one per block); one token at a time it takes ``caches`` (a ``(self, cross)`` pair
    per block) and the position ``index``. ``use_causal_mask=False`` is the NAT's decoder, which
    may give ``token_embeddings`` ``(B, T, D)`` for the target's (the ids then give only the
    length and padding). With a copy mechanism, ``copy_source`` holds the
    :class:`~zoo.layers.PointerGenerator`'s ``memory``, ``source_ids`` (and cached
    ``memory_keys``), and the logits are log-probabilities. A stateful cross attention
    (:func:`cross_attention_of`) reads ``cross_states``, one per block: from the caches step by
    step, or over a whole target, when None and the variant ``needs_first_pass``, from a first
    pass of this stack (no gradient).

    Returns:
        ``(logits, caches, cross_weights)``: the logits ``(B, T, V)``; the blocks' updated
        cache pairs (empty without ``caches``); their cross-attention weights ``(B, N, T, S)``
        (empty unless ``return_cross_attention``). With ``return_self_attention`` (over a
        whole target, with ``return_cross_attention``) a fourth item: the blocks'
        self-attention weights ``(B, N, T, T)``.
    """
    if cross_states is None and caches is None and _needs_first_pass(layers):
        arguments = dict(
            encoder_output=encoder_output, padding_mask=padding_mask,
            encoder_padding_mask=encoder_padding_mask, use_causal_mask=use_causal_mask,
            token_embeddings=token_embeddings, copy_source=copy_source, training=training,
        )  # fmt: skip
        # cross_states=(): the first pass runs without states (and without a first pass).
        _, _, weights = decoder_stack(layers, target_ids, return_cross_attention=True,
                                      cross_states=(), **arguments)  # fmt: skip
        cross_states = tuple(
            cross_attention_of(block).sequence_state(w)
            for block, w in zip(layers.decoder_blocks, weights)
        )
        return decoder_stack(layers, target_ids, index=index, cross_states=cross_states,
                             return_cross_attention=return_cross_attention,
                             return_self_attention=return_self_attention, **arguments)  # fmt: skip
    # Only when given: the saved configs of token-reading models stay as they were.
    given = {} if token_embeddings is None else {"token_embeddings": token_embeddings}
    y = layers.target_embedding(target_ids, start_index=index, training=training, **given)
    decoder_input = y  # (B, T, D)
    new_caches, cross_weights, self_weights = [], [], []
    for i, block in enumerate(layers.decoder_blocks):
        cache = {}
        if caches is not None:
            self_cache, cross_cache = caches[i]
            cache = dict(self_cache=self_cache, cross_cache=cross_cache, cache_index=index)
        if cross_states and cross_states[i] is not None:
            cache["cross_attention_state"] = cross_states[i]
        outputs = block(
            y,
            block_memory(encoder_output, i),
            padding_mask=padding_mask,
            encoder_padding_mask=encoder_padding_mask,
            return_attention_scores=return_cross_attention,
            use_causal_mask=use_causal_mask,
            training=training,
            **cache,
        )
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        y = outputs[0]  # (B, T, D)
        if return_cross_attention:
            self_weights.append(outputs[1])  # (B, N, T, T)
            cross_weights.append(outputs[2])  # (B, N, T, S)
        if caches is not None:
            new_caches.append(tuple(outputs[-2:]))  # 2 x (B, L, N, H), 2 x (B, S, N, H)
    if layers.decoder_norm is not None:
        y = layers.decoder_norm(y)
    if layers.output_projection is None:
        logits = layers.target_embedding(y, reverse=True)  # (B, T, V), the tied projection
    else:
        logits = layers.output_projection(y)  # (B, T, V)
    if layers.pointer_generator is not None:
        if copy_source is None:
            raise ValueError("A translator with a copy mechanism needs the source to copy from.")
        logits = layers.pointer_generator(logits, y, decoder_input, **copy_source)  # (B, T, V)
    if return_self_attention:
        return logits, tuple(new_caches), cross_weights, self_weights
    return logits, tuple(new_caches), cross_weights


def cross_attention_of(block):
    """A decoder block's cross-attention layer if it is stateful (carries a state from step to
    step: :class:`~zoo.layers.attention.StatefulAttention`), else None."""
    layer = getattr(block, "cross_attention_layer", None)
    return layer if getattr(layer, "stateful", False) else None


def _needs_first_pass(layers):
    return getattr(layers.cross_attention_class, "needs_first_pass", False)


def copy_inputs(copying, memory, source_ids):
    """What the copy mechanism copies from (None without one): the source ids and the memory
    of the last decoder block."""
    if not copying:
        return None
    return {"memory": block_memory(memory, -1), "source_ids": source_ids}

