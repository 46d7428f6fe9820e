"""The two layers around a CTC decoder (the source upsampled to the decoder's positions, the
blank forced at the positions past a sentence's end) and the CTC arithmetic that training
needs: how many positions labels need, their best alignment (Viterbi) and their likelihood
summed over alignments (the loss)."""

import keras
from keras import ops

from zoo.layers.loops import fold_over_time, scan_over_time

__all__ = [
    "CTCBlankPadding",
    "SourceUpsampling",
    "ctc_best_alignment",
    "ctc_log_likelihood",
    "ctc_positions_needed",
]

_IMPOSSIBLE = -1e30  # the log-score of a state no path reaches (finite: no inf - inf = nan)


def ctc_positions_needed(labels, pad_id=0):
    """The fewest positions a CTC alignment of each label sequence needs: a position per label
    and a blank between two equal neighbours.

    Example:
        >>> ops.convert_to_numpy(ctc_positions_needed([[5, 5, 6, 0], [7, 0, 0, 0]])).tolist()
        [4, 1]
    """
    labels = ops.cast(labels, "int32")
    real = ops.not_equal(labels, pad_id)
    repeats = real[:, 1:] & ops.equal(labels[:, 1:], labels[:, :-1])
    return ops.sum(ops.cast(real, "int32"), axis=1) + ops.sum(ops.cast(repeats, "int32"), axis=1)


def ctc_best_alignment(log_probs, labels, blank_id, pad_id=0):
    """The most probable CTC alignment of each label sequence: what each position emits on it.

    The Viterbi form of the CTC forward recursion (Graves et al. 2006) over the extended labels
    ``z = (blank, y_1, blank, y_2, ..., y_n, blank)``: ``delta_t(s) = log p_t(z_s) + max(
    delta_{t-1}(s), delta_{t-1}(s-1), delta_{t-1}(s-2))``, the last only onto a label that
    differs from ``z_{s-2}``; the best path ends in ``z_{2n}`` or ``z_{2n-1}``, and the
    backpointers, followed from there, give each position's state. All positions count: pad
    with a certain blank past a sentence's end (:class:`CTCBlankPadding`) and the path goes
    through it there. A sentence with no alignment (:func:`ctc_positions_needed` above the
    width) gets some path through impossible states: check it before using the result.

    Args:
        log_probs: ``(B, L, V)`` log-probabilities (or logits: the argmax path is the same only
            for log-probabilities).
        labels: ``(B, T)`` int ids, ``pad_id`` after each sentence's labels.
        blank_id: the blank's id.
        pad_id: the padding label.

    Returns:
        ``(B, L)`` int32: the label or the blank each position emits on the best path.

    Example:
        >>> import numpy as np
        >>> log_probs = np.log(np.full((1, 4, 3), 0.1) + 0.7 * np.eye(3)[[[2, 2, 0, 2]]])
        >>> ops.convert_to_numpy(ctc_best_alignment(log_probs, [[2, 2]], blank_id=0)).tolist()
        [[2, 2, 0, 2]]
    """
    log_probs = ops.stop_gradient(log_probs)
    extended, emissions, start, moves, count = _lattice(log_probs, labels, blank_id, pad_id)

    def forward(carry, emission):  # (B, S), (B, S)
        delta, _ = carry
        options = moves(delta)  # (B, S, 3)
        pointer = ops.cast(ops.argmax(options, axis=2), "int32")  # states moved back
        delta = ops.max(options, axis=2) + emission
        return (delta, pointer), (delta, pointer)

    # The outputs repeat the carry: Keras's TensorFlow scan wants them shaped as it.
    init = (start, ops.zeros_like(extended))
    (delta, _), (_, pointers) = scan_over_time(forward, init, emissions[:, 1:])  # (L-1, B, S)
    last = _final_states(delta, count)  # (B, 2)
    end = 2 * count - ops.cast(last[:, 1] > last[:, 0], "int32")  # (B,)

    def backward(state, pointer):  # (B,), (B, S)
        moved = ops.take_along_axis(pointer, state[:, None], axis=1)[:, 0]
        return state - moved, state

    first, later = ops.scan(backward, end, pointers, reverse=True)  # (B,), (L-1, B)
    path = ops.concatenate([first[:, None], ops.moveaxis(later, 0, 1)], axis=1)  # (B, L)
    return ops.take_along_axis(extended, path, axis=1)


def ctc_log_likelihood(log_probs, labels, blank_id, pad_id=0):
    """``log p(labels | x)``, summed over every CTC alignment: the forward recursion of
    :func:`ctc_best_alignment` with ``logsumexp`` in place of ``max`` (Graves et al. 2006).

    Differentiable, on TensorFlow under XLA too (:func:`~zoo.layers.loops.fold_over_time`). It
    replaces ``keras.ops.ctc_loss`` in training, whose dense CTC is slow under XLA
    (``benchmarks/ctc_loss.py``). Every position counts (pad with a certain blank, :class:`CTCBlankPadding`); a sentence with no
    alignment gets a log-likelihood near ``-1e30``: check :func:`ctc_positions_needed`.

    Args:
        log_probs: ``(B, L, V)`` log-probabilities.
        labels: ``(B, T)`` int ids, ``pad_id`` after each sentence's labels.
        blank_id: the blank's id.
        pad_id: the padding label.

    Returns:
        ``(B,)`` float32.

    Example:
        >>> import numpy as np
        >>> log_probs = np.log(np.full((1, 2, 3), 0.5) * [[[1, 1, 0]]] + 1e-30)  # blank 0, 1
        >>> # "1" in two positions: "1 1", "_ 1", "1 _", each 1/4.
        >>> round(float(np.exp(ctc_log_likelihood(log_probs, [[1]], blank_id=0)[0])), 4)
        0.75
    """
    _, emissions, start, moves, count = _lattice(log_probs, labels, blank_id, pad_id)
    alpha = fold_over_time(
        lambda alpha, emission: ops.logsumexp(moves(alpha), axis=2) + emission, start,
        emissions[:, 1:],
    )  # fmt: skip
    return ops.logsumexp(_final_states(alpha, count), axis=1)


def _lattice(log_probs, labels, blank_id, pad_id):
    """The CTC lattice over the extended labels ``z = (blank, y_1, blank, ..., y_n, blank)``.

    Returns ``z`` ``(B, S)``; the emissions ``log p_t(z_s)`` ``(B, L, S)``; the scores at the
    first position (only ``z_1``, ``z_2`` reachable) ``(B, S)``; ``moves(scores)``, the
    ``(B, S, 3)`` scores of staying, advancing one state and skipping a blank (only onto a
    label that differs from ``z_{s-2}``); and the label counts ``(B,)``.
    """
    log_probs = ops.cast(log_probs, "float32")  # (B, L, V)
    labels = ops.cast(labels, "int32")  # (B, T)
    batch, width = ops.shape(labels)[0], ops.shape(labels)[1]
    count = ops.sum(ops.cast(ops.not_equal(labels, pad_id), "int32"), axis=1)  # (B,)
    blanks = ops.full((batch, width), blank_id, "int32")
    extended = ops.reshape(ops.stack([blanks, labels], axis=2), (batch, 2 * width))
    extended = ops.concatenate([extended, ops.full((batch, 1), blank_id, "int32")], axis=1)
    states = ops.arange(2 * width + 1, dtype="int32")[None, :]  # (1, S)
    skip = (extended != blank_id) & (states >= 2)
    skip = skip & (extended != ops.pad(extended[:, :-2], [[0, 0], [2, 0]], constant_values=-1))
    positions = ops.shape(log_probs)[1]
    emissions = ops.take_along_axis(  # (B, L, S): log p_t(z_s)
        log_probs, ops.broadcast_to(extended[:, None, :], (batch, positions, 2 * width + 1)),
        axis=2,
    )  # fmt: skip
    start = ops.where(states < 2, emissions[:, 0], _IMPOSSIBLE)  # (B, S)

    def moves(scores):  # (B, S) -> (B, S, 3)
        advance = ops.pad(scores[:, :-1], [[0, 0], [1, 0]], constant_values=_IMPOSSIBLE)
        jump = ops.pad(scores[:, :-2], [[0, 0], [2, 0]], constant_values=_IMPOSSIBLE)
        return ops.stack([scores, advance, ops.where(skip, jump, _IMPOSSIBLE)], axis=2)

    return extended, emissions, start, moves, count


def _final_states(scores, count):
    """The ``(B, 2)`` scores of the states a path may end in: the last label and the blank
    after it (the blank alone, twice over, for an empty sequence: ``-1e30`` the second time)."""
    ends = ops.stack([2 * count, ops.maximum(2 * count - 1, 0)], axis=1)
    last = ops.take_along_axis(scores, ends, axis=1)
    return ops.where(ops.stack([count >= 0, count > 0], axis=1), last, _IMPOSSIBLE)


@keras.saving.register_keras_serializable(package="zoo")
class SourceUpsampling(keras.layers.Layer):
    """Each source id repeated ``factor`` times: the input of a CTC decoder, ``factor * S``
    positions for a target of up to that many tokens and blanks.

    Position ``p`` reads source token ``p // factor``, so the decoder's input moves through the
    source left to right, as a CTC alignment does; a source of ``n`` real tokens (padding at
    the end) gives ``factor * n`` real positions.

    Args:
        factor: the upsampling ratio (2 or 3 in the CTC NATs of Gu & Kong 2021).
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        source_ids: ``(B, S)`` int ids, 0-padded at the end.

    Returns:
        ``(B, factor * S)`` int32 ids.

    Example:
        >>> ops.convert_to_numpy(SourceUpsampling(2)(ops.convert_to_tensor([[5, 6, 0]]))).tolist()
        [[5, 5, 6, 6, 0, 0]]

    References:
        Libovický & Helcl 2018, "End-to-End Non-Autoregressive Neural Machine Translation with
        Connectionist Temporal Classification"; Gu & Kong 2021, "Fully Non-autoregressive
        Neural Machine Translation: Tricks of the Trade".
    """

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise ValueError(f"factor must be a positive int, got {factor!r}.")
        self.factor = factor

    def call(self, source_ids):
        return ops.repeat(ops.cast(source_ids, "int32"), self.factor, axis=1)  # (B, kS)

    def compute_output_shape(self, input_shape):
        width = input_shape[1]
        return (input_shape[0], None if width is None else self.factor * width)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="zoo")
class CTCBlankPadding(keras.layers.Layer):
    """Logits whose padded positions emit the blank with probability 1.

    A CTC path must then pass through the blank there, at no cost: the CTC loss over the
    whole padded width equals the loss over each sentence's real positions, and greedy decoding
    drops those positions. The output carries no Keras mask (a CTC loss is one per sentence).

    Args:
        blank_id: the id of the blank.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        logits: ``(B, L, V)``.
        ids: ``(B, L)`` the decoder's input ids, 0 at padding.

    Returns:
        ``(B, L, V)`` logits, float32 at padding as elsewhere.
    """

    def __init__(self, blank_id, **kwargs):
        super().__init__(**kwargs)
        self.blank_id = blank_id
        self.supports_masking = True

    def call(self, logits, ids):
        blank = ops.one_hot(self.blank_id, ops.shape(logits)[-1], dtype=logits.dtype)  # (V,)
        # 0 for the blank, far below for the rest: log-softmax gives the blank log 1 = 0.
        blank_logits = (blank - 1.0) * 1e4
        real = ops.not_equal(ops.cast(ids, "int32"), 0)[..., None]  # (B, L, 1)
        return ops.where(real, logits, ops.cast(blank_logits, logits.dtype))

    def compute_mask(self, logits, ids=None, mask=None):
        return None

    def compute_output_shape(self, logits_shape, ids_shape=None):
        return logits_shape

    def get_config(self):
        return {**super().get_config(), "blank_id": self.blank_id}
