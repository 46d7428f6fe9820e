"""What the searches share: the batch size of the caches, their repetition per beam, the
masking of the padding id, the writing of one column of a ``(B, L)`` buffer, the check of
``max_length``, and the token-by-token loop of greedy search and sampling. Everything is
``keras.ops``, safe under XLA and in plain graph mode.
"""

import numbers

import keras
from keras import ops

from zoo.special_ids import PAD_ID

__all__ = [
    "batch_size",
    "check_count",
    "check_max_length",
    "mask_padding_logits",
    "tile_for_beams",
    "token_by_token",
    "write_column",
]


def batch_size(caches):
    """B, the batch size of a nested structure of batch-major tensors (int or scalar tensor)."""
    return ops.shape(keras.tree.flatten(caches)[0])[0]


def tile_for_beams(x, beam_size):
    """Repeat each batch row ``beam_size`` times: ``(B, ...)`` -> ``(B * K, ...)``.

    Row ``b * K + k`` of the result is beam ``k`` of example ``b``. ``x`` may be a tensor or
    any nested structure of batch-major tensors (the caches); ``beam_size`` an int or a scalar
    int tensor.
    """
    return keras.tree.map_structure(lambda item: ops.repeat(item, beam_size, axis=0), x)


def mask_padding_logits(logits, pad_id=PAD_ID):
    """Forbid the padding id: its logit becomes -inf, so no search ever emits it."""
    vocab = ops.arange(ops.shape(logits)[-1], dtype="int32")
    return ops.where(ops.equal(vocab, pad_id), float("-inf"), logits)


def write_column(buffer, index, values):
    """``buffer`` ``(..., L)`` with column ``index`` set to ``values`` ``(...)``."""
    columns = ops.arange(ops.shape(buffer)[-1], dtype="int32")
    at_index = ops.equal(columns, ops.cast(index, "int32"))
    return ops.where(at_index, ops.expand_dims(ops.cast(values, buffer.dtype), -1), buffer)


def token_by_token(step, caches, max_length, choose, bos_id, eos_id):
    """The loop of greedy search and sampling: one token per sequence and step, from ``bos_id``.

    ``step(token_ids, caches, index) -> (logits, caches)`` runs the model;
    ``choose(logits, index) -> (B,)`` int32 ids picks the next tokens from the ``(B, V)``
    logits, the padding id forbidden. A sequence is finished at its first ``eos_id``; the loop
    stops when all are, or after ``max_length`` (checked by the caller) steps. Returns the
    ``(B, max_length)`` int32 ids, ``PAD_ID`` after each EOS.
    """
    batch = batch_size(caches)

    def cond(index, token, ids, finished, caches):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(finished)))

    def body(index, token, ids, finished, caches):
        logits, caches = step(token, caches, index)
        next_token = choose(mask_padding_logits(logits), index)  # (B,)
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


def check_max_length(max_length):
    """``max_length`` as an int, or as a scalar int32 tensor: it sizes the buffers.

    A tensor is what a search sized from its source gets (:func:`~zoo.decoding.output_length`
    of a source whose width is known only when the graph runs); it is trusted to be positive.
    Whether it fits the model's positions is the model's check, made when its caches are made.
    """
    if ops.is_tensor(max_length) and len(max_length.shape) == 0:
        return ops.cast(max_length, "int32")
    if not isinstance(max_length, numbers.Integral) or isinstance(max_length, bool):
        raise ValueError(f"max_length must be a Python int, got {max_length!r}.")
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}.")
    return int(max_length)


def check_count(value, name, maximum):
    """A count of a search (iterations, candidates) as a Python int or a scalar int32 tensor.

    A Python int must be at least 1 and is returned as it is (static shapes; ``maximum`` does
    not apply). A scalar integer tensor, as a SavedModel's request brings it in graph mode, is
    clamped in the graph to ``[1, maximum]``: a request never fails, and never costs more.

    Args:
        value: a Python int >= 1, or a scalar integer tensor.
        name: the argument's name, for the error.
        maximum: Python int, the largest count a tensor is clamped to.

    Returns:
        ``int``, or a scalar int32 tensor in ``[1, maximum]``.

    Example:
        >>> check_count(3, "iterations", 16)
        3
        >>> int(check_count(ops.convert_to_tensor(100, "int32"), "iterations", 16))
        16
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
        return int(value)
    if not ops.is_tensor(value):
        raise ValueError(
            f"{name} must be a positive Python int or a scalar int tensor, got {value!r}."
        )
    dtype = keras.backend.standardize_dtype(value.dtype)
    if "int" not in dtype or len(value.shape) != 0:
        raise ValueError(
            f"{name} must be a positive Python int or a scalar int tensor, got a {dtype} tensor "
            f"of shape {tuple(value.shape)}."
        )
    return ops.clip(ops.cast(value, "int32"), 1, maximum)
