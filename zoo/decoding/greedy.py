"""Greedy search over a step function, and the slow reference that re-runs the whole model.

Both loops are ``keras.ops.while_loop`` over fixed-size buffers, so they trace in plain
TensorFlow graph mode and compile with XLA (``tf.function(jit_compile=True)``).
"""

from keras import ops

from zoo.decoding.search_helpers import (
    check_max_length,
    mask_padding_logits,
    token_by_token,
    write_column,
)
from zoo.special_ids import BOS_ID, EOS_ID, PAD_ID

__all__ = ["greedy_search", "uncached_greedy_search"]


def greedy_search(step, caches, max_length, bos_id=BOS_ID, eos_id=EOS_ID):
    """Decode by taking the most likely next token at every step.

    Each step runs the model on one token per sequence through ``step``, which carries its
    state (the KV caches, what it keeps of the encoder output) in ``caches``. A sequence is
    finished at its first EOS; the loop stops as soon as every sequence of the batch is
    finished, or after ``max_length`` steps. The padding id is never emitted.

    Args:
        step: ``step(token_ids, caches, index) -> (logits, caches)``: the ``(B, 1)`` int32
            tokens at position ``index`` (a scalar int tensor) in, the float ``(B, V)`` logits
            of the next token and the updated caches out (the same structure).
        caches: the initial caches, a nested structure of batch-major tensors ``(B, ...)``.
        max_length: Python int, the most tokens generated per sequence (EOS included); the
            caches must have room for that many steps.
        bos_id: the id the decoder starts from.
        eos_id: the id that ends a sentence.

    Returns:
        ``(B, max_length)`` int32 ids: the generated tokens after BOS, the EOS included when
        one was produced, then :data:`~zoo.data.PAD_ID` (0) up to ``max_length``.

    Example:
        >>> from zoo.models import build_translator, translator_config
        >>> from zoo.models.translator import step_and_caches
        >>> model = build_translator(translator_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
        >>> step, caches = step_and_caches(model, source, max_length=6)
        >>> tuple(greedy_search(step, caches, max_length=6).shape)
        (2, 6)

    References:
        Vaswani et al. 2017, "Attention Is All You Need" (autoregressive decoding).
    """

    def choose(logits, index):
        return ops.cast(ops.argmax(logits, axis=-1), "int32")

    return token_by_token(step, caches, check_max_length(max_length), choose, bos_id, eos_id)


def uncached_greedy_search(
    model, source_ids, max_length, bos_id=BOS_ID, eos_id=EOS_ID, static_shapes=True
):
    """Greedy search the slow way: the full model on the whole prefix at every step.

    This is the loop of the TensorFlow tutorial ("Neural machine translation with a
    Transformer and Keras"): no cache, the encoder and the decoder re-run on everything at
    every step. It is the reference that :func:`greedy_search` must equal token for token,
    and the baseline of the decoding benchmark. It returns what :func:`greedy_search` does.

    Args:
        model: the Keras translator itself, ``{"source": (B, S), "target_in": (B, T)}`` ids
            -> logits ``(B, T, V)`` (a model of :func:`zoo.models.build_translator`).
        source_ids: ``(B, S)`` int source ids, 0-padded.
        max_length: Python int, the most tokens generated per sentence (EOS included).
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
    max_length = check_max_length(max_length)
    source_ids = ops.cast(source_ids, "int32")
    batch = ops.shape(source_ids)[0]

    def full_logits(target_in):
        inputs = {"source": source_ids, "target_in": target_in}
        return ops.cast(model(inputs, training=False), "float32")  # (B, T, V)

    def cond(index, target_in, ids, finished):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(finished)))

    def body(index, target_in, ids, finished):
        if static_shapes:
            logits = ops.take(full_logits(target_in), index, axis=1)  # (B, V)
        else:
            logits = full_logits(target_in[:, : index + 1])[:, -1]  # (B, V)
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
