"""A trained translator's inference API: encode once, then step with KV caches (what every search
of :mod:`zoo.decoding` takes, :func:`step_and_caches`), whole-target logits, the rescorer of a
NAT's candidates, and the cross-attention weights for pictures.
"""

import keras
from keras import ops

from zoo.models.translator.stacks import (
    block_memory,
    copy_inputs,
    cross_attention_of,
    decoder_stack,
    encoder_stack,
    translator_layers,
)

__all__ = [
    "attention_weights",
    "encode",
    "full_logits",
    "init_caches",
    "rescorer",
    "step",
    "step_and_caches",
]


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
    memory = encoder_stack(layers, source_ids, padding_mask=source_padding, training=False)
    return memory, source_padding


def init_caches(
    model, memory, source_padding, max_length, monotonic=False, source_ids=None
):
    """The caches of a search of ``max_length`` steps over ``memory``.

    Args:
        model: a translator of :func:`build_translator`.
        memory: the encoder output of :func:`encode`: ``(B, S, D)``, or one per block.
        source_padding: ``(B, S)`` boolean, True on real source tokens.
        max_length: Python int, the number of decoder steps (and self-attention cache slots),
            at most the model's target positions; or a scalar int tensor, taken as it is.
        monotonic: add the ``"attention_position"`` that :func:`step`'s
            ``monotonic_window`` moves forward, ``(B,)`` int32 zeros.
        source_ids: ``(B, S)`` int source ids, needed by a model with a copy mechanism.

    Returns:
        A dict of batch-major tensors: ``"blocks"``, per decoder block an empty self-attention
        cache (keys and values, each ``(B, max_length, N, H)``) and a cross-attention cache
        (each ``(B, S, N, H)``) computed once from ``memory``; ``"source_padding"``; with a
        stateful cross attention, ``"cross_states"``, one per block; with a copy mechanism,
        ``"copy_source"``: the :class:`~zoo.layers.PointerGenerator`'s ``memory``
        ``(B, S, D)``, its ``memory_keys`` and the ``source_ids`` ``(B, S)``.

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
    batch = ops.shape(block_memory(memory, 0))[0]
    blocks = tuple(
        (
            block.init_self_cache(batch, max_length),
            block.compute_cross_cache(block_memory(memory, i)),
        )
        for i, block in enumerate(layers.decoder_blocks)
    )
    caches = {"blocks": blocks, "source_padding": source_padding}
    stateful = [cross_attention_of(block) for block in layers.decoder_blocks]
    if any(layer is not None for layer in stateful):  # location-aware or monotonic attention
        source_length = ops.shape(source_padding)[1]
        caches["cross_states"] = tuple(
            layer.initial_state(batch, source_length) for layer in stateful
        )
    if monotonic:
        caches["attention_position"] = ops.zeros((batch,), "int32")
    if layers.pointer_generator is not None:
        if source_ids is None:
            raise ValueError(
                "This translator has a copy mechanism: init_caches needs the source_ids it "
                "copies from."
            )
        copy = copy_inputs(True, memory, ops.cast(source_ids, "int32"))
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
        position and the stateful cross attentions' states move).
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
    states = caches.get("cross_states")
    logits, blocks, cross = decoder_stack(
        layers,
        ops.cast(token_ids, "int32"),
        encoder_padding_mask=visible,
        caches=caches["blocks"],
        index=index,
        return_cross_attention=monotonic_window is not None or states is not None,
        copy_source=caches.get("copy_source"),
        cross_states=states,
        training=False,
    )
    # What the step does not change goes back as it came (beam search relies on it).
    new_caches = {**caches, "blocks": blocks}
    if states is not None:
        new_caches["cross_states"] = tuple(
            cross_attention_of(block).next_state(state, weights)
            for block, state, weights in zip(layers.decoder_blocks, states, cross)
        )
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
        >>> from zoo.models.translator import build_translator, get_config
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
        >>> from zoo.models.translator import build_translator, get_config
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


def attention_weights(model, source_ids, target_in):
    """Every attention map of a translator over a source and a target, for pictures.

    Args:
        model: a translator (its task model or backbone).
        source_ids: ``(B, S)`` int ids, 0-padded.
        target_in: ``(B, T)`` int ids, BOS first (the decoder input).

    Returns:
        ``{"encoder_self": [...], "decoder_self": [...], "cross": [...]}``, one array per
        block: ``(B, N, S, S)``, ``(B, N, T, T)`` and ``(B, N, T, S)``, where each query
        position (a row) attends.
    """
    layers = translator_layers(model)
    source_ids, target_in = ops.cast(source_ids, "int32"), ops.cast(target_in, "int32")
    source_padding = layers.source_embedding.compute_mask(source_ids)  # (B, S)
    memory, encoder_self = encoder_stack(layers, source_ids, padding_mask=source_padding,
                                         training=False, return_attention=True)  # fmt: skip
    _, _, cross, decoder_self = decoder_stack(
        layers,
        target_in,
        memory,
        padding_mask=layers.target_embedding.compute_mask(target_in),
        encoder_padding_mask=source_padding,
        return_cross_attention=True,
        return_self_attention=True,
        copy_source=copy_inputs(layers.pointer_generator is not None, memory, source_ids),
        training=False,
    )
    return {"encoder_self": encoder_self, "decoder_self": decoder_self, "cross": cross}
