"""Glancing training's layers on hand-worked examples: what is revealed (for a CTC decoder, the
tokens of the best alignment), where the loss counts, the anneal, and nothing at inference."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.harness import run_layer_test
from zoo.layers import AllMasked, CTCBlankPadding, CTCGlancingSampler, GlancingSampler, LossMask
from zoo.training.losses import MaskedSparseCrossEntropy

MASK = 1
TARGET = np.array([[5, 6, 7, 8, 0], [4, 4, 0, 0, 0]], "int32")
# The first pass gets 5 and 8 right and 6, 7 wrong in sentence 0 (2 errors); both right in 1.
FIRST = np.eye(10, dtype="float32")[[[5, 9, 9, 8, 3], [4, 4, 2, 2, 2]]]


def revealed(ids):
    return (np.asarray(ids) == TARGET) & (TARGET > 0)


@pytest.mark.parametrize("ratio, count", [(0.5, 1), (1.0, 2), (0.25, 0)])
def test_it_reveals_the_ratio_of_the_errors(ratio, count):
    keras.utils.set_random_seed(0)
    glance = GlancingSampler(ratio, mask_id=MASK)
    ids, positions = glance(TARGET, FIRST, training=True)
    ids, positions = np.asarray(ids), np.asarray(positions)
    # round(2 * ratio) gold tokens in sentence 0 (round half to even: 0.5 -> 0), none in 1.
    assert revealed(ids)[0].sum() == count and revealed(ids)[1].sum() == 0
    assert (ids[TARGET == 0] == 0).all()  # padding stays padding
    assert (ids[(TARGET > 0) & ~revealed(ids)] == MASK).all()  # the rest masked
    np.testing.assert_array_equal(positions, (TARGET > 0) & ~revealed(ids))
    assert float(glance.step.numpy()) == 1.0


def test_the_revealed_positions_are_drawn_at_random():
    keras.utils.set_random_seed(1)
    glance = GlancingSampler(0.5, mask_id=MASK)
    seen = {tuple(revealed(glance(TARGET, FIRST, training=True)[0])[0]) for _ in range(40)}
    assert len(seen) == 4  # each of the 4 real positions, the right ones too


def test_the_ratio_anneals_linearly_and_nothing_is_revealed_at_inference():
    glance = GlancingSampler(0.5, final_ratio=0.3, anneal_steps=4, mask_id=MASK)
    ratios = []
    for _ in range(6):
        ratios.append(float(glance.current_ratio()))
        glance(TARGET, FIRST, training=True)
    np.testing.assert_allclose(ratios, [0.5, 0.45, 0.4, 0.35, 0.3, 0.3], rtol=1e-6)
    ids, positions = glance(TARGET, FIRST, training=False)
    np.testing.assert_array_equal(ids, np.where(TARGET > 0, MASK, 0))
    np.testing.assert_array_equal(positions, TARGET > 0)
    assert float(glance.step.numpy()) == 6.0  # inference counts no step


def test_the_loss_counts_only_the_positions_not_revealed():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 10)).astype("float32")
    positions = np.array([[1, 0, 1, 1, 0], [0, 1, 0, 0, 0]], bool)
    masked = LossMask()([logits, positions])
    loss = float(MaskedSparseCrossEntropy()(TARGET, masked))
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, TARGET[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss, nll[positions].mean(), rtol=1e-5)


def test_the_layers_pass_the_harness():
    run_layer_test(AllMasked, {"mask_id": MASK}, TARGET, expected_output_shape=(2, 5),
                   run_training=False, run_mixed_precision=False)  # fmt: skip
    run_layer_test(GlancingSampler, {"ratio": 0.5, "mask_id": MASK},
                   {"target": TARGET, "logits": FIRST}, run_training=False)  # fmt: skip
    run_layer_test(LossMask, {}, [FIRST, TARGET > 0], expected_output_shape=(2, 5, 10),
                   run_training=False)  # fmt: skip
    with pytest.raises(ValueError, match="ratio must be in"):
        GlancingSampler(0.0)
    assert ops.convert_to_numpy(AllMasked(MASK)(TARGET)).tolist()[1] == [1, 1, 0, 0, 0]


# ---------------------------------------------------------------- glancing for CTC
# Two sentences upsampled to 6 positions (the second has 4 real ones). The first pass prefers
# token 9 everywhere; under it, the best alignment of 7 8 is 7 _ 8 _ _ _ and of 6 6 is 6 _ 6 _.
IDS = np.array([[5, 5, 6, 6, 4, 4], [3, 3, 2, 2, 0, 0]], "int32")
GOLD = np.array([[7, 8], [6, 6]], "int32")
PATH = np.array([[7, 1, 8, 1, 1, 1], [6, 1, 6, 1, 1, 1]])
CTC_FIRST = (5 * np.eye(10)[[[9] * 6] * 2] + 2 * np.eye(10)[PATH]).astype("float32")


@pytest.mark.parametrize("ratio, count", [(1.0, 6), (0.5, 3)])
def test_ctc_glancing_reveals_the_aligned_gold_at_the_ratio_of_the_errors(ratio, count):
    keras.utils.set_random_seed(0)
    first = np.asarray(CTCBlankPadding(MASK)(CTC_FIRST, IDS))  # padding: the blank, right
    glance = CTCGlancingSampler(ratio, mask_id=MASK)
    ids = np.asarray(glance(IDS, GOLD, first, training=True))
    changed = ids != IDS
    # Sentence 0: all 6 positions wrong; sentence 1: its 4 real ones (round half to even).
    assert changed[0].sum() == count and changed[1].sum() == round(4 * ratio)
    np.testing.assert_array_equal(ids[changed], PATH[changed])  # the aligned token or blank
    assert (ids[IDS == 0] == 0).all() and float(glance.step.numpy()) == 1.0
    np.testing.assert_array_equal(glance(IDS, GOLD, first, training=False), IDS)


def test_ctc_glancing_reveals_nothing_where_no_alignment_fits():
    gold = np.array([[7, 7, 7, 7], [6, 6, 0, 0]], "int32")  # 7 positions needed; 3 fit in 4
    ids = np.asarray(CTCGlancingSampler(1.0, mask_id=MASK)(IDS, gold, CTC_FIRST, training=True))
    np.testing.assert_array_equal(ids[0], IDS[0])
    assert (ids[1] != IDS[1]).sum() == 4


def test_ctc_glancing_passes_the_harness():
    run_layer_test(CTCGlancingSampler, {"ratio": 0.5, "mask_id": MASK},
                   {"ids": IDS, "target": GOLD, "logits": CTC_FIRST}, expected_output_shape=(2, 6),
                   run_training=False, run_mixed_precision=False)  # fmt: skip
