"""CTC decoding: the collapse against a plain Python one, eagerly and under XLA."""

import itertools

import numpy as np
import tensorflow as tf
from keras import ops

from zoo.decoding.ctc import ctc_collapse, ctc_greedy

BLANK = 1


def reference(row):
    """Merge runs, drop blanks and padding, pad with 0: CTC's collapse written out."""
    tokens = [token for token, _ in itertools.groupby(row) if token not in (BLANK, 0)]
    return tokens + [0] * (len(row) - len(tokens))


def test_the_collapse_equals_the_reference_on_random_alignments():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 5, size=(64, 12))  # many runs, blanks (1) and pads (0)
    expected = [reference(row) for row in tokens.tolist()]
    assert ops.convert_to_numpy(ctc_collapse(tokens, BLANK)).tolist() == expected
    xla = tf.function(lambda t: ctc_collapse(t, BLANK), jit_compile=True)
    assert np.asarray(xla(tf.constant(tokens, tf.int32))).tolist() == expected


def test_a_repeat_across_a_blank_is_two_tokens():
    collapsed = ops.convert_to_numpy(ctc_collapse([[4, 4, 1, 4, 0]], BLANK)).tolist()
    assert collapsed == [[4, 4, 0, 0, 0]]
    assert ops.convert_to_numpy(ctc_collapse([[1, 1, 0]], BLANK)).tolist() == [[0, 0, 0]]


def test_greedy_is_the_collapse_of_the_best_path():
    logits = np.log(np.array([[[.1, .1, .8], [.1, .1, .8], [.1, .8, .1], [.1, .1, .8]]]))
    assert ops.convert_to_numpy(ctc_greedy(logits, BLANK)).tolist() == [[2, 2, 0, 0]]
