"""zoo's dropout (a hashed keep mask) against a slow reference written with Python integers,
and its statistics: the keep rate, unbiased scaling, independence between elements and calls."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test
from zoo.layers import Dropout, TransformerEncoderBlock
from zoo.layers.dropout import dropout, dropout_bits

M = 0xFFFFFFFF
GOLDEN = 0x9E3779B9


def fmix32_reference(h):
    """MurmurHash3's fmix32 on a Python int, as its C source writes it."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    return h ^ (h >> 16)


def bits_reference(size, seed):
    """The bits of zoo.layers.dropout.dropout_bits, one Python int at a time."""
    s0, s1 = (int(s) & M for s in seed)  # a negative int64 seed wraps as a cast to uint32 does
    k0 = fmix32_reference(s0 ^ fmix32_reference((s1 + GOLDEN) & M))
    k1 = fmix32_reference((k0 + GOLDEN) & M)
    return np.array(
        [fmix32_reference(((i * GOLDEN + k0) & M) ^ k1) for i in range(size)], np.uint64
    )


def test_fmix32_is_murmurhash3s_finalizer():
    # Known values of MurmurHash3's fmix32 (0 is its fixed point).
    assert fmix32_reference(0) == 0
    assert fmix32_reference(1) == 0x514E28B7


@pytest.mark.parametrize("seed", [(0, 0), (1, 2), (-5, 2**40 + 3)])
def test_the_bits_equal_the_reference_eager_and_under_xla(seed):
    seed64 = tf.constant(seed, tf.int64)  # a SeedGenerator's state is int64 on TensorFlow
    expected = bits_reference(3 * 5 * 7, seed).reshape(3, 5, 7)
    eager = dropout_bits((3, 5, 7), seed64).numpy()
    xla = tf.function(lambda s: dropout_bits((3, 5, 7), s), jit_compile=True)(seed64).numpy()
    assert eager.dtype == np.uint32
    np.testing.assert_array_equal(eager, expected)
    np.testing.assert_array_equal(xla, expected)


def test_the_mask_keeps_the_elements_whose_bits_pass_the_rate():
    x = np.arange(1, 1 + 4 * 50, dtype="float32").reshape(4, 50)
    out = dropout(x, 0.3, seed=7).numpy()  # an int seed draws the pair (7, 0), as in Keras
    keep = bits_reference(x.size, (7, 0)).reshape(x.shape) >= int(0.3 * 2**32)
    np.testing.assert_allclose(out, np.where(keep, x / 0.7, 0.0), rtol=1e-6)


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_the_keep_rate_scaling_and_independence(rate):
    generator = keras.random.SeedGenerator(3)
    x = tf.ones((256, 32, 128))  # 1,048,576 elements
    drop = tf.function(lambda x: dropout(x, rate, seed=generator), jit_compile=True)
    first, second = drop(x).numpy(), drop(x).numpy()
    keep = 1.0 - rate
    n = first.size
    sigma = np.sqrt(keep * rate / n)
    kept = first > 0
    assert abs(kept.mean() - keep) < 5 * sigma, kept.mean()
    np.testing.assert_allclose(first[kept], 1.0 / keep, rtol=1e-6)
    assert abs(first.mean() - 1.0) < 5 * sigma / keep  # unbiased: E[dropout(x)] = x
    # Neighbours along every axis, and the same element in two calls, are independent: each
    # pair agrees as often as two independent draws would.
    agree = keep**2 + rate**2
    pair_sigma = np.sqrt(agree * (1 - agree) / n)
    for a, b in [(kept[..., 1:], kept[..., :-1]), (kept[:, 1:], kept[:, :-1]),
                 (kept[1:], kept[:-1]), (kept, second > 0)]:  # fmt: skip
        assert abs((a == b).mean() - agree) < 6 * pair_sigma, (a == b).mean()


def test_seeds_reproduce_and_generators_move_on():
    x = tf.ones((64, 64))
    assert np.array_equal(dropout(x, 0.5, seed=4).numpy(), dropout(x, 0.5, seed=4).numpy())
    assert not np.array_equal(dropout(x, 0.5, seed=4).numpy(), dropout(x, 0.5, seed=5).numpy())
    a, b = keras.random.SeedGenerator(9), keras.random.SeedGenerator(9)
    first = [dropout(x, 0.5, seed=a).numpy() for _ in range(2)]
    again = [dropout(x, 0.5, seed=b).numpy() for _ in range(2)]
    assert not np.array_equal(*first)  # a generator gives a new mask on each call
    np.testing.assert_array_equal(first, again)  # and the same sequence from the same seed


def test_the_gradient_is_the_mask_scaled():
    x = tf.Variable(tf.random.normal((8, 16)))
    with tf.GradientTape() as tape:
        y = dropout(x, 0.25, seed=2)
        total = tf.reduce_sum(y)
    gradient = tape.gradient(total, x).numpy()
    np.testing.assert_allclose(gradient, np.where(y.numpy() != 0, 1 / 0.75, 0.0), rtol=1e-6)


def test_rates_outside_zero_to_one_are_refused():
    for rate in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"rate must be in \[0, 1\)"):
            dropout(tf.ones((2,)), rate)
    x = tf.ones((3,))
    assert dropout(x, 0.0) is x


def test_the_layer():
    run_layer_test(Dropout, {"rate": 0.4, "seed": 1}, np.ones((2, 3, 5), "float32"),
                   run_training=False)
    layer = Dropout(0.5, noise_shape=(None, 1), seed=4)
    out = layer(tf.ones((1000, 4)), training=True).numpy()
    assert np.all(out == out[:, :1])  # one draw per row, broadcast over the columns
    assert 0.4 < (out[:, 0] > 0).mean() < 0.6
    np.testing.assert_array_equal(layer(tf.ones((3, 4))).numpy(), np.ones((3, 4)))


def test_a_block_trains_with_it_and_loads_a_keras_dropout_models_weights():
    """The blocks' dropouts are zoo's; a layer of either class has the same weights (the seed
    generator's state), so files written before load."""
    block = TransformerEncoderBlock(num_heads=2, ff_dim=16, dropout=0.5, attention_dropout=0.5)
    x = tf.random.normal((2, 5, 8))
    assert isinstance(block.self_attention_residual_dropout, Dropout)
    out = block(x, training=True).numpy()
    assert (out != block(x, training=True).numpy()).any() and np.isfinite(out).all()
    ours, theirs = Dropout(0.3, seed=1), keras.layers.Dropout(0.3, seed=1)
    for layer in (ours, theirs):
        layer.build((2, 3))
    assert [w.shape for w in ours.weights] == [w.shape for w in theirs.weights]


def test_the_docstring_examples():
    import doctest

    import zoo.layers.dropout as dropout_module

    result = doctest.testmod(dropout_module)
    assert result.attempted > 0 and result.failed == 0
