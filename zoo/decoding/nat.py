"""Decoding for a non-autoregressive (CMLM) translator: length candidates, Mask-Predict
refinement and the choice among the candidates, over a plain ``decode(target_in)`` function.

Everything is ``keras.ops`` with fixed shapes (the refinement is one ``while_loop``), so it
compiles under XLA. In plain graph mode (a SavedModel's request) ``iterations`` and
``length_beam`` may be scalar tensors, clamped to ``[1, MAX_ITERATIONS]`` and
``[1, MAX_LENGTH_BEAM]``.
"""

import numbers

from keras import ops

from zoo.decoding.search_helpers import check_count, check_max_length, mask_padding_logits
from zoo.special_ids import EOS_ID, PAD_ID, UNK_ID

__all__ = [
    "MAX_ITERATIONS",
    "MAX_LENGTH_BEAM",
    "check_length_beam",
    "cut_at_first_eos",
    "length_candidates",
    "mask_predict",
    "nat_search",
]


MAX_ITERATIONS = 16  # the most iterations a tensor ``iterations`` is clamped to
MAX_LENGTH_BEAM = 8  # the most candidates a tensor ``length_beam`` is clamped to


def check_width(max_length, minimum=2):
    """The width of the NAT's buffers: a Python int of at least ``minimum`` (2: a token and
    the EOS), or a scalar int tensor, raised to ``minimum``, as a graph reads it from a shape
    (the source's width plus the largest offset, which XLA folds to a constant per compiled
    shape)."""
    if ops.is_tensor(max_length):
        if len(max_length.shape) != 0 or "int" not in str(max_length.dtype):
            raise ValueError(f"max_length must be a Python int or a scalar int tensor, got "
                             f"{max_length!r}.")
        return ops.maximum(ops.cast(max_length, "int32"), minimum)
    max_length = check_max_length(max_length)
    if max_length < minimum:
        raise ValueError(
            f"max_length must be at least {minimum} (a token and EOS), got {max_length}."
        )
    return max_length


def check_length_beam(length_beam, max_offset):
    """``length_beam`` checked (a Python int, at most ``2 * max_offset + 1``) or clamped (a
    scalar int tensor, to ``[1, min(MAX_LENGTH_BEAM, 2 * max_offset + 1)]``).

    The search and whatever repeats the memory per candidate must agree on the count: both
    take it from here.
    """
    offsets = 2 * max_offset + 1
    length_beam = check_count(length_beam, "length_beam", min(MAX_LENGTH_BEAM, offsets))
    if isinstance(length_beam, int) and length_beam > offsets:
        raise ValueError(f"length_beam={length_beam} exceeds the {offsets} offsets.")
    return length_beam


def cut_at_first_eos(tokens, eos_id=EOS_ID):
    """``tokens`` with every position after the first EOS of each row set to 0 (padding).

    The EOS itself is kept; a row without EOS is unchanged.

    Args:
        tokens: ``(..., L)`` int token ids.
        eos_id: the id that ends a sentence.

    Returns:
        ``(..., L)`` ids of the same dtype.

    Example:
        >>> ids = ops.convert_to_tensor([[5, 3, 6, 3], [5, 6, 7, 8]], "int32")
        >>> ops.convert_to_numpy(cut_at_first_eos(ids, eos_id=3)).tolist()
        [[5, 3, 0, 0], [5, 6, 7, 8]]
    """
    is_eos = ops.cast(ops.equal(tokens, eos_id), "int32")  # (..., L)
    # EOS tokens strictly before each position: > 0 means after the first EOS.
    eos_before = ops.cumsum(is_eos, axis=-1) - is_eos
    return ops.where(eos_before > 0, ops.zeros_like(tokens), tokens)


def length_candidates(length_logits, source_lengths, length_beam, max_offset, max_length):
    """The ``length_beam`` most likely target lengths of each sentence, best first.

    Class ``k`` of ``length_logits`` is the offset ``k - max_offset`` of the target length
    from the source length. The candidates are the top ``length_beam`` offsets plus the
    source length, clipped to ``[2, max_length]`` (at least one token and the EOS); clipping
    may make two candidates equal. Equal scores rank the smaller offset first (the lower
    index first, as ``ops.top_k`` does on the TensorFlow and JAX backends).

    Args:
        length_logits: ``(B, 2 * max_offset + 1)`` float scores over the offsets.
        source_lengths: ``(B,)`` int source lengths.
        length_beam: the number of candidates per sentence: a Python int (at most the
            ``2 * max_offset + 1`` offsets), or a scalar int tensor in graph mode, clamped to
            ``[1, min(MAX_LENGTH_BEAM, 2 * max_offset + 1)]``.
        max_offset: Python int, the largest offset the model predicts, either way.
        max_length: the longest target (EOS included): a Python int, at least 2, or a
            scalar int tensor (:func:`check_width`).

    Returns:
        ``(B, length_beam)`` int32 target lengths (EOS included), in descending score order.

    Example:
        >>> logits = ops.convert_to_tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
        >>> lengths = length_candidates(logits, [4, 1], length_beam=2, max_offset=1, max_length=5)
        >>> ops.convert_to_numpy(lengths).tolist()
        [[4, 5], [2, 2]]

    References:
        Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models", section 3.2 (length candidates).
    """
    max_length = check_width(max_length)
    if not isinstance(max_offset, numbers.Integral) or max_offset < 0:
        raise ValueError(f"max_offset must be a Python int >= 0, got {max_offset!r}.")
    length_logits = ops.convert_to_tensor(length_logits)
    classes = length_logits.shape[-1]
    if classes is not None and classes != 2 * max_offset + 1:
        raise ValueError(
            f"length_logits has {classes} classes; max_offset={max_offset} needs "
            f"{2 * max_offset + 1}."
        )
    length_beam = check_length_beam(length_beam, max_offset)
    _, top = ops.top_k(ops.cast(length_logits, "float32"), length_beam)  # (B, l)
    offsets = ops.cast(top, "int32") - max_offset
    lengths = offsets + ops.expand_dims(ops.cast(source_lengths, "int32"), 1)
    return ops.clip(lengths, 2, max_length)


def mask_predict(decode, lengths, iterations, max_length, mask_id=UNK_ID, early_stopping=False):
    """Mask-Predict: predict every position at once, then re-mask and re-predict the least
    confident ones, fewer at every iteration.

    Iteration ``t`` of ``T`` re-masks the ``floor(length * (T - t) / T)`` real positions of
    lowest probability (all of them at ``t = 0``; the lower position first of equals), and only
    those take the decoder's new tokens and probabilities. Padding and ``mask_id`` are never
    predicted. With ``early_stopping`` a sentence freezes after an iteration ``t >= 1`` that
    changed none of its tokens, and the loop ends when all have (fairseq's adaptive
    refinement); a sentence's result never depends on the others. It is off by default: later
    iterations, with more context, change what earlier ones left alone, and quality drops.

    Args:
        decode: ``decode(target_in) -> logits``: ``(N, L)`` int32 decoder inputs (tokens or
            ``mask_id`` below each length, 0 from it on) to float logits ``(N, L, V)``. It
            closes over whatever it needs of the source (the encoder output, ``N`` rows).
        lengths: ``(N,)`` int target lengths, EOS included, in ``[1, max_length]``.
        iterations: T, the most decoder runs: a Python int >= 1, or a scalar int tensor in
            graph mode, clamped to ``[1, MAX_ITERATIONS]``.
        max_length: L, the width of the buffers: a Python int, or a scalar int tensor
            (:func:`check_width`; a tensor below 2 counts as 2).
        mask_id: the id that marks a position to predict (the model's UNK id).
        early_stopping: stop a sentence once an iteration changes none of its tokens.

    Returns:
        ``(tokens, log_probs, iterations_run)``: ``(N, L)`` int32 ids, 0 from each length on;
        ``(N, L)`` float32 log-probabilities of the kept tokens (when each was last
        predicted), 0 at padding; and the scalar int32 number of decoder runs.

    Example:
        >>> def decode(target_in):  # token 4 everywhere, whatever the input
        ...     return ops.one_hot(ops.full_like(target_in, 4), 6) * 5.0
        >>> tokens, log_probs, runs = mask_predict(decode, [3, 1], iterations=4, max_length=4)
        >>> ops.convert_to_numpy(tokens).tolist(), int(runs)
        ([[4, 4, 4, 0], [4, 0, 0, 0]], 4)
        >>> _, _, runs = mask_predict(decode, [3, 1], 4, 4, early_stopping=True)  # nothing changed
        >>> int(runs)
        2

    References:
        Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models", section 3 (the decoding loop). fairseq's ``cmlm_transformer.py``
        and ``iterative_refinement_generator.py`` (the adaptive stopping).
    """
    iterations = check_count(iterations, "iterations", MAX_ITERATIONS)
    max_length = check_width(max_length, minimum=1)
    lengths = ops.cast(ops.convert_to_tensor(lengths), "int32")  # (N,)
    positions = ops.arange(max_length, dtype="int32")  # (L,)
    real = ops.expand_dims(positions, 0) < ops.expand_dims(lengths, 1)  # (N, L)
    # Ranks by counting, over all pairs of positions, which come first in the order (log p,
    # position): deterministic ties on every backend, with no stable sort needed.
    lower_position = ops.expand_dims(positions, 1) > ops.expand_dims(positions, 0)  # (L, L)

    def remask(t, log_p):
        """The ``n`` real positions of lowest log p (the lower position first of equals)."""
        n = (lengths * (iterations - t)) // iterations  # (N,); at t = 0, every real position
        key = ops.where(real, log_p, float("inf"))  # padding ranks last, never re-masked
        key_i = ops.expand_dims(key, 2)  # (N, L, 1)
        key_j = ops.expand_dims(key, 1)  # (N, 1, L)
        # before[n, i, j]: position j comes before position i.
        before = ops.logical_or(
            key_j < key_i, ops.logical_and(ops.equal(key_j, key_i), lower_position)
        )  # (N, L, L)
        rank = ops.sum(ops.cast(before, "int32"), axis=2)  # (N, L)
        return rank < ops.expand_dims(n, 1)

    def cond(t, tokens, log_p, finished):
        go_on = t < iterations
        if early_stopping:
            go_on = ops.logical_and(go_on, ops.logical_not(ops.all(finished)))
        return go_on

    def body(t, tokens, log_p, finished):
        masked = remask(t, log_p)  # (N, L)
        target_in = ops.where(masked, ops.cast(mask_id, "int32"), tokens)
        logits = ops.cast(decode(target_in), "float32")  # (N, L, V)
        # Neither padding nor the mask is ever an output: a kept mask token would print as
        # UNK, and it could only be masked again.
        allowed = mask_padding_logits(mask_padding_logits(logits, PAD_ID), mask_id)
        all_log_p = ops.log_softmax(allowed, axis=-1)
        new_tokens = ops.cast(ops.argmax(all_log_p, axis=-1), "int32")  # (N, L)
        new_log_p = ops.max(all_log_p, axis=-1)
        update = ops.logical_and(masked, ops.expand_dims(ops.logical_not(finished), 1))
        next_tokens = ops.where(update, new_tokens, tokens)
        log_p = ops.where(update, new_log_p, log_p)
        if early_stopping:
            unchanged = ops.all(ops.equal(next_tokens, tokens), axis=1)  # (N,)
            finished = ops.logical_or(finished, ops.logical_and(unchanged, t > 0))
        return t + 1, next_tokens, log_p, finished

    # Iteration 0 is the loop's first: at t = 0 every real position is masked.
    batch = ops.shape(lengths)[0]
    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        ops.zeros((batch, max_length), "int32"),
        ops.zeros((batch, max_length), "float32"),
        ops.zeros((batch,), "bool"),
    )
    runs, tokens, log_p, _ = ops.while_loop(cond, body, loop_vars)
    return tokens, log_p, runs


def nat_search(
    decode,
    length_logits=None,
    source_lengths=None,
    *,
    max_length,
    iterations=1,
    length_beam=1,
    max_offset=None,
    lengths=None,
    mask_id=UNK_ID,
    eos_id=EOS_ID,
    rescore=None,
    early_stopping=False,
):
    """Decode a non-autoregressive translator: Mask-Predict on a few candidate lengths per
    sentence, and the best candidate of each.

    The ``B * l`` candidates (:func:`length_candidates` of ``length_logits``, or ``lengths``)
    are refined together by :func:`mask_predict`; row ``b * l + k`` is candidate ``k`` of
    sentence ``b``, so ``decode`` must close over ``tile_for_beams(memory, length_beam)``.
    Each sentence keeps the candidate of highest mean log-probability over its length (or of
    highest ``rescore``; the earlier of equals), cut after its first EOS. With
    ``iterations=1`` and ``length_beam=1`` this is the one-pass decoder. A model trained to
    fill a fixed width passes each sentence's width as ``lengths`` and no ``length_logits``.

    Args:
        decode: ``decode(target_in) -> logits`` on ``(B * l, L)`` inputs, as for
            :func:`mask_predict`.
        length_logits: ``(B, 2 * max_offset + 1)`` float scores over the offsets of the
            target length from the source length, or None with ``lengths``.
        source_lengths: ``(B,)`` int source lengths, with ``length_logits``.
        max_length: L, the longest target (EOS included): a Python int, or a scalar int
            tensor (:func:`check_width`).
        iterations: T, the most Mask-Predict iterations: a Python int, or a scalar int tensor
            (graph mode) clamped to ``[1, MAX_ITERATIONS]``.
        length_beam: l, the number of length candidates per sentence (with
            ``length_logits``; ``lengths`` sets its own): a Python int, or a scalar int tensor
            (graph mode) clamped as by :func:`length_candidates`. ``decode`` must have the
            memory repeated by the same, clamped, count.
        max_offset: Python int, the largest offset the length classes cover; by default
            read from the static width of ``length_logits``.
        lengths: ``(B,)`` or ``(B, l)`` int target lengths given directly (EOS included,
            in ``[1, max_length]``), instead of ``length_logits`` and ``source_lengths``.
        mask_id: the id that marks a position to predict (the model's UNK id).
        eos_id: the id that ends a sentence.
        rescore: None, or ``rescore(tokens) -> scores``: ``(B, l, L)`` int32 candidates
            (already cut at their first EOS) to float ``(B, l)`` scores, higher better
            (e.g. an autoregressive model's log-probability).
        early_stopping: as for :func:`mask_predict`.

    Returns:
        ``(tokens, scores)``: ``(B, L)`` int32 ids of the chosen candidate, 0 after its first
        EOS and from its length on; ``(B,)`` float32 its mean log-probability (or its
        rescore).

    Example:
        >>> def decode(target_in):  # token 5 everywhere, EOS at the third position
        ...     ids = ops.where(ops.arange(6) == 2, 3, 5) + ops.zeros_like(target_in)
        ...     return ops.one_hot(ids, 8) * 4.0
        >>> length_logits = ops.convert_to_tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
        >>> tokens, scores = nat_search(
        ...     decode, length_logits, [1, 4], max_length=6, iterations=2, length_beam=2)
        >>> ops.convert_to_numpy(tokens).tolist()
        [[5, 5, 0, 0, 0, 0], [5, 5, 3, 0, 0, 0]]

    References:
        Ghazvininejad et al. 2019, "Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models", section 3.2 (length beam, the mean log-probability).
        Gu et al. 2018, "Non-Autoregressive Neural Machine Translation" (rescoring the
        candidates with an autoregressive teacher).
    """
    max_length = check_width(max_length, minimum=1)
    if lengths is None:
        if length_logits is None or source_lengths is None:
            raise ValueError("Give length_logits and source_lengths, or lengths.")
        length_logits = ops.convert_to_tensor(length_logits)
        if max_offset is None:
            classes = length_logits.shape[-1]
            if classes is None or classes % 2 == 0:
                raise ValueError(f"Cannot read max_offset from {classes} length classes.")
            max_offset = (classes - 1) // 2
        lengths = length_candidates(
            length_logits, source_lengths, length_beam, max_offset, max_length
        )
    else:
        if length_logits is not None or source_lengths is not None:
            raise ValueError("Give lengths, or length_logits and source_lengths, not both.")
        lengths = ops.cast(ops.convert_to_tensor(lengths), "int32")
        if len(lengths.shape) == 1:
            lengths = ops.expand_dims(lengths, 1)  # (B, 1)
    batch = ops.shape(lengths)[0]
    beam = lengths.shape[1]  # l: static, or a tensor when length_beam is one
    if beam is None:
        beam = ops.shape(lengths)[1]

    flat_tokens, flat_log_p, _ = mask_predict(
        decode,
        ops.reshape(lengths, (-1,)),  # (B*l,), row b*l + k
        iterations,
        max_length,
        mask_id=mask_id,
        early_stopping=early_stopping,
    )
    tokens = ops.reshape(flat_tokens, (batch, beam, max_length))
    log_p = ops.reshape(flat_log_p, (batch, beam, max_length))
    tokens = cut_at_first_eos(tokens, eos_id)
    if rescore is None:
        scores = ops.sum(log_p, axis=-1) / ops.cast(lengths, "float32")  # (B, l)
    else:
        scores = ops.cast(rescore(tokens), "float32")  # (B, l)
    best = ops.cast(ops.argmax(scores, axis=1), "int32")  # (B,), the first of equals
    tokens = ops.take_along_axis(tokens, ops.reshape(best, (-1, 1, 1)), axis=1)[:, 0]
    scores = ops.take_along_axis(scores, ops.reshape(best, (-1, 1)), axis=1)[:, 0]
    return tokens, scores
