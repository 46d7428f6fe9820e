import doctest

import numpy as np
import tensorflow as tf

from zoo.layers import loops
from zoo.layers.loops import bounded_loop


def test_a_loop_of_unknown_count_is_differentiated_under_xla():
    """The gradient of x * 2**n through n iterations, n known only when the graph runs."""

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec(()), tf.TensorSpec((), tf.int32)])
    def value_and_gradient(x, count):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = bounded_loop(count, lambda i, carry: carry * 2.0, x)
        return y, tape.gradient(y, x)

    y, gradient = value_and_gradient(tf.constant(1.5), tf.constant(3))
    np.testing.assert_allclose([y, gradient], [12.0, 8.0])


def test_docstring_examples_run():
    result = doctest.testmod(loops, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
