"""The CTC decoder's layers: the upsampled source and the blank at padding, through the layer
harness and against what they must compute."""

import numpy as np
from keras import ops

from tests.harness import run_layer_test
from zoo.layers import CTCBlankPadding, SourceUpsampling
from zoo.training.losses import CTCLoss

SOURCE = np.array([[5, 6, 7, 0], [8, 0, 0, 0]], "int32")


def test_source_upsampling_repeats_each_token_in_order():
    layer, outputs = run_layer_test(SourceUpsampling, {"factor": 3}, SOURCE,
                                    expected_output_shape=(2, 12), run_training=False)  # fmt: skip
    expected = [[t for t in row for _ in range(3)] for row in SOURCE.tolist()]
    assert np.asarray(outputs[0]).tolist() == expected
    assert layer.get_config()["factor"] == 3


def test_blank_padding_makes_the_loss_over_the_padded_width_the_real_one():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 9)).astype("float32")
    ids = np.array([[5, 5, 6, 6, 0, 0], [8, 8, 8, 0, 0, 0]], "int32")
    _, outputs = run_layer_test(CTCBlankPadding, {"blank_id": 1}, {"logits": logits, "ids": ids},
                                expected_output_shape=(2, 6, 9), run_training=False)  # fmt: skip
    padded = np.asarray(outputs[0])
    np.testing.assert_array_equal(padded[ids != 0], logits[ids != 0])  # real positions as given
    assert (padded[ids == 0].argmax(-1) == 1).all()
    labels = np.array([[3, 4], [7, 0]], "int32")
    whole = ops.convert_to_numpy(CTCLoss(1, reduction=None)(labels, padded))
    for row, width in enumerate((4, 3)):
        count = int((labels[row] > 0).sum())
        real = ops.ctc_loss(labels[row:row + 1], logits[row:row + 1, :width], [count], [width], 1)
        np.testing.assert_allclose(whole[row], ops.convert_to_numpy(real)[0] / count, rtol=1e-5)
