"""The CTC decoder's layers (the upsampled source, the blank at padding) through the layer
harness and against what they must compute, and the best alignment against every path tried."""

import itertools

import numpy as np
import tensorflow as tf
from keras import ops

from tests.harness import run_layer_test
from zoo.layers import CTCBlankPadding, SourceUpsampling, ctc_best_alignment, ctc_positions_needed
from zoo.training.losses import CTCLoss

SOURCE = np.array([[5, 6, 7, 0], [8, 0, 0, 0]], "int32")


def test_source_upsampling_repeats_each_token_in_order():
    layer, outputs = run_layer_test(SourceUpsampling, {"factor": 3}, SOURCE,
                                    expected_output_shape=(2, 12), run_training=False)  # fmt: skip
    expected = [[t for t in row for _ in range(3)] for row in SOURCE.tolist()]
    assert np.asarray(outputs[0]).tolist() == expected
    assert layer.get_config()["factor"] == 3


def test_blank_padding_makes_the_loss_over_the_padded_width_the_real_one():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 9)).astype("float32")
    ids = np.array([[5, 5, 6, 6, 0, 0], [8, 8, 8, 0, 0, 0]], "int32")
    _, outputs = run_layer_test(CTCBlankPadding, {"blank_id": 1}, {"logits": logits, "ids": ids},
                                expected_output_shape=(2, 6, 9), run_training=False)  # fmt: skip
    padded = np.asarray(outputs[0])
    np.testing.assert_array_equal(padded[ids != 0], logits[ids != 0])  # real positions as given
    assert (padded[ids == 0].argmax(-1) == 1).all()
    labels = np.array([[3, 4], [7, 0]], "int32")
    whole = ops.convert_to_numpy(CTCLoss(1, reduction=None)(labels, padded))
    for row, width in enumerate((4, 3)):
        count = int((labels[row] > 0).sum())
        real = ops.ctc_loss(labels[row:row + 1], logits[row:row + 1, :width], [count], [width], 1)
        np.testing.assert_allclose(whole[row], ops.convert_to_numpy(real)[0] / count, rtol=1e-5)


# ---------------------------------------------------------------- the best alignment
def best_alignment_by_enumeration(labels, log_probs, blank=1):
    """The highest-scoring path of symbols that collapses to ``labels``: every path tried."""
    best, best_score = None, -np.inf
    for path in itertools.product(range(log_probs.shape[1]), repeat=len(log_probs)):
        collapsed = [s for s, _ in itertools.groupby(path) if s != blank]
        score = log_probs[np.arange(len(path)), list(path)].sum()
        if collapsed == labels and score > best_score:
            best, best_score = list(path), score
    return best, best_score


def test_the_best_alignment_is_the_best_of_all_paths():
    rng = np.random.default_rng(3)
    log_probs = rng.normal(size=(4, 6, 4)) * 2
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    labels = np.array([[2, 2, 3], [3, 0, 0], [2, 3, 2], [0, 0, 0]])  # a repeat; empty last
    got = ops.convert_to_numpy(ctc_best_alignment(log_probs, labels, blank_id=1))
    for row, (real, probs) in enumerate(zip(labels.tolist(), log_probs)):
        expected, _ = best_alignment_by_enumeration([t for t in real if t], probs)
        assert got[row].tolist() == expected, row


def test_the_best_alignment_goes_through_the_padding_as_blank():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(2, 7, 5)).astype("float32")
    ids = np.array([[5] * 7, [5] * 4 + [0] * 3], "int32")  # sentence 1 has 4 real positions
    padded = np.asarray(CTCBlankPadding(1)(logits, ids))
    log_probs = padded - np.log(np.exp(padded.astype("float64")).sum(-1, keepdims=True))
    labels = np.array([[2, 3, 4], [4, 2, 0]])
    got = ops.convert_to_numpy(ctc_best_alignment(log_probs, labels, blank_id=1))
    expected, _ = best_alignment_by_enumeration([4, 2], log_probs[1, :4])
    assert got[1].tolist() == expected + [1, 1, 1]
    assert got[0].tolist() == best_alignment_by_enumeration([2, 3, 4], log_probs[0])[0]


def test_the_best_alignment_runs_under_xla_on_unknown_lengths():
    rng = np.random.default_rng(5)
    log_probs = np.log(rng.dirichlet(np.ones(5), size=(2, 6))).astype("float32")
    labels = np.array([[2, 3], [4, 0]], "int32")
    eager = ops.convert_to_numpy(ctc_best_alignment(log_probs, labels, blank_id=1))
    spec = [tf.TensorSpec([None, None, 5]), tf.TensorSpec([None, None], tf.int32)]
    xla = tf.function(lambda p, y: ctc_best_alignment(p, y, blank_id=1), jit_compile=True,
                      input_signature=spec)  # fmt: skip
    np.testing.assert_array_equal(xla(log_probs, labels), eager)


def test_positions_needed_count_a_blank_between_equal_labels():
    labels = np.array([[4, 4, 4, 0], [2, 3, 2, 3], [0, 0, 0, 0]])
    assert ops.convert_to_numpy(ctc_positions_needed(labels)).tolist() == [5, 4, 0]
