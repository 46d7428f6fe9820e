"""Loops whose count is known only when the graph runs, that TensorFlow, XLA and JAX all run."""

import keras
from keras import ops


def bounded_loop(count, body, carry):
    """``carry = body(i, carry)`` for ``i = 0 .. count - 1``, as one ``while_loop``.

    The loop carries ``count`` as its bound (``maximum_iterations``), which TensorFlow's gradient
    of a loop inside an XLA program needs and Keras's ``scan`` and ``fori_loop`` do not give.
    JAX cannot differentiate a ``while_loop``: differentiate this on TensorFlow only, or write
    its gradient out.

    Args:
        count: int or scalar int tensor, the number of iterations.
        body: ``body(i, carry) -> carry``, ``i`` a scalar int32 tensor.
        carry: the initial carry (a tensor or a tuple of tensors).

    Returns:
        The last carry.

    Example:
        >>> int(bounded_loop(4, lambda i, total: total + i, ops.zeros((), "int32")))
        6
    """
    count = ops.convert_to_tensor(count, "int32")

    def step(i, carry):
        return i + 1, body(i, carry)

    _, carry = ops.while_loop(lambda i, _: i < count, step, (ops.zeros((), "int32"), carry),
                              maximum_iterations=count)  # fmt: skip
    return carry


def scan_over_time(step, init, *sequences):
    """``ops.scan`` of ``step(carry, *x_t)`` over axis 1 of each ``(B, T, ...)`` sequence.

    It scans over the time indices and gathers each ``x_t`` inside the step: Keras's TensorFlow
    scan fails on several sequences of unknown static length (variable-length batches in ``fit``).
    """
    time_major = [ops.moveaxis(x, 1, 0) for x in sequences]  # (T, B, ...)

    def body(carry, t):
        return step(carry, *(ops.take(x, t, axis=0) for x in time_major))

    return ops.scan(body, init, ops.arange(ops.shape(sequences[0])[1], dtype="int32"))


def fold_over_time(step, init, *sequences):
    """The carry after ``step(carry, *x_t)`` at each t of the ``(B, T, ...)`` sequences, in order:
    a forward algorithm's sum (a CRF's partition, a CTC loss) that training differentiates.

    On TensorFlow it is a loop bounded by T (:func:`bounded_loop`), without which its gradient
    does not compile under XLA; JAX cannot differentiate a ``while_loop``, so there it is a
    ``scan``.

    Example:
        >>> float(fold_over_time(lambda total, x: total + x, ops.zeros((1,)), ops.ones((1, 3)))[0])
        3.0
    """
    if keras.backend.backend() != "tensorflow":
        carry, _ = scan_over_time(lambda c, *x: (step(c, *x), None), init, *sequences)
        return carry
    time_major = [ops.moveaxis(x, 1, 0) for x in sequences]  # (T, B, ...)
    return bounded_loop(
        ops.shape(sequences[0])[1],
        lambda t, carry: step(carry, *(ops.take(x, t, axis=0) for x in time_major)),
        init,
    )


def scan_carries(step, init, sequence):
    """Every carry of ``carry = step(carry, x_t)`` over axis 0 of ``sequence`` ``(T, ...)``:
    ``(T,) + carry.shape``, differentiable on TensorFlow (under XLA too) and on JAX.

    On TensorFlow a :func:`bounded_loop` adds each carry into its row of a buffer (Keras's
    ``scan`` gives no loop bound, which a gradient under XLA needs, and XLA's in-place update
    has no gradient: the row is written as a masked sum, ``T`` times the work of a write,
    which the small alignments this serves can afford); on JAX, whose ``while_loop`` has no
    gradient, it is ``ops.scan``.

    Example:
        >>> ops.convert_to_numpy(scan_carries(lambda c, x: c + x, ops.zeros(()), ops.ones(3)))
        array([1., 2., 3.], dtype=float32)
    """
    if keras.backend.backend() != "tensorflow":
        _, carries = ops.scan(lambda carry, x: (step(carry, x),) * 2, init, sequence)
        return carries
    init = ops.convert_to_tensor(init)
    count = ops.shape(sequence)[0]
    buffer = ops.zeros((count,) + tuple(ops.shape(init)), init.dtype)

    rows = ops.reshape(ops.arange(count, dtype="int32"), (-1,) + (1,) * len(init.shape))

    def body(t, state):
        carry, buffer = state
        carry = step(carry, ops.take(sequence, t, axis=0))
        return carry, buffer + ops.where(rows == t, carry[None], ops.zeros_like(carry[None]))

    _, carries = bounded_loop(count, body, (init, buffer))
    return carries
