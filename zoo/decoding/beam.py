"""Batched beam search over a step function, the GNMT length penalty and exact early stopping."""

import numbers

import keras
from keras import ops

from zoo.decoding.search_helpers import (
    batch_size,
    check_max_length,
    mask_padding_logits,
    tile_for_beams,
    write_column,
)
from zoo.special_ids import BOS_ID, EOS_ID

__all__ = ["beam_search", "length_penalty"]

_NEG_INF = float("-inf")


def length_penalty(length, alpha):
    """The GNMT length penalty ``((5 + length) / 6) ** alpha`` (float32).

    A hypothesis of ``length`` tokens (its EOS included) and log-probability ``log_p`` scores
    ``log_p / length_penalty(length, alpha)``. ``alpha=0`` ranks by log-probability alone;
    larger ``alpha`` favours longer hypotheses.
    """
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _top_candidates(log_p, alive_log_p, count):
    """The ``count`` best continuations of each sentence's beams, best first: their scores,
    parent beams and tokens, each ``(B, count)``.

    The same as the top ``count`` of all ``K * V`` scores of a sentence (finite ties included,
    lower beam then lower token first; a dead beam's -inf candidates, never kept, may come in
    another order), in two steps: a beam's tokens below its own ``count`` best
    cannot be among its sentence's best, so the second top-k reads ``K * count`` scores, not
    ``K * V``. The shipped translator's beam 4 at batch 64 took 6% less time on CPU
    (``benchmarks/studies/beam_profile.py`` shows where the rest goes).

    Args:
        log_p: ``(B * K, V)`` log-probabilities of the next token, row ``b * K + k`` beam ``k``.
        alive_log_p: ``(B, K)`` the beams' scores so far.
        count: how many candidates (``2K``).
    """
    batch, k = ops.shape(alive_log_p)[0], ops.shape(alive_log_p)[1]
    vocab = log_p.shape[-1] or ops.shape(log_p)[-1]
    # A beam has at most V candidates (a tiny vocabulary, a wide beam).
    each = min(count, vocab) if isinstance(count, int) and isinstance(vocab, int) else (
        ops.minimum(count, vocab))  # fmt: skip
    per_beam, tokens = ops.top_k(log_p, each)  # (B*K, each)
    per_beam = ops.reshape(per_beam, (batch, k, each)) + ops.expand_dims(alive_log_p, 2)
    best, where = ops.top_k(ops.reshape(per_beam, (batch, k * each)), count)  # (B, count)
    where = ops.cast(where, "int32")
    tokens = ops.reshape(ops.cast(tokens, "int32"), (batch, k * each))
    return best, where // each, ops.take_along_axis(tokens, where, axis=1)


def beam_search(
    step,
    caches,
    max_length,
    beam_size=4,
    alpha=0.6,
    early_stopping=True,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
):
    """Decode with beam search: the best length-normalised hypothesis of each sentence.

    The caches are repeated per beam (:func:`~zoo.decoding.search_helpers.tile_for_beams`).
    Every step keeps the ``2K`` best of the ``K * V`` continuations; a candidate ending in EOS is
    finished when it ranks among the first ``K`` (as in fairseq, so ``beam_size=1`` is greedy),
    and the ``K`` best without EOS become the live beams, the caches the step changed reordered
    by parent (those it returns untouched, the encoder's, stay). Beams still live after
    ``max_length`` steps count as finished. ``early_stopping`` is exact, not a heuristic: it stops
    once no live beam can beat its sentence's best finished one (a log-probability only falls as
    a beam grows), so the result is the same as without it.

    Args:
        step: ``step(token_ids, caches, index) -> (logits, caches)``, as for
            :func:`~zoo.decoding.greedy_search`; it runs on ``B * K`` rows, row ``b * K + k``
            being beam ``k`` of sentence ``b``.
        caches: the initial caches of the ``B`` sentences, a nested structure of batch-major
            tensors ``(B, ...)``; they are repeated per beam here.
        max_length: Python int, the most tokens generated per sentence (EOS included); the
            caches must have room for that many steps.
        beam_size: K, the number of live beams per sentence. A Python int, or a scalar
            int tensor in plain graph mode (a SavedModel signature input); under XLA it must
            be a Python int.
        alpha: the exponent of the length penalty (:func:`length_penalty`), a Python float.
        early_stopping: stop when no live beam can beat the best finished hypothesis.
        bos_id: the id the decoder starts from.
        eos_id: the id that ends a sentence.

    Returns:
        ``(ids, scores)``: the best hypothesis of each sentence, ``(B, max_length)`` int32 ids
        after BOS (the EOS included when it has one, then 0-padded), and its float32 score
        ``(B,)``: the sum of its tokens' log-probabilities (EOS included) divided by
        ``length_penalty(length, alpha)``.

    Example:
        >>> from zoo.models import build_translator, translator_config
        >>> from zoo.models.translator import step_and_caches
        >>> model = build_translator(translator_config("tiny"))
        >>> source = ops.convert_to_tensor([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
        >>> step, caches = step_and_caches(model, source, max_length=6)
        >>> ids, scores = beam_search(step, caches, max_length=6, beam_size=3)
        >>> tuple(ids.shape), tuple(scores.shape)
        ((2, 6), (2,))

    References:
        Wu et al. 2016, "Google's Neural Machine Translation System: Bridging the Gap between
        Human and Machine Translation", section 7 (length penalty, beam search).
        Ott et al. 2019, "fairseq: A Fast, Extensible Toolkit for Sequence Modeling" (the
        ``2K`` candidates, finished only among the first ``K``).
        The step-function interface follows flax's ``examples/wmt/decode.py`` and keras-hub's
        ``BeamSampler``.
    """
    max_length = check_max_length(max_length)
    if isinstance(beam_size, numbers.Integral):
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {beam_size}.")
        k = int(beam_size)  # static shapes
    else:
        k = ops.cast(beam_size, "int32")  # a scalar tensor: dynamic shapes (graph mode)
    batch = batch_size(caches)
    caches = tile_for_beams(caches, k)  # (B*K, ...)
    # Row b*K + k of a cache is beam k of sentence b: the offset of each sentence's beams.
    beam_offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * k, 1)  # (B, 1)
    ranks = ops.arange(2 * k, dtype="int32")  # (2K,)
    penalty_at_max = length_penalty(max_length, alpha)

    def cond(index, tokens, alive_ids, alive_log_p, best_ids, best_score, caches):
        go_on = index < max_length
        if early_stopping:
            # The best score a live beam can still reach: log p only falls, so the most it
            # can get is log p over the largest length penalty (at L when alpha >= 0, at
            # the next length when alpha < 0).
            largest_penalty = ops.maximum(penalty_at_max, length_penalty(index + 1, alpha))
            bound = alive_log_p[:, 0] / largest_penalty  # (B,)
            done = ops.greater_equal(best_score, bound)
            go_on = ops.logical_and(go_on, ops.logical_not(ops.all(done)))
        return go_on

    def body(index, tokens, alive_ids, alive_log_p, best_ids, best_score, caches):
        logits, new_caches = step(tokens, caches, index)  # (B*K, V)
        log_p = ops.log_softmax(mask_padding_logits(logits), axis=-1)  # (B*K, V)
        top_log_p, parents, top_tokens = _top_candidates(log_p, alive_log_p, 2 * k)  # (B, 2K)
        # Each candidate's ids: its parent's ids with the new token at `index`.
        candidate_ids = ops.take_along_axis(alive_ids, ops.expand_dims(parents, 2), axis=1)
        candidate_ids = write_column(candidate_ids, index, top_tokens)  # (B, 2K, L)
        is_eos = ops.equal(top_tokens, eos_id)

        # Finished: EOS candidates among the first K; keep the best one of each sentence.
        finishing = ops.logical_and(is_eos, ops.expand_dims(ranks < k, 0))
        finished_score = ops.where(
            finishing, top_log_p / length_penalty(index + 1, alpha), _NEG_INF
        )  # (B, 2K)
        new_best = ops.cast(ops.argmax(finished_score, axis=1), "int32")  # (B,)
        new_best_score = ops.max(finished_score, axis=1)
        new_best_ids = ops.take_along_axis(
            candidate_ids, ops.reshape(new_best, (batch, 1, 1)), axis=1
        )[:, 0]  # (B, L)
        better = ops.greater(new_best_score, best_score)  # strictly: ties keep the earlier
        best_ids = ops.where(ops.expand_dims(better, 1), new_best_ids, best_ids)
        best_score = ops.where(better, new_best_score, best_score)

        # Live: the K best candidates without EOS (at most K of the 2K end in EOS).
        alive_log_p, chosen = ops.top_k(ops.where(is_eos, _NEG_INF, top_log_p), k)  # (B, K)
        chosen = ops.cast(chosen, "int32")
        alive_ids = ops.take_along_axis(candidate_ids, ops.expand_dims(chosen, 2), axis=1)
        alive_parents = ops.take_along_axis(parents, chosen, axis=1)  # (B, K)
        rows = ops.reshape(alive_parents + beam_offsets, (-1,))  # (B*K,)
        # The caches follow their parent beams. One that the step handed back untouched is
        # still the same for every beam of a sentence (they start tiled): it stays as it is.
        caches = keras.tree.map_structure(
            lambda new, old: new if new is old else ops.take(new, rows, axis=0),
            new_caches,
            caches,
        )
        tokens = ops.reshape(ops.take_along_axis(top_tokens, chosen, axis=1), (-1, 1))
        return index + 1, tokens, alive_ids, alive_log_p, best_ids, best_score, caches

    # Only beam 0 is live at the start, so the first step expands one hypothesis, not K.
    first = ops.expand_dims(ops.arange(k, dtype="int32") == 0, 0)  # (1, K)
    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        ops.full((batch * k, 1), bos_id, "int32"),
        ops.zeros((batch, k, max_length), "int32"),
        ops.where(first, 0.0, _NEG_INF) + ops.zeros((batch, k), "float32"),
        ops.zeros((batch, max_length), "int32"),
        ops.full((batch,), _NEG_INF, "float32"),
        caches,
    )
    index, _, alive_ids, alive_log_p, best_ids, best_score, _ = ops.while_loop(
        cond, body, loop_vars
    )
    # Live beams that reached max_length without EOS are hypotheses of that length too.
    alive_score = alive_log_p[:, 0] / length_penalty(max_length, alpha)
    take_alive = ops.logical_and(index >= max_length, ops.greater(alive_score, best_score))
    ids = ops.where(ops.expand_dims(take_alive, 1), alive_ids[:, 0], best_ids)
    scores = ops.where(take_alive, alive_score, best_score)
    return ids, scores
