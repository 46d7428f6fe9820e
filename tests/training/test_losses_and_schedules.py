import keras
import numpy as np
import pytest

from zoo.training import InverseSquareRootSchedule, MaskedSparseCrossEntropy, get_strategy


def _reference_loss(labels, logits, smoothing, pad_id=0):
    """Label-smoothed cross entropy written out per token, averaged over real tokens."""
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[b, t] == pad_id:
                continue
            z = logits[b, t] - logits[b, t].max()
            log_p = z - np.log(np.exp(z).sum())
            target = np.full(z.shape, smoothing / z.size)
            target[labels[b, t]] += 1.0 - smoothing
            total += -(target * log_p).sum()
            count += 1
    return total / count


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_equals_the_formula_and_ignores_padding(smoothing):
    rng = np.random.default_rng(0)
    labels = np.array([[4, 2, 7, 0, 0], [1, 3, 0, 0, 0]])
    logits = rng.normal(size=(2, 5, 9)).astype("float32")
    loss = MaskedSparseCrossEntropy(label_smoothing=smoothing)
    # Keras divides by the real tokens through the implicit mask of the logits.
    masked_logits = keras.ops.convert_to_tensor(logits)
    masked_logits._keras_mask = keras.ops.convert_to_tensor(labels != 0)
    got = float(loss(labels, masked_logits))
    np.testing.assert_allclose(got, _reference_loss(labels, logits, smoothing), rtol=1e-5)
    # Changing the logits at padded positions changes nothing.
    noisy = logits.copy()
    noisy[labels == 0] += 100.0
    noisy_logits = keras.ops.convert_to_tensor(noisy)
    noisy_logits._keras_mask = keras.ops.convert_to_tensor(labels != 0)
    np.testing.assert_allclose(float(loss(labels, noisy_logits)), got, rtol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_mean_over_labels_ignores_the_real_tokens_without_a_label(smoothing):
    """A masked language model labels a few of the real tokens: its loss is their mean, whatever
    the implicit mask (every real target token) says."""
    rng = np.random.default_rng(1)
    labels = np.array([[4, 0, 7, 0, 0], [0, 3, 0, 0, 0]])  # the masked positions only
    real = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], bool)
    logits = keras.ops.convert_to_tensor(rng.normal(size=(2, 5, 9)).astype("float32"))
    logits._keras_mask = keras.ops.convert_to_tensor(real)
    loss = MaskedSparseCrossEntropy(label_smoothing=smoothing, mean_over="labels")
    got = float(loss(labels, logits))
    want = _reference_loss(labels, keras.ops.convert_to_numpy(logits), smoothing)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    tokens = float(MaskedSparseCrossEntropy(label_smoothing=smoothing)(labels, logits))
    np.testing.assert_allclose(tokens, want * 3 / real.sum(), rtol=1e-5)  # the default's mean


def test_loss_config_round_trip_and_bad_smoothing():
    loss = MaskedSparseCrossEntropy(label_smoothing=0.2, pad_id=3, mean_over="labels")
    clone = MaskedSparseCrossEntropy.from_config(loss.get_config())
    assert (clone.label_smoothing, clone.pad_id, clone.mean_over) == (0.2, 3, "labels")
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCrossEntropy(label_smoothing=1.0)
    with pytest.raises(ValueError, match="mean_over must be"):
        MaskedSparseCrossEntropy(mean_over="batch")


def test_inverse_square_root_schedule():
    schedule = InverseSquareRootSchedule(1e-3, warmup_steps=100)
    values = {step: float(schedule(step)) for step in (1, 50, 100, 400, 10000)}
    np.testing.assert_allclose(values[50], 5e-4, rtol=1e-6)  # linear warm-up
    np.testing.assert_allclose(values[100], 1e-3, rtol=1e-6)  # the peak
    np.testing.assert_allclose(values[400], 5e-4, rtol=1e-6)  # 1/sqrt decay
    np.testing.assert_allclose(values[10000], 1e-4, rtol=1e-6)
    clone = InverseSquareRootSchedule.from_config(schedule.get_config())
    assert float(clone(400)) == values[400]
    # Under gradient accumulation it counts updates: steps 800 and 801 are the 400th update.
    per_two = InverseSquareRootSchedule.from_config(
        InverseSquareRootSchedule(1e-3, warmup_steps=100, steps_per_update=2).get_config()
    )
    assert float(per_two(800)) == float(per_two(801)) == values[400]
    with pytest.raises(ValueError, match="steps_per_update must be >= 1"):
        InverseSquareRootSchedule(1e-3, 100, steps_per_update=0)


def test_strategy_by_name():
    import tensorflow as tf

    # No GPU here: the default strategy (no multi-device iterator, see get_strategy).
    assert get_strategy("auto") is tf.distribute.get_strategy()
    assert isinstance(get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
    assert isinstance(get_strategy("mirrored"), tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match="Unknown strategy"):
        get_strategy("horovod")
