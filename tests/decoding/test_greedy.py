import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.common import assert_pad_only_after_eos, counting, lengths, numpy
from tests.decoding.conftest import MAX_LENGTH
from zoo.data import EOS_ID
from zoo.decoding import greedy_search, uncached_greedy_search
from zoo.models.translator import step_and_caches


def _greedy(model, source, max_length, **kwargs):
    return greedy_search(*step_and_caches(model, source, max_length), max_length, **kwargs)


def test_cached_equals_uncached_token_for_token(model, sources):
    """The fast path against the slow reference, on a batch padded to different lengths."""
    cached = numpy(_greedy(model, sources, MAX_LENGTH))
    uncached = numpy(uncached_greedy_search(model, sources, MAX_LENGTH))
    growing = numpy(uncached_greedy_search(model, sources, MAX_LENGTH, static_shapes=False))
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_array_equal(cached, growing)
    assert cached.shape == (len(sources), MAX_LENGTH) and cached.dtype == np.int32
    assert len(np.unique(cached[:, 0])) > 1, "degenerate: every sentence starts alike"


def test_xla_and_graph_mode_equal_eager(copy_model, sources):
    eager = numpy(_greedy(copy_model, sources, MAX_LENGTH))
    xla = tf.function(lambda s: _greedy(copy_model, s, MAX_LENGTH), jit_compile=True)
    graph = tf.function(
        lambda s: _greedy(copy_model, s, MAX_LENGTH),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    uncached_xla = tf.function(
        lambda s: uncached_greedy_search(copy_model, s, MAX_LENGTH), jit_compile=True
    )
    np.testing.assert_array_equal(numpy(xla(sources)), eager)
    np.testing.assert_array_equal(numpy(graph(sources)), eager)
    np.testing.assert_array_equal(numpy(uncached_xla(sources)), eager)


def test_batch_equals_one_sentence_at_a_time(copy_model, sources):
    """Padding a source (and batching it with others) does not change its translation."""
    batch = numpy(_greedy(copy_model, sources, MAX_LENGTH))
    for row, source in enumerate(sources):
        alone = source[source != 0][None]  # no padding at all
        alone_ids = numpy(_greedy(copy_model, alone, MAX_LENGTH))
        np.testing.assert_array_equal(alone_ids[0], batch[row])


def test_eos_ends_each_sentence_and_the_loop(copy_model, sources):
    """Nothing but 0 after an EOS; the loop stops once every sentence has its EOS."""
    step, caches = step_and_caches(copy_model, sources, MAX_LENGTH)
    step = counting(step)
    ids = numpy(greedy_search(step, caches, MAX_LENGTH))
    assert_pad_only_after_eos(ids)
    n = lengths(ids)
    assert np.all((ids == EOS_ID).sum(1) == 1), ids  # the trained model ends every sentence
    assert len(set(n)) > 1, "the sentences should end at different steps"
    assert step.calls == n.max() < MAX_LENGTH


def test_without_eos_the_loop_runs_to_max_length(copy_model, sources):
    step, caches = step_and_caches(copy_model, sources, 3)
    step = counting(step)
    ids = numpy(greedy_search(step, caches, 3, eos_id=-1))  # no token is EOS
    assert step.calls == 3 and np.all(ids != 0)


def test_max_length_is_checked(copy_model, sources):
    with pytest.raises(ValueError, match="max_length"):
        step_and_caches(copy_model, sources, MAX_LENGTH + 1)
    with pytest.raises(ValueError, match="max_length"):
        uncached_greedy_search(copy_model, sources, MAX_LENGTH + 1)
    step, caches = step_and_caches(copy_model, sources, MAX_LENGTH)
    for bad in (0, None, 2.0):
        with pytest.raises(ValueError, match="max_length"):
            greedy_search(step, caches, bad)
