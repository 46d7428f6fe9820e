"""Gradient accumulation (``gradient_accumulation_steps``): N small batches make one update,
the update of one batch N times their size."""

import keras
import numpy as np
import pytest

from zoo.tasks import get_task

VOCAB = 40


def _compiled(steps):
    # No dropout; clipping (to norm 1) applies to the mean gradient, as to the union's.
    task = get_task("translator")
    config = task.get_config("tiny", vocab_size=VOCAB, max_length=8, dropout=0.0,
                             attention_dropout=0.0, activation_dropout=0.0, clipnorm=1.0,
                             learning_rate=1e-3, warmup_steps=1,
                             gradient_accumulation_steps=steps)  # fmt: skip
    keras.utils.set_random_seed(0)
    model = task.build_model(config)
    task.compile_model(model, config)
    # Its variables (the accumulators too) before the first step, as train() makes them: made
    # inside it, they would have TensorFlow trace that step twice.
    model.optimizer.build(model.trainable_variables)
    return model


def _batch(rng, rows):
    # Every token real (no padding), so the mean loss over two equal batches is the mean of
    # their two means.
    source = rng.integers(4, VOCAB, size=(rows, 6)).astype("int32")
    target = rng.integers(4, VOCAB, size=(rows, 7)).astype("int32")
    return {"source": source, "target_in": target[:, :-1]}, target[:, 1:]


def test_accumulated_batches_make_the_updates_of_their_unions():
    rng = np.random.default_rng(0)
    batches = [_batch(rng, 4) for _ in range(4)]
    unions = [
        ({k: np.concatenate([a[0][k], b[0][k]]) for k in a[0]}, np.concatenate([a[1], b[1]]))
        for a, b in (batches[:2], batches[2:])
    ]

    plain = _compiled(1)
    start = [w.copy() for w in plain.get_weights()]
    for union in unions:
        plain.train_on_batch(*union)

    accumulating = _compiled(2)
    np.testing.assert_array_equal(accumulating.get_weights()[0], start[0])  # same start
    accumulating.train_on_batch(*batches[0])
    for before, after in zip(start, accumulating.get_weights()):
        np.testing.assert_array_equal(before, after)  # the first batch only accumulates
    for batch in batches[1:]:
        accumulating.train_on_batch(*batch)
    assert int(accumulating.optimizer.iterations) == 2 == int(plain.optimizer.iterations)
    moved = 0
    for expected, got, before in zip(plain.get_weights(), accumulating.get_weights(), start):
        # Float rounding (two means against one) only: 1% of one update (the peak rate 1e-3).
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        moved += not np.allclose(got, before)
    assert moved > 10  # the updates did happen


def test_fewer_than_one_step_is_refused():
    with pytest.raises(ValueError, match="gradient_accumulation_steps must be at least 1"):
        _compiled(0)
