import doctest

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import GuidedAttention
from zoo.layers import guided_attention as guided_attention_module
from zoo.layers.guided_attention import diagonal_penalty, guided_attention_loss

RNG = np.random.default_rng(0)
B, N, T, S = 3, 2, 5, 6
TARGET_IDS = np.array([[2, 5, 6, 7, 8], [2, 5, 0, 0, 0], [2, 9, 9, 9, 0]], "int32")
SOURCE_IDS = np.array([[4, 4, 4, 4, 4, 4], [7, 7, 7, 0, 0, 0], [5, 6, 0, 0, 0, 0]], "int32")
LOGITS = RNG.normal(size=(B, N, T, S))
ATTENTION = (np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)).astype("float32")
ALIGNMENT = np.eye(T, S, dtype="float32")[None].repeat(B, 0)


def _reference_penalty(target_ids, source_ids, sigma):
    """Tachibana et al.'s W, cell by cell, with each sentence's real lengths."""
    w = np.zeros(target_ids.shape + source_ids.shape[1:])
    for b in range(len(target_ids)):
        tl, sl = (target_ids[b] != 0).sum(), (source_ids[b] != 0).sum()
        for t in range(tl):
            for s in range(sl):
                w[b, t, s] = 1 - np.exp(-((s / sl - t / tl) ** 2) / (2 * sigma**2))
    return w


def _reference_loss(attention, target_ids, source_ids, sigma, alignment=None):
    total, count = 0.0, 0
    prior = _reference_penalty(target_ids, source_ids, sigma)
    for b in range(len(target_ids)):
        for head in range(attention.shape[1]):
            for t in np.flatnonzero(target_ids[b]):
                a = attention[b, head, t]
                if alignment is None:
                    total += (a * prior[b, t]).sum()
                else:
                    total += -(alignment[b, t] * np.log(np.maximum(a, 1e-9))).sum()
                count += 1
    return total / count


def test_the_penalty_follows_its_definition():
    got = diagonal_penalty(TARGET_IDS != 0, SOURCE_IDS != 0, sigma=0.3)
    expected = _reference_penalty(TARGET_IDS, SOURCE_IDS, 0.3)
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-6)


@pytest.mark.parametrize("alignment", [None, ALIGNMENT], ids=["diagonal", "alignment"])
def test_the_loss_follows_its_definition(alignment):
    got = guided_attention_loss(
        [ATTENTION, ATTENTION[:, ::-1]], TARGET_IDS != 0, SOURCE_IDS != 0, 0.2, alignment
    )
    expected = np.mean([
        _reference_loss(a, TARGET_IDS, SOURCE_IDS, 0.2, alignment)
        for a in (ATTENTION, ATTENTION[:, ::-1])
    ])  # fmt: skip
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_the_loss_is_added_in_training_only_and_fades_with_the_steps():
    layer = GuidedAttention(weight=2.0, decay=0.5)
    outputs = RNG.normal(size=(B, T, 7)).astype("float32")
    passed = layer(outputs, [ATTENTION], TARGET_IDS, SOURCE_IDS)  # inference
    np.testing.assert_array_equal(np.asarray(passed), outputs)
    assert layer.losses == [] and float(layer.step) == 0
    expected = _reference_loss(ATTENTION, TARGET_IDS, SOURCE_IDS, 0.2)
    for step in range(2):
        layer(outputs, [ATTENTION], TARGET_IDS, SOURCE_IDS, training=True)
        assert float(layer.losses[-1]) == pytest.approx(2.0 * 0.5**step * expected, rel=1e-5)
    assert float(layer.step) == 2


def test_the_layer_contract():
    run_layer_test(
        GuidedAttention,
        {"weight": 0.5, "decay": 0.99, "sigma": 0.3},
        {
            "outputs": RNG.normal(size=(B, T, 7)).astype("float32"),
            "attention": ATTENTION,
            "target_ids": TARGET_IDS,
            "source_ids": SOURCE_IDS,
        },
        expected_output_shape=(B, T, 7),
        run_training=False,
    )


@pytest.mark.parametrize("kwargs", [{"weight": -1.0}, {"decay": 0.0}, {"sigma": 0.0}])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match="GuidedAttention needs"):
        GuidedAttention(**kwargs)


def test_docstring_examples_run():
    globs = {"keras": keras, "ops": keras.ops}
    assert doctest.testmod(guided_attention_module, extraglobs=globs).failed == 0
