"""MaskedAccuracy: argmax accuracy in which every real token counts once, across batches."""

import doctest

import keras
import numpy as np

from zoo.training import metrics
from zoo.training.metrics import MaskedAccuracy


def test_every_real_token_counts_once_across_batches_of_different_lengths():
    rng = np.random.default_rng(0)
    inputs = keras.Input((None,), dtype="int32")
    logits = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)  # carries the padding mask
    model = keras.Model(inputs, logits)
    metric, right, total = MaskedAccuracy(), 0, 0
    for batch, length in ((2, 9), (5, 3)):
        ids = rng.integers(1, 10, size=(batch, length))
        ids[0, length // 2 :] = 0  # padding
        tags = rng.integers(0, 4, size=(batch, length))
        y_pred = model(ids)
        metric.update_state(tags, y_pred)
        real = ids != 0
        right += int(((np.argmax(np.asarray(y_pred), -1) == tags) & real).sum())
        total += int(real.sum())
    np.testing.assert_allclose(float(metric.result()), right / total, rtol=1e-6)


def test_docstring_example_runs():
    assert doctest.testmod(metrics).failed == 0
