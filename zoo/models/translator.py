"""The autoregressive encoder-decoder translator (Multi30k En->De), built with the functional API.

The forward pass is written once, as an encoder stack and a decoder stack over the model's
layers. :func:`build_translator` runs them on symbolic inputs; :func:`encode`,
:func:`init_caches` and :func:`step` run the same functions on tensors, the decoder one token
at a time with its KV caches, for the searches of :mod:`zoo.decoding`
(:func:`step_and_caches` gives what a search takes).
"""

import functools
from dataclasses import dataclass, replace

import keras
from keras import ops

from zoo.layers import (
    GuidedAttention,
    LayerMix,
    PointerGenerator,
    ScheduledSampling,
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from zoo.layers.attention.scaled_dot_product import SCORE_FUNCTIONS
from zoo.layers.scheduled_sampling import SCHEDULES, check_schedule
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
        activation_dropout: dropout on the feed-forward network's inner activations.
        activation: the feed-forward activation (``relu``, ``gelu``, ``swiglu``, ...).
        normalize_first: pre-LN blocks (with a final norm after each stack) when True.
        position: ``"sinusoidal"`` or ``"learned"`` positions on the token embeddings.
        attention: the registered self-attention variant of every block.
        share_embeddings: one embedding matrix for source, target and the output projection.
        cross_attention_score: the score function of the decoder's cross attention:
            ``"scaled_dot"`` (Vaswani et al. 2017), ``"dot"`` (Luong et al. 2015),
            ``"cosine"`` or ``"additive"`` (Bahdanau et al. 2015). Self-attention keeps the
            scaled dot product.
        cross_attention_layers: what each decoder block's cross attention reads. ``"last"``:
            the encoder's last layer. ``"mix"``: its own learned softmax mix of every encoder
            layer's output, the embeddings included (transparent attention, Bapna et al.
            2018; :class:`~zoo.layers.LayerMix`). A tuple of one index per decoder block: the
            output it reads, 0 the embeddings and ``encoder_layers`` the last block. In pre-LN
            models the encoder's final norm normalizes what each block reads (the mix, or the
            chosen output), so that index ``encoder_layers`` is the default model. The NAT
            refuses anything but ``"last"``.
        copy_mechanism: a pointer-generator on the output (See et al. 2017;
            :class:`~zoo.layers.PointerGenerator`): a one-head copy attention over the
            encoder output (the last decoder block's, when the blocks read chosen layers)
            and a learned generation probability mix the vocabulary distribution with copies
            of source tokens. The model's outputs are then log-probabilities, which the loss
            and the searches read as logits. Copying is piece by piece (byte pieces, with the
            byte fallback).

    Training:
        scheduled_sampling: ``"none"``, or the decay of the gold-token probability of
            two-pass scheduled sampling (:class:`~zoo.layers.ScheduledSampling`):
            ``"linear"``, ``"exponential"`` or ``"inverse_sigmoid"``. The model then runs its
            decoder twice in training, the second time over gold tokens mixed with the first
            pass's argmax predictions (no gradient through the first pass), and counts its
            training steps in a saved weight (a resumed run goes on with the schedule). At
            inference its outputs are the plain translator's, and decoding never runs the
            first pass. The NAT refuses it.
        scheduled_sampling_k, scheduled_sampling_c, scheduled_sampling_min: the schedule's
            ``k`` (None: the schedule's default; exponential ``0 < k <= 1``, inverse sigmoid
            ``k >= 1``), the linear slope ``c`` and the floor under every schedule
            (:func:`zoo.layers.scheduled_sampling.gold_probability`).
        guided_attention_weight: above 0, the weight of an auxiliary loss that pulls every
            decoder block's cross attention toward the diagonal (Tachibana et al. 2017;
            :class:`~zoo.layers.GuidedAttention`), for monotonic tasks.
        guided_attention_decay: the loss weight's factor per training step (1: constant).
        guided_attention_sigma: the width of the diagonal band that goes unpenalised.
        label_smoothing, learning_rate (peak), warmup_steps, weight_decay, clipnorm: the
            optimisation (AdamW with an inverse-square-root warm-up schedule).
        gradient_accumulation_steps: above 1, each update applies the mean gradient of this
            many batches (:func:`~zoo.training.make_optimizer`), for a device too small for
            ``batch_tokens``; ``warmup_steps`` then counts updates.
        batch_tokens: the token budget of one batch.
        bucket_width: the length step between the batches' length buckets. Under XLA each
            bucket is one padded shape, so one compiled program: wider buckets mean fewer
            compilations (what a short run spends its time on) and more padding.
        epochs: training epochs.
        vocab_sample_size: sentences sampled to learn the SentencePiece model.
        data_dir: a folder of ``zoo distill`` (:func:`zoo.training.distill`): its pairs, the
            sources and a teacher's translations, replace Multi30k's training split; ``""``
            trains on Multi30k. A config field, so that a workdir refuses to resume on other
            data.
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
    activation_dropout: float = 0.0
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
    gradient_accumulation_steps: int = 1
    batch_tokens: int = 4096
    bucket_width: int = 8
    epochs: int = 40
    vocab_sample_size: int = 200_000
    data_dir: str = ""
    cross_attention_score: str = "scaled_dot"
    cross_attention_layers: str | tuple = "last"
    scheduled_sampling: str = "none"
    scheduled_sampling_k: float | None = None
    scheduled_sampling_c: float = 1e-4
    scheduled_sampling_min: float = 0.0
    guided_attention_weight: float = 0.0
    guided_attention_decay: float = 1.0
    guided_attention_sigma: float = 0.2
    copy_mechanism: bool = False

    def __post_init__(self):
        if self.cross_attention_score not in SCORE_FUNCTIONS:
            raise ValueError(
                f"Unknown cross_attention_score {self.cross_attention_score!r}; expected one "
                f"of {SCORE_FUNCTIONS}."
            )
        if isinstance(self.cross_attention_layers, list):  # read back from config.json
            object.__setattr__(self, "cross_attention_layers", tuple(self.cross_attention_layers))
        _check_cross_attention_layers(self)
        if (
            self.guided_attention_weight < 0
            or not 0 < self.guided_attention_decay <= 1
            or self.guided_attention_sigma <= 0
        ):
            raise ValueError(
                "guided_attention_weight must be >= 0, guided_attention_decay in (0, 1] and "
                f"guided_attention_sigma > 0; got {self.guided_attention_weight!r}, "
                f"{self.guided_attention_decay!r}, {self.guided_attention_sigma!r}."
            )
        if not isinstance(self.copy_mechanism, bool):
            raise ValueError(
                f"copy_mechanism must be True or False, got {self.copy_mechanism!r}."
            )
        if self.scheduled_sampling not in ("none",) + SCHEDULES:
            raise ValueError(
                f"Unknown scheduled_sampling {self.scheduled_sampling!r}; expected one of "
                f"{('none',) + SCHEDULES}."
            )
        if self.scheduled_sampling != "none":
            check_schedule(
                self.scheduled_sampling, self.scheduled_sampling_k, self.scheduled_sampling_c,
                self.scheduled_sampling_min, names=_SCHEDULE_FIELDS,
            )  # fmt: skip


# What the schedule's checks call its arguments: the config's fields.
_SCHEDULE_FIELDS = {
    "schedule": "scheduled_sampling",
    "k": "scheduled_sampling_k",
    "c": "scheduled_sampling_c",
    "minimum": "scheduled_sampling_min",
}


def _check_cross_attention_layers(config):
    layers = config.cross_attention_layers
    if isinstance(layers, str):
        if layers not in ("last", "mix"):
            raise ValueError(
                f"Unknown cross_attention_layers {layers!r}; expected 'last', 'mix' or a tuple "
                "of encoder-layer indices, one per decoder block."
            )
        return
    indices = range(config.encoder_layers + 1)
    if (
        not isinstance(layers, tuple)
        or len(layers) != config.decoder_layers
        or not all(isinstance(i, int) and not isinstance(i, bool) and i in indices for i in layers)
    ):
        raise ValueError(
            f"cross_attention_layers={layers!r} must be 'last', 'mix' or a tuple of "
            f"{config.decoder_layers} indices (one per decoder block), each from 0 (the "
            f"embeddings) to {config.encoder_layers} (the last encoder block)."
        )


# `small` is the fairseq transformer-tiny shape the issue compares against (4+4 layers,
# d=128, ff=256, 4 heads, shared embeddings); `tiny` is for tests; `demo` is sized for `make
# demo`'s 6 minutes of training on 2 CPU cores.
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
# `small`'s width with half its depth, a short warm-up at a higher peak and no attention dropout
# (its random numbers cost a quarter of a block's step), so that 6 minutes buy several epochs.
# One setting was tried (21.88 BLEU on val after 6 minutes); it is not the result of a sweep.
PRESETS["demo"] = replace(
    PRESETS["small"],
    vocab_size=4000,
    max_length=64,
    encoder_layers=2,
    decoder_layers=2,
    attention_dropout=0.0,
    learning_rate=2e-3,
    warmup_steps=300,
    epochs=100,
    # Under XLA each bucket's shapes compile once, in the first epoch: with 8-token buckets
    # those compiles took 372 s of the demo's 6 minutes on this 2-core machine.
    bucket_width=16,
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


class _NewLayers:
    """The layers of a new translator, each made when the builder's stacks first reach it.

    A layer draws random seeds when it is made and again when it is built, so making each one
    just before its first call keeps the order of the draws, and with it the weights that a
    given seed builds, as they have always been. It has the attributes of
    :class:`TranslatorLayers`; the blocks come as generators, made one at a time the first
    time a stack runs and the same ones after.
    """

    def __init__(self, config):
        self.config = config
        self._made = {"encoder_block_": [], "decoder_block_": []}

    def _blocks(self, prefix, block_class, count):
        made = self._made[prefix]
        for i in range(count):
            if i == len(made):
                made.append(block_class(**_block_kwargs(self.config), name=f"{prefix}{i}"))
            yield made[i]

    @functools.cached_property
    def _embeddings(self):
        if self.config.share_embeddings:
            embedding = _embedding(self.config, "embedding")
            return embedding, embedding
        return _embedding(self.config, "source_embedding"), _embedding(
            self.config, "target_embedding"
        )

    @property
    def source_embedding(self):
        return self._embeddings[0]

    @property
    def target_embedding(self):
        return self._embeddings[1]

    @property
    def encoder_blocks(self):
        return self._blocks("encoder_block_", TransformerEncoderBlock, self.config.encoder_layers)

    @property
    def decoder_blocks(self):
        return self._blocks("decoder_block_", self._decoder_block, self.config.decoder_layers)

    def _decoder_block(self, **kwargs):
        if self.config.cross_attention_score != "scaled_dot":
            # Only when chosen: the saved configs of existing models stay as they were.
            kwargs["cross_attention_kwargs"] = {"score": self.config.cross_attention_score}
        return TransformerDecoderBlock(**kwargs)

    @functools.cached_property
    def encoder_norm(self):
        return self._final_norm("encoder_norm")

    @functools.cached_property
    def encoder_outputs(self):
        choice, count = self.config.cross_attention_layers, self.config.encoder_layers + 1
        if choice == "last":
            return ()
        indices = [None] * self.config.decoder_layers if choice == "mix" else choice
        return tuple(
            LayerMix(count, index=index, name=f"encoder_output_{i}")
            for i, index in enumerate(indices)
        )

    @functools.cached_property
    def decoder_norm(self):
        return self._final_norm("decoder_norm")

    @functools.cached_property
    def pointer_generator(self):
        if not self.config.copy_mechanism:
            return None
        return PointerGenerator(name="pointer_generator")

    @functools.cached_property
    def output_projection(self):
        if self.config.share_embeddings:
            return None  # tied to the target embedding
        return keras.layers.Dense(self.config.vocab_size, name="output_projection")

    def _final_norm(self, name):
        if not self.config.normalize_first:
            return None  # post-LN blocks end normalized
        return keras.layers.LayerNormalization(epsilon=1e-5, name=name)


def translator_layers(model):
    """The :class:`TranslatorLayers` of a translator, found by their stable names.

    This is the one place that reads a model by layer names, so a model loaded from a
    ``.keras`` file (also one saved before the layers had a class of their own) decodes with
    the same stacks as the builder runs.

    Args:
        model: a ``keras.Model`` of :func:`build_translator`, built or loaded.

    Returns:
        Its :class:`TranslatorLayers`.

    Raises:
        ValueError: the model lacks a layer a translator has.
    """
    layers = {layer.name: layer for layer in model.layers}

    def find(name):
        if name not in layers:
            raise ValueError(
                f"A translator needs a layer named {name!r}; model {model.name!r} (not a model "
                f"of zoo.models.build_translator?) has {sorted(layers)}."
            )
        return layers[name]

    def numbered(prefix):
        blocks = []
        while f"{prefix}{len(blocks)}" in layers:
            blocks.append(layers[f"{prefix}{len(blocks)}"])
        return tuple(blocks)

    if "embedding" in layers:
        source_embedding = target_embedding = layers["embedding"]
        output_projection = None  # tied: embedding(hidden, reverse=True)
    else:
        source_embedding = find("source_embedding")
        target_embedding = find("target_embedding")
        output_projection = find("output_projection")
    decoder_blocks = numbered("decoder_block_")
    if not decoder_blocks:
        find("decoder_block_0")
    return TranslatorLayers(
        source_embedding,
        target_embedding,
        numbered("encoder_block_"),
        decoder_blocks,
        encoder_norm=layers.get("encoder_norm"),
        decoder_norm=layers.get("decoder_norm"),
        output_projection=output_projection,
        encoder_outputs=numbered("encoder_output_"),
        pointer_generator=layers.get("pointer_generator"),
    )


# ---------------------------------------------------------------------- the forward pass
def _encoder_stack(layers, source_ids, padding_mask=None, training=None):
    """Embed and encode the source: ``(B, S)`` ids -> the memory the decoder reads.

    The memory is ``(B, S, D)``, the last layer after the final norm, or, when the decoder
    blocks read chosen encoder layers (``layers.encoder_outputs``), a tuple of one such tensor
    per decoder block. Without ``padding_mask`` (the builder's symbolic inputs) the blocks
    read the padding from the embedding's implicit Keras mask.
    """
    x = layers.source_embedding(source_ids, training=training)  # (B, S, D)
    outputs = [x]
    for block in layers.encoder_blocks:
        x = block(x, padding_mask=padding_mask, training=training)  # (B, S, D)
        outputs.append(x)
    norm = layers.encoder_norm or (lambda x: x)
    if not layers.encoder_outputs:
        return norm(x)
    return tuple(norm(choose(outputs)) for choose in layers.encoder_outputs)


def _block_memory(memory, i):
    """What decoder block ``i`` reads: its own memory, or the one all blocks share."""
    return memory[i] if isinstance(memory, tuple) else memory


def _decoder_stack(
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
    training=None,
):
    """Embed and decode the target, then project: ``(B, T)`` ids -> logits ``(B, T, V)``.

    Over a whole target it attends over ``encoder_output`` (the memory of
    :func:`_encoder_stack`, one tensor or one per block; the builder: masks implicit; the
    pictures: masks given). One token at a time it takes ``caches``, one ``(self, cross)`` pair
    per block, and the position ``index`` of ``target_ids``. ``use_causal_mask=False`` lets
    every position see every other: the non-autoregressive decoder of :mod:`zoo.models.nat`,
    which may also give ``token_embeddings`` ``(B, T, D)`` to stand for the target's token
    embeddings (the ids then give only the length and the padding).

    With a copy mechanism (``layers.pointer_generator``) ``copy_source`` gives what it copies
    from, the arguments of :class:`~zoo.layers.PointerGenerator` after the decoder's own:
    ``memory`` and ``source_ids`` (and ``memory_keys``, cached once per source); the logits
    are then its log-probabilities.

    Returns:
        ``(logits, caches, cross_weights)``: the logits ``(B, T, V)``; the blocks' updated
        cache pairs (empty without ``caches``); their cross-attention weights ``(B, N, T, S)``
        (empty unless ``return_cross_attention``).
    """
    # Only when given: the saved configs of token-reading models stay as they were.
    given = {} if token_embeddings is None else {"token_embeddings": token_embeddings}
    y = layers.target_embedding(target_ids, start_index=index, training=training, **given)
    decoder_input = y  # (B, T, D)
    new_caches, cross_weights = [], []
    for i, block in enumerate(layers.decoder_blocks):
        cache = {}
        if caches is not None:
            self_cache, cross_cache = caches[i]
            cache = dict(self_cache=self_cache, cross_cache=cross_cache, cache_index=index)
        outputs = block(
            y,
            _block_memory(encoder_output, i),
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
    return logits, tuple(new_caches), cross_weights


def _copy_source(copying, memory, source_ids):
    """What the copy mechanism copies from (None without one): the source ids and the memory
    of the last decoder block."""
    if not copying:
        return None
    return {"memory": _block_memory(memory, -1), "source_ids": source_ids}


def build_translator(config):
    """A functional encoder-decoder: ``{"source", "target_in"}`` token ids -> target logits.

    Layer names are stable, so decoding and export find the parts by name
    (:func:`translator_layers`): ``source_embedding``/``target_embedding`` (one shared
    ``embedding`` when ``share_embeddings``), ``encoder_block_{i}``, ``encoder_norm``,
    ``decoder_block_{i}``, ``decoder_norm``, ``output_projection`` (absent when the
    embedding is tied) and ``pointer_generator`` (with ``copy_mechanism`` only).

    Args:
        config: a :class:`TranslatorConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"source": (B, S), "target_in": (B, T)}`` int32 ids (0 is
        padding) to logits ``(B, T, vocab_size)`` (log-probabilities with ``copy_mechanism``).

    Example:
        >>> model = build_translator(get_config("tiny"))
        >>> model.output_shape
        (None, None, 1000)

    References:
        Vaswani et al. 2017, "Attention Is All You Need".
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    layers = _NewLayers(config)
    memory = _encoder_stack(layers, source)  # (B, S, D) or one per block, with the padding mask
    decoder_input = target_in
    copy = _copy_source(config.copy_mechanism, memory, source)
    if config.scheduled_sampling != "none":
        first, _, _ = _decoder_stack(layers, target_in, memory, copy_source=copy)  # (B, T, V)
        mix = ScheduledSampling(
            config.scheduled_sampling,
            k=config.scheduled_sampling_k,
            c=config.scheduled_sampling_c,
            minimum=config.scheduled_sampling_min,
            name="scheduled_sampling",
        )
        decoder_input = mix(target_in, first)  # (B, T): the gold input at inference
    guided = config.guided_attention_weight > 0
    logits, _, cross = _decoder_stack(
        layers, decoder_input, memory, return_cross_attention=guided, copy_source=copy
    )  # (B, T, V), one (B, N, T, S) per block
    if guided:
        guide = GuidedAttention(
            config.guided_attention_weight,
            decay=config.guided_attention_decay,
            sigma=config.guided_attention_sigma,
            name="guided_attention",
        )
        logits = guide(logits, cross, decoder_input, source)  # the loss added in training
    return keras.Model({"source": source, "target_in": target_in}, logits, name="translator")


# ---------------------------------------------------------------------- incremental decoding
def encode(model, source_ids):
    """Run the encoder once.

    Args:
        model: a translator of :func:`build_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.

    Returns:
        ``(memory, source_padding)``: the encoder output ``(B, S, D)`` (a tuple of one per
        decoder block when the blocks read chosen encoder layers) and the boolean ``(B, S)``
        mask, True on real tokens.
    """
    layers = translator_layers(model)
    source_ids = ops.cast(source_ids, "int32")
    source_padding = layers.source_embedding.compute_mask(source_ids)  # (B, S)
    memory = _encoder_stack(layers, source_ids, padding_mask=source_padding, training=False)
    return memory, source_padding


def init_caches(
    model, memory, source_padding, max_length, monotonic=False, source_ids=None
):
    """The caches of a search of ``max_length`` steps over ``memory``.

    Args:
        model: a translator of :func:`build_translator`.
        memory: the encoder output of :func:`encode`: ``(B, S, D)``, or one per block.
        source_padding: ``(B, S)`` boolean, True on real source tokens.
        max_length: Python int, the number of decoder steps (and self-attention cache slots);
            at most the model's target positions. A scalar int tensor is taken as it is (a
            search sized from its source, :func:`zoo.decoding.output_length`).
        monotonic: add the ``"attention_position"`` that :func:`step`'s
            ``monotonic_window`` moves forward, ``(B,)`` int32 zeros.
        source_ids: ``(B, S)`` int ids of the source; needed by a model with a copy
            mechanism, which copies from them.

    Returns:
        A dict of batch-major tensors: ``"blocks"``, one ``(self, cross)`` pair per decoder
        block, its empty self-attention cache (keys and values, each ``(B, max_length, N,
        H)``) and its cross-attention cache (each ``(B, S, N, H)``) computed here once from
        ``memory``;
        ``"source_padding"``; and with a copy mechanism ``"copy_source"``, the
        :class:`~zoo.layers.PointerGenerator`'s ``memory`` ``(B, S, D)``, its ``memory_keys``
        computed here once, and the ``source_ids`` ``(B, S)``.

    Raises:
        ValueError: ``max_length`` is not a positive int, or more than the target positions;
            a model with a copy mechanism without ``source_ids``.
    """
    layers = translator_layers(model)
    limit = layers.max_length
    if ops.is_tensor(max_length):
        pass  # a search sized from its source, at run time: its caller bounds it
    elif not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ValueError(f"max_length must be a positive Python int, got {max_length!r}.")
    elif limit is not None and max_length > limit:
        raise ValueError(
            f"max_length={max_length} needs {max_length} target positions, but the model's "
            f"embedding has max_length={limit}."
        )
    batch = ops.shape(_block_memory(memory, 0))[0]
    blocks = tuple(
        (
            block.init_self_cache(batch, max_length),
            block.compute_cross_cache(_block_memory(memory, i)),
        )
        for i, block in enumerate(layers.decoder_blocks)
    )
    caches = {"blocks": blocks, "source_padding": source_padding}
    if monotonic:
        caches["attention_position"] = ops.zeros((batch,), "int32")
    if layers.pointer_generator is not None:
        if source_ids is None:
            raise ValueError(
                "This translator has a copy mechanism: init_caches needs the source_ids it "
                "copies from."
            )
        copy = _copy_source(True, memory, ops.cast(source_ids, "int32"))
        copy["memory_keys"] = layers.pointer_generator.compute_cache(copy["memory"])
        caches["copy_source"] = copy  # (B, S, D), (B, S, K), (B, S)
    return caches


def step(model, token_ids, caches, index, monotonic_window=None):
    """One decoder step: the logits of the token after ``token_ids``.

    Args:
        model: a translator of :func:`build_translator`.
        token_ids: ``(B, 1)`` int ids, the token at position ``index`` (BOS at 0).
        caches: the dict of :func:`init_caches`, or of the previous step.
        index: int or scalar int tensor, the position of ``token_ids``.
        monotonic_window: None, or a Python int ``w``: monotonic attention decoding, for
            tasks whose alignment only moves forward. Every block's cross attention then
            sees only the source positions ``p .. p + w - 1``, ``p`` being where the last
            block's attention (the mean over heads) peaked at the step before (0 at first;
            the last real token when ``p`` is past it): the peak can stay or move ahead by
            less than ``w``, never back (the forced-incremental attention of Tachibana et al.
            2017). ``caches`` must come from :func:`init_caches` with ``monotonic=True``.

    Returns:
        ``(logits, caches)``: float32 logits ``(B, V)`` of the next token, and the caches with
        this step's keys and values written at ``index`` (the cross caches, the source
        padding and the copy mechanism's source are handed back as they came; the attention
        position moves).
    """
    layers = translator_layers(model)
    if len(caches["blocks"]) != len(layers.decoder_blocks):
        raise ValueError(
            f"Expected {layers.num_caches} caches, got {2 * len(caches['blocks'])}."
        )
    source_padding = visible = caches["source_padding"]  # (B, S)
    if monotonic_window is not None:
        if "attention_position" not in caches:
            raise ValueError("monotonic_window needs the caches of init_caches(monotonic=True).")
        visible = _monotonic_window(source_padding, caches["attention_position"], monotonic_window)
    logits, blocks, cross = _decoder_stack(
        layers,
        ops.cast(token_ids, "int32"),
        encoder_padding_mask=visible,
        caches=caches["blocks"],
        index=index,
        return_cross_attention=monotonic_window is not None,
        copy_source=caches.get("copy_source"),
        training=False,
    )
    # What the step does not change goes back as it came (beam search relies on it).
    new_caches = {**caches, "blocks": blocks}
    if monotonic_window is not None:
        peak = ops.argmax(ops.mean(ops.cast(cross[-1][:, :, 0, :], "float32"), axis=1), axis=-1)
        new_caches["attention_position"] = ops.cast(peak, "int32")  # (B,)
    return ops.cast(logits[:, 0, :], "float32"), new_caches


def _monotonic_window(source_padding, position, width):
    """``(B, S)`` True on the real source positions from ``position`` (at most the last real
    one) to ``position + width - 1``."""
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ValueError(f"monotonic_window must be a positive Python int, got {width!r}.")
    last = ops.sum(ops.cast(source_padding, "int32"), axis=1) - 1  # (B,)
    start = ops.minimum(position, ops.maximum(last, 0))[:, None]  # (B, 1)
    positions = ops.arange(ops.shape(source_padding)[1], dtype="int32")[None, :]  # (1, S)
    return source_padding & (positions >= start) & (positions < start + width)


def step_and_caches(model, source_ids, max_length, monotonic_window=None):
    """What every search of :mod:`zoo.decoding` takes: the step function and the caches.

    The encoder runs here, once. Beam search repeats the caches per beam itself, so the same
    pair serves greedy search, sampling and beam search.

    Args:
        model: a translator of :func:`build_translator`.
        source_ids: ``(B, S)`` int source ids, 0-padded.
        max_length: Python int, the most tokens the search generates (its ``max_length``).
        monotonic_window: None, or the window of monotonic attention decoding (:func:`step`).

    Returns:
        ``(step, caches)``: ``step(token_ids, caches, index) -> (logits, caches)`` (this
        module's :func:`step` for ``model``, on its weights as they were read here) and the
        initial caches of :func:`init_caches`.

    Example:
        >>> from zoo.decoding import greedy_search
        >>> model = build_translator(get_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
        >>> step_fn, caches = step_and_caches(model, source, max_length=6)
        >>> tuple(greedy_search(step_fn, caches, max_length=6).shape)
        (2, 6)
    """
    memory, source_padding = encode(model, source_ids)
    monotonic = monotonic_window is not None
    caches = init_caches(
        model, memory, source_padding, max_length, monotonic=monotonic, source_ids=source_ids
    )
    # Every weight read once, here: in TensorFlow's graph mode a read is an op, which the
    # search's loop would run at every step (stop_gradient reads it on every backend).
    weights = [(variable, ops.stop_gradient(variable)) for variable in model.variables]

    def step_fn(token_ids, caches, index):
        with keras.StatelessScope(weights):
            return step(model, token_ids, caches, index, monotonic_window=monotonic_window)

    return step_fn, caches


def full_logits(model, source_ids, target_in):
    """The whole model at once: ``(B, S)`` and ``(B, T)`` ids -> float32 logits ``(B, T, V)``."""
    inputs = {"source": ops.cast(source_ids, "int32"), "target_in": ops.cast(target_in, "int32")}
    return ops.cast(model(inputs, training=False), "float32")


def rescorer(model, source_ids, bos_id):
    """A scorer of whole candidate translations by this translator, for reranking.

    Gu et al. 2018 rerank a non-autoregressive model's candidates with an autoregressive one;
    :func:`zoo.decoding.nat_search` takes the function returned here as its ``rescore``. Each
    candidate is read once with teacher forcing (one parallel pass, no search).

    Args:
        model: a translator of :func:`build_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded: the sentences the candidates translate.
        bos_id: the id that starts the decoder's input.

    Returns:
        ``rescore(tokens) -> scores``: ``(B, l, L)`` int candidates (0 after each one's end;
        its EOS, if any, counts as a token) to float32 ``(B, l)`` mean log-probabilities per
        token under ``model``; an empty candidate scores ``-inf``.

    Example:
        >>> model = build_translator(get_config("tiny"))
        >>> score = rescorer(model, ops.convert_to_tensor([[5, 6, 3]], "int32"), bos_id=2)
        >>> candidates = ops.convert_to_tensor([[[7, 8, 3, 0], [7, 3, 0, 0]]], "int32")
        >>> tuple(score(candidates).shape)
        (1, 2)
    """
    source_ids = ops.cast(source_ids, "int32")

    def rescore(tokens):
        tokens = ops.cast(tokens, "int32")
        batch, beam, length = ops.shape(tokens)[0], ops.shape(tokens)[1], ops.shape(tokens)[2]
        flat = ops.reshape(tokens, (-1, length))  # (B*l, L), row b*l + k
        bos = ops.full((ops.shape(flat)[0], 1), bos_id, "int32")
        target_in = ops.concatenate([bos, flat[:, :-1]], axis=1)  # the target shifted right
        logits = full_logits(model, ops.repeat(source_ids, beam, axis=0), target_in)
        log_p = ops.take_along_axis(
            ops.log_softmax(logits, axis=-1), ops.expand_dims(flat, -1), axis=-1
        )[..., 0]  # (B*l, L)
        real = ops.cast(ops.not_equal(flat, 0), "float32")
        total = ops.sum(log_p * real, axis=1)
        count = ops.sum(real, axis=1)
        mean = ops.where(count > 0, total / ops.maximum(count, 1.0), float("-inf"))
        return ops.reshape(mean, (batch, beam))

    return rescore


def cross_attention_weights(model, source_ids, target_in):
    """The cross-attention weights of every decoder block, for pictures.

    Args:
        model: a translator of :func:`build_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.
        target_in: ``(B, T)`` int ids, BOS first (the decoder input).

    Returns:
        A list with one ``(B, N, T, S)`` array per decoder block: how much each target
        position attends to each source token.
    """
    layers = translator_layers(model)
    memory, source_padding = encode(model, source_ids)
    target_in = ops.cast(target_in, "int32")
    _, _, weights = _decoder_stack(
        layers,
        target_in,
        memory,
        padding_mask=layers.target_embedding.compute_mask(target_in),
        encoder_padding_mask=source_padding,
        return_cross_attention=True,
        copy_source=_copy_source(layers.pointer_generator is not None, memory, source_ids),
        training=False,
    )
    return weights
