"""Reference computations shared by the decoding tests."""

import functools

import numpy as np
from keras import ops

from zoo.data import BOS_ID, EOS_ID, PAD_ID
from zoo.models.translator import encode, full_logits, init_caches, step


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def lengths(ids, eos_id=EOS_ID):
    """The length of each generated row: through its first EOS, else the whole row."""
    ids = np.asarray(ids)
    out = []
    for row in ids:
        eos = np.flatnonzero(row == eos_id)
        out.append(eos[0] + 1 if len(eos) else len(row))
    return np.array(out)


def log_probability(model, source_ids, ids):
    """Sum of log p(token) of each row of ``ids`` (through its EOS), from the full model.

    The padding id is forbidden, as in the searches: its probability mass is removed.
    """
    ids = np.asarray(ids, "int32")
    batch, length = ids.shape
    target_in = np.concatenate([np.full((batch, 1), BOS_ID, "int32"), ids[:, :-1]], axis=1)
    logits = numpy(full_logits(model, source_ids, target_in)).astype("float64")
    logits[..., PAD_ID] = -np.inf
    shifted = logits - logits.max(-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))  # (B, L, V)
    token_log_p = np.take_along_axis(log_p, ids[..., None], axis=-1)[..., 0]  # (B, L)
    n = lengths(ids)
    return np.array([token_log_p[b, : n[b]].sum() for b in range(batch)])


def gnmt_penalty(length, alpha):
    return ((5.0 + np.asarray(length, "float64")) / 6.0) ** alpha


def assert_pad_only_after_eos(ids, eos_id=EOS_ID):
    """Rows are tokens, then (only after an EOS) nothing but PAD; no PAD before it."""
    for row in np.asarray(ids):
        eos = np.flatnonzero(row == eos_id)
        end = eos[0] + 1 if len(eos) else len(row)
        assert np.all(row[:end] != PAD_ID), row
        assert np.all(row[end:] == PAD_ID), row


def counting(step):
    """``step``, counting its calls in ``.calls``: the decoder steps of an eager loop."""

    def counted(*args, **kwargs):
        counted.calls += 1
        return step(*args, **kwargs)

    counted.calls = 0
    return counted


def assert_steps_equal_the_full_model(model, source_ids, target_in, max_length=8, xla=False):
    """Teacher-forced, step by step with the caches (``xla``: each step compiled), the
    translator gives the full forward pass's logits at every position.

    Returns:
        The initial caches of :func:`~zoo.models.translator.init_caches`.
    """
    import tensorflow as tf  # the XLA compile of the step; tests run on TensorFlow

    expected = numpy(full_logits(model, source_ids, target_in))  # (B, T, V)
    step_fn = functools.partial(step, model)
    if xla:
        step_fn = tf.function(step_fn, jit_compile=True)
    memory, padding = encode(model, source_ids)
    caches = first = init_caches(
        model, memory, padding, max_length=max_length, source_ids=source_ids
    )
    for t in range(target_in.shape[1]):
        logits, caches = step_fn(target_in[:, t : t + 1], caches, tf.constant(t))
        assert logits.dtype == "float32" and tuple(logits.shape) == expected[:, t].shape
        np.testing.assert_allclose(numpy(logits), expected[:, t], atol=1e-4, rtol=1e-4)
    return first
