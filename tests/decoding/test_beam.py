import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.common import (
    assert_pad_only_after_eos,
    counting,
    gnmt_penalty,
    lengths,
    log_probability,
    numpy,
)
from tests.decoding.conftest import MAX_LENGTH
from zoo.data import EOS_ID, PAD_ID
from zoo.decoding import beam_search, greedy_search, length_penalty
from zoo.models import build_translator, translator_config
from zoo.models.translator import step_and_caches


def _beam(model, source, max_length=MAX_LENGTH, **kwargs):
    return beam_search(*step_and_caches(model, source, max_length), max_length, **kwargs)


@pytest.fixture(scope="module")
def searched():
    """``searched(model, source, **settings)``: the eager beam search's ids, scores and decoder
    steps, run once per model, source and settings (beam 4, alpha 0.6 and early stopping
    unless given). An eager search costs about half a second, and several tests read the
    same one."""
    done = {}

    def search(model, source, **settings):
        settings = {"beam_size": 4, "alpha": 0.6, "early_stopping": True, **settings}
        key = (id(model), source.tobytes(), source.shape, tuple(sorted(settings.items())))
        if key not in done:
            step, caches = step_and_caches(model, source, MAX_LENGTH)
            step = counting(step)
            ids, scores = beam_search(step, caches, MAX_LENGTH, **settings)
            done[key] = numpy(ids), numpy(scores), step.calls
        return done[key]

    return search


def _alone(sources):
    """Each source on its own, without padding."""
    return [source[source != 0][None] for source in sources]


def test_beam_size_one_is_greedy(model, sources, searched):
    """Without a length penalty, one beam is greedy search, token for token."""
    ids, _, _ = searched(model, sources, beam_size=1, alpha=0.0)
    greedy = greedy_search(*step_and_caches(model, sources, MAX_LENGTH), MAX_LENGTH)
    np.testing.assert_array_equal(ids, numpy(greedy))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_scores_are_the_models_length_penalised_log_probabilities(model, sources, searched,
                                                                  alpha):
    """Rescoring each returned hypothesis with the full model gives back its score: the
    backpointers, the cache reordering and the bookkeeping of finished hypotheses agree."""
    ids, scores, _ = searched(model, sources, alpha=alpha)
    assert ids.shape == (len(sources), MAX_LENGTH) and ids.dtype == np.int32
    assert scores.shape == (len(sources),) and scores.dtype == np.float32
    assert_pad_only_after_eos(ids)
    expected = log_probability(model, sources, ids) / gnmt_penalty(lengths(ids), alpha)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_early_stopping_is_exact(model, copy_model, sources, searched, alpha):
    """Stopping once no live beam can win gives what running to max_length gives. Each
    sentence of the trained model also runs alone, so that the loop stops when that sentence
    is done (the random model's loop, alone or not, runs to max_length: its batch suffices)."""
    for batch in [sources] + (_alone(sources) if model is copy_model else []):
        early_ids, early_scores, _ = searched(model, batch, alpha=alpha)
        full_ids, full_scores, calls = searched(model, batch, alpha=alpha, early_stopping=False)
        assert calls == MAX_LENGTH
        np.testing.assert_array_equal(early_ids, full_ids)
        np.testing.assert_allclose(early_scores, full_scores, rtol=1e-6)


def test_early_stopping_stops_the_trained_model_early(copy_model, sources, searched):
    ids, _, calls = searched(copy_model, sources)
    assert calls < MAX_LENGTH
    assert np.all((ids == EOS_ID).sum(1) == 1)


def test_a_huge_beam_is_exact_search():
    """With more beams than there are hypotheses, beam search finds the best sequence of
    all, found here by scoring every possible output with the full model."""
    vocab, max_length, alpha = 8, 3, 0.6
    keras.utils.set_random_seed(2)
    config = translator_config("tiny", vocab_size=vocab, max_length=8, share_embeddings=False)
    model = build_translator(config)
    sources = np.array([[4, 5, 6], [7, 0, 0]], "int32")
    ids, scores = _beam(model, sources, max_length, beam_size=256, alpha=alpha)
    words = [t for t in range(vocab) if t not in (PAD_ID, EOS_ID)]  # 6 continuing tokens
    outputs = [
        prefix + (EOS_ID,)
        for n in range(max_length)
        for prefix in itertools.product(words, repeat=n)
    ]
    outputs += list(itertools.product(words, repeat=max_length))  # cut at max_length
    candidates = np.zeros((len(outputs), max_length), "int32")
    for row, output in enumerate(outputs):
        candidates[row, : len(output)] = output
    assert len(candidates) == 1 + 6 + 36 + 216
    for b, source in enumerate(sources):
        tiled = np.repeat(source[None], len(candidates), axis=0)
        all_scores = log_probability(model, tiled, candidates) / gnmt_penalty(
            lengths(candidates), alpha
        )
        best = int(np.argmax(all_scores))
        np.testing.assert_array_equal(numpy(ids)[b], candidates[best])
        np.testing.assert_allclose(numpy(scores)[b], all_scores[best], rtol=1e-4)


def test_caches_handed_back_untouched_need_no_reordering(random_model, sources, searched):
    """Beam search leaves the caches that the step hands back as they came (the encoder's)
    where they are; reordering them all, as for a step that copies them, gives the same.
    (The search's bookkeeping, on one model: the one of two decoder blocks.)"""
    step, caches = step_and_caches(random_model, sources, MAX_LENGTH)

    def copying_step(tokens, caches, index):
        logits, caches = step(tokens, caches, index)
        return logits, keras.tree.map_structure(keras.ops.copy, caches)

    ids, scores, _ = searched(random_model, sources, early_stopping=False)
    copied_ids, copied_scores = beam_search(
        copying_step, caches, MAX_LENGTH, beam_size=4, alpha=0.6, early_stopping=False
    )
    np.testing.assert_array_equal(numpy(copied_ids), ids)
    np.testing.assert_allclose(numpy(copied_scores), scores, rtol=1e-6)


def test_batch_equals_one_sentence_at_a_time(copy_model, sources, searched):
    ids, scores, _ = searched(copy_model, sources)
    for row, alone in enumerate(_alone(sources)):
        alone_ids, alone_scores, _ = searched(copy_model, alone)
        np.testing.assert_array_equal(alone_ids[0], ids[row])
        np.testing.assert_allclose(alone_scores[0], scores[row], rtol=1e-5)


def test_xla_and_a_beam_size_tensor_in_graph_mode(random_model, sources, searched):
    eager_ids, eager_scores, _ = searched(random_model, sources)
    xla = tf.function(lambda s: _beam(random_model, s, beam_size=4), jit_compile=True)
    graph = tf.function(
        lambda s, k: _beam(random_model, s, beam_size=k),
        input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)],
    )
    for ids, scores in (xla(sources), graph(sources, tf.constant(4))):
        np.testing.assert_array_equal(numpy(ids), eager_ids)
        np.testing.assert_allclose(numpy(scores), eager_scores, rtol=1e-5)
    # One graph serves every beam size.
    ids_1, _ = graph(sources, tf.constant(1))
    eager_ids_1, _, _ = searched(random_model, sources, beam_size=1)
    np.testing.assert_array_equal(numpy(ids_1), eager_ids_1)


@pytest.mark.parametrize("k, vocab", [(3, 20), (4, 5)])  # a vocabulary wider and narrower than 2K
def test_the_two_stage_top_k_is_the_top_k_of_all_beams(k, vocab):
    """Each beam's top 2K, then the sentence's, equals the top 2K of its K * V scores, ties
    (integer scores) ordered alike: lower beam, then lower token. Candidates of a dead beam
    (-inf, never kept) may come in another order."""
    from zoo.decoding.beam import _top_candidates

    rng = np.random.default_rng(0)
    log_p = rng.integers(-4, 0, size=(2 * k, vocab)).astype("float32")
    alive = rng.integers(-2, 0, size=(2, k)).astype("float32")
    alive[1, 1:] = -np.inf  # a sentence with one live beam, as at the first step
    scores, parents, tokens = (numpy(x) for x in _top_candidates(log_p, alive, 2 * k))
    every = (log_p.reshape(2, k, vocab) + alive[:, :, None]).reshape(2, k * vocab)
    expected, where = (numpy(x) for x in tf.math.top_k(every, 2 * k))
    np.testing.assert_array_equal(scores, expected)
    live = np.isfinite(expected)
    assert (~live).any() == (vocab < 2 * k)  # sentence 1's one live beam has V < 2K candidates
    np.testing.assert_array_equal(parents[live], (where // vocab)[live])
    np.testing.assert_array_equal(tokens[live], (where % vocab)[live])


def test_length_penalty_is_gnmt():
    np.testing.assert_allclose(numpy(length_penalty(7, 0.6)), (12 / 6) ** 0.6, rtol=1e-6)
    assert float(numpy(length_penalty(30, 0.0))) == 1.0


def test_bad_beam_size_is_refused(copy_model, sources):
    with pytest.raises(ValueError, match="beam_size"):
        _beam(copy_model, sources, max_length=4, beam_size=0)
