import math

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import FeedForward

RNG = np.random.default_rng(0)
B, T, D, F = 2, 5, 8, 12


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- harness runs
def test_plain_feed_forward_layer():
    run_layer_test(
        FeedForward,
        {"hidden_dim": F, "activation": "gelu", "dropout": 0.1},
        _x(B, T, D),
        expected_output_shape=(B, T, D),
    )


def test_gated_feed_forward_layer():
    run_layer_test(
        FeedForward,
        {"hidden_dim": F, "activation": "swiglu", "use_bias": False, "output_dim": 6},
        _x(B, T, D),
        expected_output_shape=(B, T, 6),
    )


# ---------------------------------------------------------------- references
def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# The definitions of Vaswani et al. (relu), Hendrycks & Gimpel (gelu) and Shazeer 2020,
# eqs. (5)-(6): FFN_GLU(x) = (sigmoid(xW + b) * (xV + c)) W2, and so on.
PLAIN = {"relu": lambda a: np.maximum(a, 0.0), "gelu": _gelu}
GATES = {
    "glu": _sigmoid,
    "reglu": lambda a: np.maximum(a, 0.0),
    "geglu": _gelu,
    "swiglu": lambda a: a * _sigmoid(a),
}


@pytest.mark.parametrize("activation", sorted(PLAIN) + sorted(GATES))
def test_each_activation_against_its_definition(activation):
    layer = FeedForward(F, activation=activation, bias_initializer="random_normal")
    x = _x(B, T, D).astype("float64")
    got = np.asarray(layer(x.astype("float32")))
    inner_kernel, inner_bias = (np.asarray(w, "float64") for w in layer.inner_dense.weights)
    out_kernel, out_bias = (np.asarray(w, "float64") for w in layer.output_dense.weights)
    if activation in GATES:
        # One fused projection: the gate (W, b) is the first half, the linear (V, c) the second.
        assert inner_kernel.shape == (D, 2 * F)
        gate = x @ inner_kernel[:, :F] + inner_bias[:F]
        linear = x @ inner_kernel[:, F:] + inner_bias[F:]
        hidden = GATES[activation](gate) * linear
    else:
        assert inner_kernel.shape == (D, F)
        hidden = PLAIN[activation](x @ inner_kernel + inner_bias)
    want = hidden @ out_kernel + out_bias
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_gated_variant_is_one_matmul_and_differs_from_plain():
    layer = FeedForward(F, activation="reglu")
    layer(_x(B, T, D))
    kernels = [w for w in layer.trainable_weights if w.path.endswith("kernel")]
    assert [tuple(k.shape) for k in kernels] == [(D, 2 * F), (F, D)]
    # The gate matters: with the gate half zeroed, ReGLU outputs only the output bias.
    inner_kernel, inner_bias = layer.inner_dense.get_weights()
    inner_kernel[:, :F] = 0.0
    inner_bias[:F] = 0.0
    layer.inner_dense.set_weights([inner_kernel, inner_bias])
    out = np.asarray(layer(_x(B, T, D)))
    np.testing.assert_allclose(out, np.broadcast_to(layer.output_dense.bias.numpy(), out.shape))


def test_unknown_activation_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown feed-forward activation 'swish'"):
        FeedForward(F, activation="swish")


def test_dropout_only_when_training():
    layer = FeedForward(F, dropout=0.5)
    x = _x(B, T, D)
    np.testing.assert_array_equal(np.asarray(layer(x)), np.asarray(layer(x, training=False)))
    assert not np.allclose(np.asarray(layer(x, training=True)), np.asarray(layer(x)))


def test_keras_implicit_mask_passes_through():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    inputs = keras.Input((None,), dtype="int32")
    outputs = FeedForward(F)(keras.layers.Embedding(10, D, mask_zero=True)(inputs))
    model = keras.Model(inputs, outputs)
    eager = FeedForward(F)(keras.layers.Embedding(10, D, mask_zero=True)(ids))
    np.testing.assert_array_equal(np.asarray(eager._keras_mask), ids != 0)
    assert outputs._keras_mask is not None  # the functional graph carries it too
    assert tuple(model(ids).shape) == (2, 5, D)
