"""The NAT's CTC decoder end to end: it trains through the one train() (with glancing: one run
for both), decodes in one pass (the best alignment, collapsed) as the hand-written composition
does, and serves the same outputs; without glancing, its training steps alone."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.tasks.nat.training import TASK, train_tiny_nat
from zoo.artifacts import serving_path
from zoo.data import load_multi30k
from zoo.decoding.ctc import ctc_greedy
from zoo.models.nat import MASK_ID, ctc_logits, nat_counts, nat_modes, nat_source_positions
from zoo.tasks import load, translate

SENTENCES = ["A dog runs.", "Two men are talking in the street.", "", "Red car."]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    # Glancing changes what training reads, not the CTC loss, the search or the export: one
    # run tests both (a training of a CTC decoder without it: the last test).
    return train_tiny_nat(tmp_path_factory, "ctc", seed=7, sentences=400, decoder="ctc",
                          ctc_upsample=3, glancing_ratio=0.5, glancing_ratio_end=0.3,
                          glancing_anneal_steps=10)  # fmt: skip


def test_it_trains_on_the_ctc_loss(trained):
    model, history, _, _, _ = trained
    losses = history.history["loss"]
    assert len(losses) == 2 and losses[1] < losses[0] and np.isfinite(losses).all()
    assert "val_bleu" in history.history  # validation decodes in one pass
    assert nat_modes(model).ctc_upsample == 3 and nat_source_positions(model) == 16
    assert set(model.output) == {"tokens"}


def test_the_one_pass_is_the_collapsed_best_alignment(trained):
    model, _, tokenizer, _, _ = trained
    ids = tokenizer.tokenize(tf.constant(SENTENCES)).to_tensor()[:, :nat_source_positions(model)]
    by_hand = []
    for row, tokens in zip(ctc_greedy(ctc_logits(model, ids), MASK_ID).numpy(), ids.numpy()):
        by_hand.append(tokenizer.detokenize(row[None]).numpy()[0].decode() if tokens.any() else "")
    assert translate(model, tokenizer, SENTENCES) == by_hand
    assert nat_counts(model) == (1, 1)
    with pytest.raises(ValueError, match="iterations=2: a CTC decoder decodes in one pass"):
        translate(model, tokenizer, SENTENCES, iterations=2)
    with pytest.raises(ValueError, match="length_beam=2: a CTC decoder's length"):
        translate(model, tokenizer, SENTENCES, length_beam=2)


def test_its_outputs_are_not_all_empty(trained):
    # The comparison above is between real outputs, not between empty strings.
    model, _, tokenizer, _, _ = trained
    assert sum(bool(text) for text in translate(model, tokenizer, SENTENCES)) >= 2


def test_ctc_with_glancing_trains_on_the_gold_target_and_decodes_in_one_pass(trained):
    model, _, tokenizer, workdir, config = trained
    assert set(model.input) == {"source", "target_in"}
    glance = model.get_layer("glancing")
    assert float(glance.step.numpy()) >= 10 and float(glance.current_ratio()) == pytest.approx(0.3)
    # The saved model is this one (its modes and weights), so it decodes the same
    # (before a training call below moves the glancing step).
    reloaded = load(workdir).model
    assert nat_modes(reloaded) == nat_modes(model)
    for got, weights in zip(reloaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(got, weights)
    features, labels = next(iter(TASK.dataset(config, tokenizer, load_multi30k("val")[:8], True)))
    np.testing.assert_array_equal(features["target_in"], labels["tokens"])
    # Outside training the gold target changes nothing: the model is the one pass.
    whole = model(features, training=False)["tokens"]
    np.testing.assert_allclose(ctc_logits(model, features["source"]), whole, atol=1e-5)
    # In training some positions read aligned gold tokens: the logits differ.
    assert not np.allclose(model(features, training=True)["tokens"], whole, atol=1e-3)
    # The one export of a CTC model: its search reads the CTC layers only (glancing is
    # training's), so this one serves as a CTC model trained without it would.
    expected = translate(model, tokenizer, SENTENCES)
    assert sum(bool(text) for text in expected) >= 2  # real outputs compared
    served = tf.saved_model.load(serving_path(TASK.export(model, tokenizer, workdir + "/out")))
    inputs = tf.constant(SENTENCES)
    for name, extra in (("serving_default", {}), ("translate_xla", {}),
                        ("translate_refined", {"iterations": tf.constant(4),
                                               "length_beam": tf.constant(3)})):  # fmt: skip
        outputs = served.signatures[name](inputs=inputs, **extra)["translations"].numpy()
        assert [text.decode() for text in outputs] == expected, name


def test_without_glancing_it_reads_the_source_alone_and_trains_on_the_ctc_loss(trained):
    """Its parts, small: the model of the source alone is the one pass, and steps on a batch
    of its data (the source alone: tests/models/test_nat_objectives.py) lower the CTC loss."""
    _, _, tokenizer, _, config = trained
    config = dataclasses.replace(config, glancing_ratio=0.0, glancing_ratio_end=None)
    keras.utils.set_random_seed(7)
    model = TASK.compile_model(TASK.build_model(config), config)
    assert set(model.input) == {"source"} and set(model.output) == {"tokens"}
    source = tf.constant([[5, 6, 7, 8], [9, 10, 0, 0]], tf.int32)
    whole = model({"source": source}, training=False)["tokens"]
    np.testing.assert_allclose(ctc_logits(model, source), whole, atol=1e-5)
    features, labels = next(iter(TASK.dataset(config, tokenizer, load_multi30k("val")[:8], True)))
    model.run_eagerly = True  # two steps: cheaper than tracing the train step
    losses = [model.train_on_batch(features, labels) for _ in range(2)]
    assert np.isfinite(losses).all() and losses[1] < losses[0], losses
