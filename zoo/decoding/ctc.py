"""The one-pass decoding of a CTC decoder: the best token at each position, repeats merged,
blanks dropped (keras.ops only, XLA-safe)."""

from keras import ops

from zoo.special_ids import PAD_ID

__all__ = ["ctc_collapse", "ctc_greedy"]


def ctc_collapse(tokens, blank_id):
    """Merge each run of a repeated token into one, then drop blanks and padding.

    Args:
        tokens: ``(B, L)`` int ids of one alignment per sentence (0 is padding).
        blank_id: the blank's id.

    Returns:
        ``(B, L)`` int32 ids: each sentence's tokens first, in order, then 0.

    Example:
        >>> ops.convert_to_numpy(ctc_collapse([[5, 5, 1, 5, 6, 6, 1, 0]], blank_id=1)).tolist()
        [[5, 5, 6, 0, 0, 0, 0, 0]]
    """
    tokens = ops.cast(tokens, "int32")
    width = ops.shape(tokens)[1]
    previous = ops.pad(tokens[:, :-1], [[0, 0], [1, 0]], constant_values=-1)  # (B, L)
    keep = (tokens != previous) & (tokens != blank_id) & (tokens != PAD_ID)
    positions = ops.arange(width, dtype="int32")[None, :]  # (1, L)
    # The kept positions in order, then the others: a stable compaction by one sort.
    order = ops.argsort(ops.where(keep, positions, width + positions), axis=1)
    kept = ops.take_along_axis(tokens, order, axis=1)
    count = ops.sum(ops.cast(keep, "int32"), axis=1, keepdims=True)  # (B, 1)
    return ops.where(positions < count, kept, PAD_ID)


def ctc_greedy(logits, blank_id):
    """The best alignment (the argmax at each position), collapsed: ``(B, L, V)`` logits ->
    ``(B, L)`` int32 ids, 0 after each sentence's tokens (Graves et al. 2006's best path)."""
    return ctc_collapse(ops.argmax(logits, axis=-1), blank_id)
