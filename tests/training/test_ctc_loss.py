"""The CTC loss against its forward recursion written out in NumPy (Graves et al. 2006)."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.training.losses import CTCLoss

BLANK = 1


def forward_nll(labels, log_probs, blank=BLANK):
    """-log p(labels | x): the sum over alignments by the alpha recursion, in log space."""
    extended = [blank]
    for label in labels:
        extended += [label, blank]
    alpha = np.full(len(extended), -np.inf)
    alpha[0] = log_probs[0, extended[0]]
    alpha[1] = log_probs[0, extended[1]]
    for t in range(1, len(log_probs)):
        previous = alpha.copy()
        for s, symbol in enumerate(extended):
            terms = [previous[s]] + ([previous[s - 1]] if s > 0 else [])
            if s > 1 and symbol != blank and symbol != extended[s - 2]:
                terms.append(previous[s - 2])
            alpha[s] = np.logaddexp.reduce(terms) + log_probs[t, symbol]
    return -np.logaddexp(alpha[-1], alpha[-2])


def log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_the_loss_is_the_forward_recursion_per_label():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 7, 6)).astype("float32")
    labels = np.array([[3, 3, 2], [4, 0, 0], [5, 2, 0]])  # a repeat needs a blank between
    got = np.asarray(CTCLoss(BLANK, reduction=None)(labels, logits))
    expected = []
    for i, row in enumerate(labels.tolist()):
        real = [t for t in row if t]
        expected.append(forward_nll(real, log_softmax(logits[i].astype("float64"))) / len(real))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    mean = float(CTCLoss(BLANK)(labels, logits))
    np.testing.assert_allclose(mean, np.mean(expected), rtol=1e-5)


def test_a_target_with_no_alignment_counts_zero():
    logits = np.zeros((3, 2, 6), "float32")  # two positions: not three labels, nor "3, 3"
    got = np.asarray(CTCLoss(BLANK, reduction=None)([[3, 4, 5], [3, 3, 0], [3, 4, 0]], logits))
    assert got[0] == 0.0 and got[1] == 0.0
    np.testing.assert_allclose(got[2], forward_nll([3, 4], log_softmax(logits[2])) / 2, rtol=1e-5)


def test_config_round_trip():
    loss = CTCLoss(BLANK)
    assert CTCLoss.from_config(loss.get_config()).blank_id == BLANK
    with pytest.raises(TypeError):
        CTCLoss()


def numeric_gradient(f, x, step=1e-3):
    """The central difference of the scalar f at every entry of x (float64)."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += step
        minus[index] -= step
        grad[index] = (f(plus) - f(minus)) / (2 * step)
    return grad


def test_the_gradient_is_the_central_difference_of_the_numpy_loss():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 5, 4))
    labels = np.array([[2, 2], [3, 0]])  # a repeat, and a single label

    def numpy_loss(x):
        per_sentence = [forward_nll(row, log_softmax(x[i])) / len(row)
                        for i, row in enumerate([[2, 2], [3]])]  # fmt: skip
        return np.mean(per_sentence)

    x = tf.Variable(logits.astype("float32"))
    with tf.GradientTape() as tape:
        loss = CTCLoss(BLANK)(labels, x * 1.0)
    got = tape.gradient(loss, x).numpy()
    np.testing.assert_allclose(got, numeric_gradient(numpy_loss, logits), atol=1e-4)


def test_the_loss_and_its_gradient_under_xla_on_unknown_lengths_are_tensorflows():
    """Against ``tf.nn.ctc_loss`` (which the loss replaced for speed), jit-compiled as ``fit``
    traces it: unknown batch, width and label length, with an empty label sequence."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(3, 9, 7)).astype("float32")
    labels = np.array([[3, 3, 5, 6], [4, 0, 0, 0], [0, 0, 0, 0]], "int32")
    counts = (labels != 0).sum(1)
    spec = [tf.TensorSpec([None, None, 7]), tf.TensorSpec([None, None], tf.int32)]

    def loss_and_gradient(function):
        def run(x, y):
            with tf.GradientTape() as tape:
                tape.watch(x)
                total = tf.reduce_sum(function(x, y))
            return total, tape.gradient(total, x)

        return tf.function(run, jit_compile=True, input_signature=spec)(logits, labels)

    ours = CTCLoss(BLANK, reduction=None)
    got = loss_and_gradient(lambda x, y: ours(y, x) * tf.cast(tf.maximum(counts, 1), tf.float32))
    expected = loss_and_gradient(lambda x, y: tf.nn.ctc_loss(
        y, x, counts, tf.fill([3], 9), logits_time_major=False, blank_index=BLANK))  # fmt: skip
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], expected[1], atol=1e-5)
