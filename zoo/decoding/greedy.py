"""Greedy search with the KV caches, and the slow reference that re-runs the whole model.

Both loops are ``keras.ops.while_loop`` over fixed-size buffers, so they trace in plain
TensorFlow graph mode and compile with XLA (``tf.function(jit_compile=True)``).
"""

from keras import ops

from zoo.data.sentencepiece_vocab import BOS_ID, EOS_ID, PAD_ID
from zoo.decoding.incremental import (
    as_translator,
    check_max_length,
    mask_padding_logits,
    write_column,
)

__all__ = ["greedy_search", "uncached_greedy_search"]


def greedy_search(translator, source_ids, max_length, bos_id=BOS_ID, eos_id=EOS_ID):
    """Translate by taking the most likely next token at every step, with the KV caches.

    The encoder runs once, the cross-attention caches are computed once, and each step runs
    the decoder on one token. A sequence is finished at its first EOS; the loop stops as soon
    as every sequence of the batch is finished, or after ``max_length`` steps. The padding id
    is never emitted.

    Args:
        translator: an :class:`~zoo.decoding.IncrementalTranslator` (or the translator model).
        source_ids: ``(B, S)`` int source ids, 0-padded.
        max_length: Python int, the most tokens generated per sentence (EOS included);
            None for every target position of the model.
        bos_id: the id the decoder starts from.
        eos_id: the id that ends a sentence.

    Returns:
        ``(B, max_length)`` int32 ids: the generated tokens after BOS, the EOS included when
        one was produced, then :data:`~zoo.data.PAD_ID` (0) up to ``max_length``.

    Example:
        >>> from zoo.models import build_translator, translator_config
        >>> model = build_translator(translator_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
        >>> tuple(greedy_search(model, source, max_length=6).shape)
        (2, 6)

    References:
        Vaswani et al. 2017, "Attention Is All You Need" (autoregressive decoding).
    """
    translator = as_translator(translator)
    max_length = check_max_length(translator, max_length)
    memory, source_padding = translator.encode(source_ids)
    caches = translator.init_caches(memory, max_length)
    batch = ops.shape(source_ids)[0]

    def cond(index, token, ids, finished, caches):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(finished)))

    def body(index, token, ids, finished, caches):
        logits, caches = translator.step(token, caches, index, source_padding)
        next_token = ops.cast(ops.argmax(mask_padding_logits(logits), axis=-1), "int32")  # (B,)
        ids = write_column(ids, index, ops.where(finished, PAD_ID, next_token))
        finished = ops.logical_or(finished, ops.equal(next_token, eos_id))
        return index + 1, ops.expand_dims(next_token, 1), ids, finished, caches

    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        ops.full((batch, 1), bos_id, "int32"),  # the token fed at the current position
        ops.zeros((batch, max_length), "int32"),
        ops.zeros((batch,), "bool"),
        caches,
    )
    _, _, ids, _, _ = ops.while_loop(cond, body, loop_vars)
    return ids


def uncached_greedy_search(
    translator, source_ids, max_length, bos_id=BOS_ID, eos_id=EOS_ID, static_shapes=True
):
    """Greedy search the slow way: the full model on the whole prefix at every step.

    This is the loop of the TensorFlow tutorial ("Neural machine translation with a
    Transformer and Keras"): no cache, the encoder and the decoder re-run on everything at
    every step. It is the reference that :func:`greedy_search` must equal token for token,
    and the baseline of the decoding benchmark. It returns what :func:`greedy_search` does.

    Args:
        translator: an :class:`~zoo.decoding.IncrementalTranslator` (or the translator model).
        source_ids: ``(B, S)`` int source ids, 0-padded.
        max_length: Python int, the most tokens generated per sentence (EOS included);
            None for every target position of the model.
        bos_id: the id the decoder starts from.
        eos_id: the id that ends a sentence.
        static_shapes: run the model on the whole ``(B, max_length)`` target buffer at every
            step, and read the logits at the current position (the positions after it are
            padding, hidden by the causal mask): every shape is static, so this compiles
            with XLA. When False, the model runs on the prefix ``[:, :step + 1]`` only, as
            in the tutorial; this needs eager or plain graph mode (no XLA).

    Returns:
        ``(B, max_length)`` int32 ids, as :func:`greedy_search`.
    """
    translator = as_translator(translator)
    max_length = check_max_length(translator, max_length)
    batch = ops.shape(source_ids)[0]

    def cond(index, target_in, ids, finished):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(finished)))

    def body(index, target_in, ids, finished):
        if static_shapes:
            logits = translator.full_logits(source_ids, target_in)  # (B, L, V)
            logits = ops.take(logits, index, axis=1)  # (B, V)
        else:
            logits = translator.full_logits(source_ids, target_in[:, : index + 1])[:, -1]
        next_token = ops.cast(ops.argmax(mask_padding_logits(logits), axis=-1), "int32")  # (B,)
        ids = write_column(ids, index, ops.where(finished, PAD_ID, next_token))
        finished = ops.logical_or(finished, ops.equal(next_token, eos_id))
        # The prefix grows by the new token (a no-op after the last position).
        target_in = write_column(target_in, index + 1, next_token)
        return index + 1, target_in, ids, finished

    # BOS, then the first L - 1 tokens: the model's L positions.
    target_in = write_column(ops.zeros((batch, max_length), "int32"), 0, bos_id)
    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        target_in,
        ops.zeros((batch, max_length), "int32"),
        ops.zeros((batch,), "bool"),
    )
    _, _, ids, _ = ops.while_loop(cond, body, loop_vars)
    return ids
