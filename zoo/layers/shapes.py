"""Shapes for reshapes that cost no graph ops where the sizes are static."""

from keras import ops

__all__ = ["leading_axes"]


def leading_axes(x):
    """The shape of ``x`` without its last axis, for a reshape: ``(B, T)`` of ``(B, T, D)``.

    The first axis is -1 when the others are static ints above 0, so that the reshape needs no
    shape op (a decoding loop in TensorFlow's graph mode runs each at every step).
    """
    shape = tuple(ops.shape(x)[:-1])
    rest = shape[1:]
    if all(isinstance(size, int) and size > 0 for size in rest):
        return (-1,) + rest
    return shape
