"""NAT decoding against slow NumPy references written from the Mask-Predict paper, on fake
decoders whose every output position depends on every input position."""

import functools

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tests.decoding.common import counting, numpy
from zoo.data import EOS_ID, PAD_ID, UNK_ID
from zoo.decoding import (
    cut_at_first_eos,
    length_candidates,
    mask_predict,
    nat_search,
    tile_for_beams,
)
from zoo.decoding.nat import MAX_ITERATIONS, check_length_beam
from zoo.models.nat import nat_counts
from zoo.models.nat import build_nat_translator, get_config

VOCAB = 11
L = 8  # max_length
LENGTHS = np.array([2, 8, 5, 3], "int32")  # one of each kind: shortest, full, in between


class FakeDecoder:
    """``decode(target_in)``: a random embedding of the ids plus their position, mixed across
    all positions by a random matrix, through tanh, times a random output matrix; plus a
    per-row bias (the "memory", one row per decoded sentence) when given.

    Calling it runs ``keras.ops`` (float32); :meth:`reference` is the same in float64 NumPy.
    """

    def __init__(self, seed, memory=None, scale=3.0):
        rng = np.random.default_rng(seed)
        dim = 6
        self.embed = rng.normal(size=(VOCAB, dim)).astype("float32")
        self.position = rng.normal(size=(L, dim)).astype("float32")
        self.mix = (rng.normal(size=(L, L)) / np.sqrt(L)).astype("float32")
        self.out = (scale * rng.normal(size=(dim, VOCAB))).astype("float32")
        self.memory = memory  # (N, V) float32, or None

    def __call__(self, target_in):
        h = ops.take(self.embed, target_in, axis=0) + self.position  # (N, L, D)
        h = h + ops.einsum("ij,njd->nid", self.mix, h)
        logits = ops.matmul(ops.tanh(h), self.out)  # (N, L, V)
        if self.memory is not None:
            logits = logits + ops.expand_dims(self.memory, 1)
        return logits

    def reference(self, target_in, memory_row=None):
        """The logits ``(L, V)`` of one sentence, ``target_in`` ``(L,)``, in float64."""
        h = self.embed[target_in].astype("float64") + self.position  # (L, D)
        h = h + self.mix.astype("float64") @ h
        logits = np.tanh(h) @ self.out.astype("float64")
        if memory_row is not None:
            logits = logits + memory_row
        return logits


def log_softmax_without_pad(logits):
    """Log-probabilities with the padding and mask ids forbidden (their mass removed)."""
    logits = np.array(logits, "float64")
    logits[..., [PAD_ID, UNK_ID]] = -np.inf
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def reference_mask_predict(decode, length, iterations, early_stopping=False):
    """Mask-Predict for one sentence, straight from the paper, with Python loops.

    Returns its tokens ``(L,)``, their log-probabilities ``(L,)`` and its decoder runs.
    """
    tokens = np.zeros(L, "int64")
    log_p = np.zeros(L)
    masked = list(range(length))  # iteration 0: every position is masked
    runs = 0
    for t in range(iterations):
        if t > 0:
            n = length * (iterations - t) // iterations
            # The n least confident positions; a stable sort: the lower position first.
            masked = list(np.argsort(log_p[:length], kind="stable")[:n])
        target_in = tokens.copy()
        target_in[masked] = UNK_ID
        out = log_softmax_without_pad(decode(target_in))  # (L, V)
        runs += 1
        before = tokens.copy()
        for i in masked:
            tokens[i] = np.argmax(out[i])
            log_p[i] = out[i].max()
        if early_stopping and t > 0 and np.array_equal(tokens, before):
            break
    return tokens, log_p, runs


def reference_length_candidates(length_logits, source_lengths, length_beam, max_offset):
    out = []
    for logits, source_length in zip(length_logits, source_lengths):
        best = np.argsort(-np.asarray(logits), kind="stable")[:length_beam]  # ties: lower first
        out.append(np.clip(best - max_offset + source_length, 2, L))
    return np.array(out)


def reference_cut(row, eos_id=EOS_ID):
    row = np.array(row)
    eos = np.flatnonzero(row == eos_id)
    if len(eos):
        row[eos[0] + 1 :] = 0
    return row


def test_cut_at_first_eos():
    ids = np.array(
        [[5, 3, 6, 3, 7], [3, 4, 5, 6, 7], [4, 5, 6, 7, 3], [4, 5, 6, 7, 8], [4, 5, 0, 0, 0]],
        "int32",
    )
    expected = np.array([reference_cut(row) for row in ids])
    assert expected[0].tolist() == [5, 3, 0, 0, 0] and expected[1].tolist() == [3, 0, 0, 0, 0]
    np.testing.assert_array_equal(numpy(cut_at_first_eos(ids, EOS_ID)), expected)
    # Any leading dimensions: (B, l, L).
    stacked = np.stack([ids, ids[::-1]])
    np.testing.assert_array_equal(
        numpy(cut_at_first_eos(stacked, EOS_ID)), np.stack([expected, expected[::-1]])
    )


def test_length_candidates_equal_the_reference():
    """Integer scores, so that there are ties (the lower offset first); clipping both ways."""
    rng = np.random.default_rng(0)
    max_offset = 3
    logits = rng.integers(0, 3, size=(5, 2 * max_offset + 1)).astype("float32")
    sources = np.array([1, 4, 7, 8, 2], "int32")
    for beam in (1, 3, 7):
        got = numpy(length_candidates(logits, sources, beam, max_offset, L))
        expected = reference_length_candidates(logits, sources, beam, max_offset)
        assert got.dtype == np.int32 and got.shape == (5, beam)
        np.testing.assert_array_equal(got, expected)
    assert got.min() == 2 and got.max() == L  # both clips were exercised
    with pytest.raises(ValueError, match="classes"):
        length_candidates(logits, sources, 1, max_offset + 1, L)


@pytest.mark.parametrize("early_stopping", [True, False])
@pytest.mark.parametrize("iterations", [1, 2, 4, 10])
def test_mask_predict_equals_the_reference(iterations, early_stopping):
    decode = FakeDecoder(seed=iterations)
    tokens, log_p, runs = mask_predict(
        decode, LENGTHS, iterations, L, mask_id=UNK_ID, early_stopping=early_stopping
    )
    tokens, log_p = numpy(tokens), numpy(log_p)
    assert tokens.dtype == np.int32 and log_p.dtype == np.float32
    expected_runs = []
    for row, length in enumerate(LENGTHS):
        ref_tokens, ref_log_p, ref_runs = reference_mask_predict(
            decode.reference, length, iterations, early_stopping
        )
        np.testing.assert_array_equal(tokens[row], ref_tokens)
        np.testing.assert_allclose(log_p[row], ref_log_p, atol=1e-5)
        expected_runs.append(ref_runs)
    # The batch runs until its last sentence is finished.
    assert int(runs) == max(expected_runs)
    padding = np.arange(L)[None] >= LENGTHS[:, None]
    assert np.all(tokens[padding] == 0) and np.all(log_p[padding] == 0)
    assert np.all(tokens[~padding] != 0) and np.all(log_p[~padding] <= 0)


def test_refinement_changes_the_one_pass_result():
    """The fake decoders are not degenerate: re-masking changes tokens, and the loop does
    not always stop right after the first refinement."""
    decode = FakeDecoder(seed=4)
    one_pass = numpy(mask_predict(decode, LENGTHS, 1, L)[0])
    refined, _, runs = mask_predict(decode, LENGTHS, 4, L, early_stopping=True)
    assert np.any(numpy(refined) != one_pass)
    assert int(runs) > 2


def test_one_iteration_is_the_one_pass_argmax():
    decode = FakeDecoder(seed=5)
    tokens, log_p, runs = mask_predict(decode, LENGTHS, 1, L)
    real = np.arange(L)[None] < LENGTHS[:, None]
    all_masks = np.where(real, UNK_ID, 0).astype("int32")
    all_log_p = log_softmax_without_pad(numpy(decode(all_masks)))  # (B, L, V)
    np.testing.assert_array_equal(numpy(tokens), np.where(real, all_log_p.argmax(-1), 0))
    np.testing.assert_allclose(numpy(log_p), np.where(real, all_log_p.max(-1), 0), atol=1e-5)
    assert int(runs) == 1

    # nat_search with one iteration and one length: the argmax at the predicted length.
    length_logits = np.eye(2 * 2 + 1, dtype="float32")[[2, 4, 3, 1]]  # offsets 0, +2, +1, -1
    sources = np.array([2, 6, 4, 4], "int32")
    ids, _ = nat_search(decode, length_logits, sources, max_length=L)
    np.testing.assert_array_equal(numpy(ids), numpy(cut_at_first_eos(tokens, EOS_ID)))


def test_early_stopping_with_an_input_blind_decoder():
    """A decoder that ignores its input changes nothing after iteration 0: one more run,
    then stop, with the result of running every iteration."""
    logits = np.random.default_rng(6).normal(size=(1, L, VOCAB)).astype("float32")

    def blind(target_in):
        return ops.zeros(ops.shape(target_in) + (VOCAB,)) + logits

    stopping = counting(blind)
    tokens, log_p, runs = mask_predict(stopping, LENGTHS, 10, L, early_stopping=True)
    assert stopping.calls == 2 and int(runs) == 2
    full = counting(blind)
    all_tokens, all_log_p, all_runs = mask_predict(full, LENGTHS, 10, L, early_stopping=False)
    assert full.calls == 10 and int(all_runs) == 10
    np.testing.assert_array_equal(numpy(tokens), numpy(all_tokens))
    np.testing.assert_array_equal(numpy(log_p), numpy(all_log_p))


def test_equal_probabilities_remask_the_lower_positions_first():
    """Every position has the same distribution: iteration 1 re-masks the first n."""
    seen = []

    def uniform_positions(target_in):
        seen.append(numpy(target_in))
        return ops.zeros(ops.shape(target_in) + (VOCAB,)) + np.arange(VOCAB, dtype="float32")

    mask_predict(uniform_positions, LENGTHS, 2, L)
    assert len(seen) == 2
    for row, length in enumerate(LENGTHS):
        n = length * (2 - 1) // 2
        expected = np.where(np.arange(L) < n, UNK_ID, VOCAB - 1)
        expected[length:] = 0
        np.testing.assert_array_equal(seen[1][row], expected)


def _reference_nat_search(decoder, memory, lengths, iterations, early_stopping=False):
    """For each sentence: every candidate from the reference Mask-Predict, then the best."""
    out_ids, out_scores, out_best = [], [], []
    for b, candidates in enumerate(lengths):
        ids, scores = [], []
        for length in candidates:
            decode = functools.partial(decoder.reference, memory_row=memory[b])
            tokens, log_p, _ = reference_mask_predict(decode, length, iterations, early_stopping)
            ids.append(reference_cut(tokens))
            scores.append(log_p.sum() / length)
        best = int(np.argmax(scores))
        out_ids.append(ids[best])
        out_scores.append(scores[best])
        out_best.append(best)
    return np.array(out_ids), np.array(out_scores), out_best


def _eos_prone_memory(rng, batch):
    """A random memory ``(B, V)`` that makes EOS likely before the end."""
    memory = rng.normal(size=(batch, VOCAB)).astype("float32")
    memory[:, EOS_ID] += 1.0
    return memory


def test_nat_search_equals_the_reference():
    """Candidates from the length logits, each refined; the best mean log-probability wins.
    The memory is tiled per candidate, so the rows must line up with the sentences."""
    rng = np.random.default_rng(7)
    memory = _eos_prone_memory(rng, 3)
    beam, max_offset = 3, 2
    length_logits = rng.normal(size=(3, 2 * max_offset + 1)).astype("float32")
    sources = np.array([1, 4, 7], "int32")
    decoder = FakeDecoder(8, memory=tile_for_beams(memory, beam))
    # With early stopping (the search's option), the case this seed was chosen for.
    ids, scores = nat_search(decoder, length_logits, sources, max_length=L, iterations=3,
                             length_beam=beam, early_stopping=True)  # fmt: skip
    lengths = reference_length_candidates(length_logits, sources, beam, max_offset)
    ref_ids, ref_scores, ref_best = _reference_nat_search(decoder, memory, lengths, 3, True)
    np.testing.assert_array_equal(numpy(ids), ref_ids)
    np.testing.assert_allclose(numpy(scores), ref_scores, atol=1e-5)
    cut = [row for row in ref_ids if EOS_ID in row and np.flatnonzero(row == EOS_ID)[0] < 7]
    assert cut, "degenerate: no sentence was cut at an early EOS"
    assert max(ref_best) > 0, "degenerate: the most likely length always won"


def test_a_shorter_but_surer_length_wins_and_rescore_overrides_it():
    """The decoder is sure of itself at length 4 only; the length model prefers 3."""

    def decode(target_in):
        length = ops.sum(ops.cast(target_in != 0, "float32"), axis=1, keepdims=True)  # (N, 1)
        sharpness = ops.where(length == 4.0, 9.0, 1.0)
        one_hot = ops.one_hot(ops.zeros_like(target_in) + 5, VOCAB)  # token 5 everywhere
        return one_hot * ops.expand_dims(sharpness, 2)

    length_logits = np.array([[0.0, 0.0, 3.0, 2.0, 1.0]], "float32")  # 3, then 4, then 5
    sources = np.array([3], "int32")
    ids, scores = nat_search(decode, length_logits, sources, max_length=L, length_beam=3)
    assert numpy(ids).tolist() == [[5, 5, 5, 5, 0, 0, 0, 0]]
    sure = log_softmax_without_pad(np.eye(VOCAB)[5] * 9.0)[5]
    np.testing.assert_allclose(numpy(scores), [sure], atol=1e-5)

    seen = []

    def rescore(tokens):  # prefers the longest candidate
        seen.append(numpy(tokens))
        return ops.cast(ops.sum(ops.cast(tokens != 0, "int32"), axis=-1), "float32")

    ids, scores = nat_search(
        decode, length_logits, sources, max_length=L, length_beam=3, rescore=rescore
    )
    assert seen[0].shape == (1, 3, L)
    assert numpy(ids).tolist() == [[5, 5, 5, 5, 5, 0, 0, 0]] and numpy(scores).tolist() == [5.0]


def test_lengths_given_directly_fill_a_fixed_length():
    """The max_length mode: every sentence decoded at L, then cut at its first EOS."""
    decoder = FakeDecoder(10, memory=_eos_prone_memory(np.random.default_rng(9), 3))
    full = np.full((3,), L, "int32")
    ids, _ = nat_search(decoder, lengths=full, max_length=L, iterations=2)
    tokens, _, _ = mask_predict(decoder, full, 2, L)
    np.testing.assert_array_equal(numpy(ids), numpy(cut_at_first_eos(tokens, EOS_ID)))
    assert np.any(numpy(ids) == 0) and not np.any(numpy(tokens) == 0)
    with pytest.raises(ValueError, match="lengths"):
        nat_search(decoder, max_length=L)


def test_a_width_per_sentence_equals_the_reference():
    """length_mode="max" of zoo.models.nat: each sentence at its own width, cut at its EOS."""
    memory = _eos_prone_memory(np.random.default_rng(16), 3)
    decoder = FakeDecoder(17, memory=memory)
    widths = np.array([8, 5, 3], "int32")
    ids, scores = nat_search(decoder, lengths=widths, max_length=L, iterations=3)
    ref_ids, ref_scores, _ = _reference_nat_search(decoder, memory, widths[:, None], 3)
    np.testing.assert_array_equal(numpy(ids), ref_ids)
    np.testing.assert_allclose(numpy(scores), ref_scores, atol=1e-5)
    assert np.any(ref_ids[:, :-1] == EOS_ID), "degenerate: no sentence ended before its width"


def test_nat_counts_take_what_each_model_can_use():
    """A copy model takes one iteration, a max-length model one length: an int asking for
    more is refused, a tensor (a SavedModel's request) clamped; None is the default."""
    models = {
        options: build_nat_translator(get_config("tiny", **dict(options)))
        for options in ((), (("decoder_input", "copy"),), (("length_mode", "max"),))
    }
    mask, copy, widest = models.values()
    assert nat_counts(mask) == (4, 3) and nat_counts(mask, 2, 5) == (2, 5)
    assert nat_counts(copy) == (1, 3) and nat_counts(widest) == (4, 1)
    with pytest.raises(ValueError, match="iterations=2: a model with decoder_input='copy'"):
        nat_counts(copy, 2, 1)
    with pytest.raises(ValueError, match="length_beam=3: a model with length_mode='max'"):
        nat_counts(widest, 1, 3)
    for model, expected in ((mask, [5, 8]), (copy, [1, 8]), (widest, [5, 1])):
        clamped = nat_counts(model, tf.constant(5), tf.constant(100))
        assert [int(count) for count in clamped] == expected


def test_xla_equals_eager():
    rng = np.random.default_rng(11)
    memory = _eos_prone_memory(rng, 3)
    length_logits = rng.normal(size=(3, 5)).astype("float32")
    sources = np.array([2, 5, 7], "int32")
    decoder = FakeDecoder(12, memory=tile_for_beams(memory, 2))
    refine = FakeDecoder(13)

    def both(length_logits, sources):
        ids, scores = nat_search(
            decoder, length_logits, sources, max_length=L, iterations=4, length_beam=2
        )
        return (ids, scores) + mask_predict(refine, LENGTHS, 10, L)

    eager = both(length_logits, sources)
    xla = tf.function(both, jit_compile=True)(length_logits, sources)
    for got, expected in zip(xla, eager):
        np.testing.assert_allclose(numpy(got), numpy(expected), atol=1e-5)
    np.testing.assert_array_equal(numpy(xla[0]), numpy(eager[0]))
    np.testing.assert_array_equal(numpy(xla[2]), numpy(eager[2]))
    assert int(xla[4]) == int(eager[4]) > 2


def test_tensor_counts_in_graph_mode_equal_python_ints_eager():
    """A SavedModel's request brings iterations and length_beam as scalar tensors: plain graph
    mode, dynamic shapes, the same result; out-of-range tensors are clamped."""
    rng = np.random.default_rng(14)
    memory = _eos_prone_memory(rng, 3)
    length_logits = rng.normal(size=(3, 5)).astype("float32")
    sources = np.array([2, 5, 7], "int32")

    def search(iterations, length_beam):
        beam = check_length_beam(length_beam, max_offset=2)
        decoder = FakeDecoder(15, memory=tile_for_beams(memory, beam))
        return nat_search(
            decoder, length_logits, sources, max_length=L, iterations=iterations,
            length_beam=length_beam,
        )  # fmt: skip

    graph = tf.function(search, autograph=False)
    for (iterations, length_beam), expected in [
        ((3, 2), (3, 2)), ((0, -4), (1, 1)), ((10**6, 10**6), (MAX_ITERATIONS, 5))
    ]:
        got = graph(tf.constant(iterations), tf.constant(length_beam))
        eager = search(*expected)
        np.testing.assert_array_equal(numpy(got[0]), numpy(eager[0]))
        np.testing.assert_allclose(numpy(got[1]), numpy(eager[1]), atol=1e-5)
    with pytest.raises(ValueError, match="iterations"):
        graph(tf.constant(2.0), tf.constant(2))


def test_arguments_are_checked():
    decode = FakeDecoder(0)
    with pytest.raises(ValueError, match="iterations"):
        mask_predict(decode, LENGTHS, 0, L)
    with pytest.raises(ValueError, match="max_length"):
        mask_predict(decode, LENGTHS, 2, 8.0)
