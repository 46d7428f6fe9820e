"""Monotonic attention decoding (``monotonic_window`` of the translator's step)."""

import numpy as np
import pytest

from tests.decoding.common import assert_pad_only_after_eos, numpy
from zoo.data import BOS_ID
from zoo.decoding import beam_search, greedy_search
from zoo.models.translator import encode, init_caches, step, step_and_caches


def _teacher_forced(sources, length=6):
    target_in = np.random.default_rng(0).integers(4, 20, size=(len(sources), length))
    target_in[:, 0] = BOS_ID
    return target_in.astype("int32")


def _run(model, sources, window, memory=None):
    """Teacher-forced steps; the logits and the attention positions of every step."""
    encoded, padding = encode(model, sources)
    memory = encoded if memory is None else memory
    monotonic = window is not None
    caches = init_caches(model, memory, padding, max_length=8, monotonic=monotonic)
    all_logits, positions = [], []
    for t, token in enumerate(_teacher_forced(sources).T):
        logits, caches = step(model, token[:, None], caches, t, monotonic_window=window)
        all_logits.append(numpy(logits))
        if monotonic:
            positions.append(numpy(caches["attention_position"]))
    return np.stack(all_logits, 1), np.array(positions).T  # (B, T, V), (B, T)


def test_the_first_step_with_a_window_over_the_whole_source_is_the_plain_step(
    copy_model, sources
):
    """At the first step the window starts at 0; as wide as the source it hides nothing (after
    it, positions behind the attention's peak are hidden: no window gives the plain model)."""
    plain, _ = _run(copy_model, sources, None)
    wide, _ = _run(copy_model, sources, sources.shape[1])
    np.testing.assert_allclose(wide[:, 0], plain[:, 0], atol=1e-5)


def test_the_attention_moves_forward_within_the_window(copy_model, sources):
    logits, positions = _run(copy_model, sources, 2)
    last_real = (sources != 0).sum(1) - 1
    previous = np.zeros(len(sources), "int64")
    for t in range(positions.shape[1]):
        start = np.minimum(previous, last_real)
        assert ((positions[:, t] >= start) & (positions[:, t] < start + 2)).all(), (t, positions)
        previous = positions[:, t]
    plain, _ = _run(copy_model, sources, None)
    assert not np.allclose(logits, plain, atol=1e-3)  # the window does constrain


def test_the_source_outside_the_window_is_not_seen(copy_model, sources):
    """At the first step the window is positions 0 and 1: noise anywhere after them in the
    encoder output moves nothing."""
    memory, _ = encode(copy_model, sources)
    noise = np.random.default_rng(0).normal(size=memory.shape).astype("float32") * 10
    noisy = np.concatenate([numpy(memory)[:, :2], noise[:, 2:]], axis=1)
    clean, _ = _run(copy_model, sources, 2)
    moved, _ = _run(copy_model, sources, 2, memory=noisy)
    np.testing.assert_allclose(moved[:, 0], clean[:, 0], atol=1e-5)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_searches_run_with_it(copy_model, sources, search):
    """Greedy and beam search carry the attention position (beam search reorders it with the
    beams) and stop at EOS as usual."""
    step_fn, caches = step_and_caches(copy_model, sources, max_length=8, monotonic_window=2)
    ids = search(step_fn, caches, max_length=8)
    ids = numpy(ids[0] if search is beam_search else ids)
    assert ids.shape == (len(sources), 8)
    assert_pad_only_after_eos(ids)


def test_bad_settings_are_refused(copy_model, sources):
    memory, padding = encode(copy_model, sources)
    caches = init_caches(copy_model, memory, padding, max_length=4)
    bos = np.full((len(sources), 1), BOS_ID, "int32")
    with pytest.raises(ValueError, match="init_caches\\(monotonic=True\\)"):
        step(copy_model, bos, caches, 0, monotonic_window=2)
    caches = init_caches(copy_model, memory, padding, max_length=4, monotonic=True)
    with pytest.raises(ValueError, match="monotonic_window must be a positive"):
        step(copy_model, bos, caches, 0, monotonic_window=0)
