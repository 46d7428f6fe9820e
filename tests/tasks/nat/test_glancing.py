"""Glancing training of the NAT through the one train(): the model masks its gold input,
reveals gold tokens in training only, counts the loss on the rest, and decodes as a CMLM."""

import numpy as np
import pytest
import tensorflow as tf
from keras.src.backend import get_keras_mask

from tests.tasks.nat.training import TASK, train_tiny_nat
from zoo.data import load_multi30k
from zoo.models.nat import MASK_ID, get_config, nat_modes
from zoo.tasks import load, translate
from zoo.training.losses import MaskedSparseCrossEntropy


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    # No BLEU: the validation decoding of a CMLM is test_task.py's.
    return train_tiny_nat(tmp_path_factory, "glat", seed=3, bleu_sample_size=0,
                          glancing_ratio=0.5, glancing_ratio_end=0.3,
                          glancing_anneal_steps=20)  # fmt: skip


def test_it_trains_anneals_and_decodes_as_a_cmlm(trained):
    model, history, tokenizer, workdir, _ = trained
    losses = history.history["tokens_loss"]
    assert losses[1] < losses[0]
    glance = model.get_layer("glancing")
    assert float(glance.step.numpy()) >= 20
    assert float(glance.current_ratio()) == pytest.approx(0.3)
    assert nat_modes(model).refines and nat_modes(model).predicts_length
    sentences = ["A dog runs.", "Two men are talking."]
    # It decodes by Mask-Predict, reading masks where training read gold tokens.
    assert len(translate(model, tokenizer, sentences, iterations=4, length_beam=3)) == 2
    # The saved model is this one (its modes and weights), so it decodes the same.
    reloaded = load(workdir).model
    assert nat_modes(reloaded) == nat_modes(model)
    for got, weights in zip(reloaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(got, weights)


@pytest.fixture(scope="module")
def batch(trained):
    _, _, tokenizer, _, config = trained
    return next(iter(TASK.dataset(config, tokenizer, load_multi30k("val")[:8], training=True)))


def test_the_data_give_the_gold_target_and_every_label(batch):
    features, labels = batch
    np.testing.assert_array_equal(features["target_in"], labels["tokens"])
    assert (features["target_in"].numpy() != MASK_ID).all()


def test_the_loss_counts_the_positions_not_revealed(trained, batch):
    model, _, _, _, config = trained
    features, labels = batch
    logits = model(features, training=True)["tokens"]
    positions = np.asarray(get_keras_mask(logits))
    real = features["target_in"].numpy() > 0
    assert not positions[~real].any() and positions.sum() < real.sum()  # some were revealed
    loss = MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing)
    log_p = tf.nn.log_softmax(logits).numpy()
    gold = labels["tokens"].numpy()
    nll = -np.take_along_axis(log_p, gold[..., None], -1)[..., 0]
    smooth = -log_p.mean(-1)
    e = config.label_smoothing
    np.testing.assert_allclose(float(loss(gold, logits)),
                               ((1 - e) * nll + e * smooth)[positions].mean(), rtol=1e-4)  # fmt: skip
    # At inference the model reads an all-masked target: nothing is revealed.
    logits = model(features, training=False)["tokens"]
    np.testing.assert_array_equal(np.asarray(get_keras_mask(logits)), real)


def test_glancing_needs_input_tokens():
    with pytest.raises(ValueError, match="Glancing training reveals gold tokens"):
        get_config("tiny", glancing_ratio=0.5, decoder_input="copy")
    assert get_config("tiny", glancing_ratio=0.5, decoder="ctc").decoder == "ctc"
    with pytest.raises(ValueError, match="glancing_ratio_end must be in"):
        get_config("tiny", glancing_ratio=0.5, glancing_ratio_end=1.5)
