import doctest

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from zoo.layers import TokenAndPositionEmbedding, UniformCopy
from zoo.layers import uniform_copy as uniform_copy_module
from zoo.layers.uniform_copy import uniform_positions

RNG = np.random.default_rng(0)
B, S, T, D = 4, 6, 7, 3
SOURCE = RNG.normal(size=(B, S, D)).astype("float32")
# Trailing padding of every kind (ties at S=3, T=5; T=1; S=1), and one row with holes.
SOURCE_PADDING = np.array(
    [[1] * 3 + [0] * 3, [1] * 6, [1] + [0] * 5, [0, 1, 1, 0, 1, 0]], bool
)
TARGET_PADDING = np.array(
    [[1] * 5 + [0] * 2, [1] * 7, [1] + [0] * 6, [1, 0, 1, 1, 0, 1, 0]], bool
)


def _reference(source, source_padding, target_padding):
    """The definition: real target position j of T takes real source position
    round(j * (S - 1) / (T - 1)) of S, in float64 NumPy, with Python loops."""
    out = np.zeros(target_padding.shape + source.shape[-1:], "float64")
    for b in range(len(source)):
        sources = np.flatnonzero(source_padding[b])
        targets = np.flatnonzero(target_padding[b])
        if not len(sources):
            continue
        for j, position in enumerate(targets):
            i = np.round(j * (len(sources) - 1) / max(len(targets) - 1, 1))  # ties exact
            out[b, position] = source[b, sources[int(i)]]
    return out


def test_equals_the_reference():
    got = np.asarray(UniformCopy()(SOURCE, TARGET_PADDING, padding_mask=SOURCE_PADDING))
    np.testing.assert_array_equal(got, _reference(SOURCE, SOURCE_PADDING, TARGET_PADDING))
    # Row 0: 3 sources over 5 targets, the ties at 0.5 and 1.5 rounded to even.
    np.testing.assert_array_equal(got[0, :5], SOURCE[0, [0, 0, 1, 2, 2]])


def test_positions_round_half_to_even_exactly():
    lengths = np.arange(1, 40)
    sources, targets = (a.reshape(-1, 1) for a in np.meshgrid(lengths, lengths))
    j = np.minimum(np.arange(40)[None], targets - 1)  # (N, 40)
    got = np.asarray(uniform_positions(j, sources, targets))
    want = np.round(j * (sources - 1) / np.maximum(targets - 1, 1))  # exact in float64 here
    np.testing.assert_array_equal(got, want)
    assert np.all(got <= sources - 1)


def test_padded_sources_are_never_read_and_padded_targets_are_zero():
    layer = UniformCopy()
    base = np.asarray(layer(SOURCE, TARGET_PADDING, padding_mask=SOURCE_PADDING))
    noisy = np.where(SOURCE_PADDING[..., None], SOURCE, np.nan).astype("float32")
    got = np.asarray(layer(noisy, TARGET_PADDING, padding_mask=SOURCE_PADDING))
    np.testing.assert_array_equal(got, base)
    assert np.all(got[~TARGET_PADDING] == 0)
    # A source without a real token gives zeros, not the padding.
    empty = np.asarray(layer(noisy, TARGET_PADDING, padding_mask=np.zeros((B, S), bool)))
    assert np.all(empty == 0)


def test_reads_the_implicit_mask_of_the_source_and_compiles():
    ids = np.where(SOURCE_PADDING, np.arange(1, S + 1), 0).astype("int32")
    embedding = TokenAndPositionEmbedding(10, D, position=None, mask_zero=True)
    source = embedding(ids)  # carries ids != 0
    layer = UniformCopy()
    got = np.asarray(layer(source, TARGET_PADDING))
    want = _reference(np.asarray(source), SOURCE_PADDING, TARGET_PADDING)
    np.testing.assert_allclose(got, want, atol=1e-6)
    xla = tf.function(lambda *x: layer(*x), jit_compile=True)
    got = np.asarray(xla(SOURCE, TARGET_PADDING, SOURCE_PADDING))
    np.testing.assert_array_equal(got, _reference(SOURCE, SOURCE_PADDING, TARGET_PADDING))


@pytest.mark.filterwarnings("ignore:The model does not have any trainable weights")
def test_uniform_copy_layer():
    run_layer_test(
        UniformCopy,
        {},
        {"source": SOURCE, "target_padding_mask": TARGET_PADDING, "padding_mask": SOURCE_PADDING},
        expected_output_shape=(B, T, D),
    )


def test_docstring_examples_run():
    result = doctest.testmod(uniform_copy_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
