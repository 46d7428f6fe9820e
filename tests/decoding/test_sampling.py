import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.common import assert_pad_only_after_eos, numpy
from tests.decoding.conftest import MAX_LENGTH
from zoo.data import PAD_ID
from zoo.decoding import greedy_search, sample, sample_from_logits
from zoo.models.translator import step_and_caches


def _sample(model, source, max_length, **kwargs):
    return sample(*step_and_caches(model, source, max_length), max_length, **kwargs)


@pytest.fixture(scope="module")
def greedy(random_model, sources):
    return numpy(greedy_search(*step_and_caches(random_model, sources, MAX_LENGTH), MAX_LENGTH))


@pytest.mark.parametrize(
    "settings", [{"top_k": 1}, {"temperature": 1e-3}, {"temperature": 0}, {"top_p": 1e-6}]
)
def test_degenerate_settings_are_greedy(random_model, sources, greedy, settings):
    """top_k=1, a temperature near (or at) 0 and a tiny nucleus all leave only the argmax."""
    ids = numpy(_sample(random_model, sources, MAX_LENGTH, seed=0, **settings))
    np.testing.assert_array_equal(ids, greedy)


def test_sampling_differs_from_greedy_and_follows_the_eos_contract(random_model, sources, greedy):
    ids = numpy(_sample(random_model, sources, MAX_LENGTH, seed=0))
    assert not np.array_equal(ids, greedy)
    assert_pad_only_after_eos(ids)


def test_a_fixed_seed_is_reproducible(random_model, sources):
    settings = dict(temperature=1.5, top_k=10, top_p=0.9)
    first = numpy(_sample(random_model, sources, MAX_LENGTH, seed=7, **settings))
    np.testing.assert_array_equal(
        numpy(_sample(random_model, sources, MAX_LENGTH, seed=7, **settings)), first
    )
    assert not np.array_equal(
        numpy(_sample(random_model, sources, MAX_LENGTH, seed=8, **settings)), first
    )
    xla = tf.function(
        lambda s: _sample(random_model, s, MAX_LENGTH, seed=7, **settings), jit_compile=True
    )
    np.testing.assert_array_equal(numpy(xla(sources)), numpy(xla(sources)))
    # A SeedGenerator gives new draws on every call, also under XLA.
    generator = keras.random.SeedGenerator(3)
    fresh = tf.function(
        lambda s: _sample(random_model, s, MAX_LENGTH, seed=generator), jit_compile=True
    )
    assert not np.array_equal(numpy(fresh(sources)), numpy(fresh(sources)))


def _frequencies(logits, n=20_000, **settings):
    """Token frequencies over an even grid of n uniforms: the sampled distribution."""
    uniform = (np.arange(n) + 0.5) / n
    tokens = numpy(sample_from_logits(np.repeat(logits[None], n, 0), uniform, **settings))
    return np.bincount(tokens, minlength=len(logits)) / n


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({}, [0.4, 0.3, 0.2, 0.1, 0.0]),
        ({"top_k": 2}, [4 / 7, 3 / 7, 0, 0, 0]),
        ({"top_p": 0.75}, [4 / 9, 3 / 9, 2 / 9, 0, 0]),  # 0.4 + 0.3 < 0.75: the third is kept
        ({"top_p": 0.65}, [4 / 7, 3 / 7, 0, 0, 0]),  # 0.4 + 0.3 passes 0.65: two are kept
        ({"top_k": 3, "top_p": 0.5}, [4 / 7, 3 / 7, 0, 0, 0]),
        ({"temperature": 0.5}, np.array([16, 9, 4, 1, 0]) / 30),  # p ** 2, renormalised
    ],
)
def test_the_sampled_distribution(settings, expected):
    """Tokens come out with the probabilities that temperature, top-k and top-p define."""
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.1, 1e-30], "float32"))
    logits = logits[[2, 0, 4, 1, 3]]  # shuffled: the order of the vocabulary is no help
    expected = np.asarray(expected)[[2, 0, 4, 1, 3]]
    np.testing.assert_allclose(_frequencies(logits, **settings), expected, atol=2e-3)


def test_padding_is_never_sampled(random_model, sources):
    ids = numpy(_sample(random_model, sources, MAX_LENGTH, temperature=100.0, seed=1))
    assert_pad_only_after_eos(ids)
    assert np.all(ids[:, 0] != PAD_ID)


def test_bad_settings_are_refused(random_model, sources):
    for settings in [{"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}, {"temperature": -1.0}]:
        with pytest.raises(ValueError):
            _sample(random_model, sources, MAX_LENGTH, **settings)
