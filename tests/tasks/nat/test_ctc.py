"""The NAT's CTC decoder end to end: it trains through the one train(), decodes in one pass (the
best alignment, collapsed) as the hand-written composition does, and serves the same outputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.artifacts import serving_path
from zoo.data import load_multi30k
from zoo.decoding.ctc import ctc_greedy
from zoo.models.nat import MASK_ID, ctc_logits, nat_counts, nat_modes, nat_source_positions
from zoo.tasks import get_task, translate
from zoo.training import train

SENTENCES = ["A dog runs.", "Two men are talking in the street.", "", "Red car."]
TASK = get_task("nat")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    keras.utils.set_random_seed(7)
    config = TASK.get_config("tiny", vocab_size=400, max_length=48, decoder="ctc",
                             ctc_upsample=3, epochs=2, batch_tokens=1024)  # fmt: skip
    workdir = str(tmp_path_factory.mktemp("ctc"))
    model, history, tokenizer = train(
        TASK, config, workdir, train_data=load_multi30k("train")[:600],
        validation_data=load_multi30k("val")[:16], bleu_sample_size=8, verbose=0,
    )  # fmt: skip
    return model, history, tokenizer, workdir


def test_it_trains_on_the_ctc_loss(trained):
    model, history, _, _ = trained
    losses = history.history["loss"]
    assert len(losses) == 2 and losses[1] < losses[0] and np.isfinite(losses).all()
    assert "val_bleu" in history.history
    assert nat_modes(model).ctc_upsample == 3 and nat_source_positions(model) == 16
    assert set(model.input) == {"source"} and set(model.output) == {"tokens"}


def test_the_one_pass_is_the_collapsed_best_alignment(trained):
    model, _, tokenizer, _ = trained
    source = tf.constant([[5, 6, 7, 8], [9, 10, 0, 0]], tf.int32)
    whole = model({"source": source}, training=False)["tokens"]
    np.testing.assert_allclose(ctc_logits(model, source), whole, atol=1e-5)
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


def test_it_serves_what_translate_gives(trained, tmp_path):
    model, _, tokenizer, _ = trained
    served = tf.saved_model.load(serving_path(TASK.export(model, tokenizer, tmp_path / "ctc")))
    expected = translate(model, tokenizer, SENTENCES)
    inputs = tf.constant(SENTENCES)
    for name, extra in (("serving_default", {}), ("translate_xla", {}),
                        ("translate_refined", {"iterations": tf.constant(4),
                                               "length_beam": tf.constant(3)})):  # fmt: skip
        outputs = served.signatures[name](inputs=inputs, **extra)["translations"].numpy()
        assert [text.decode() for text in outputs] == expected, name


def test_its_outputs_are_not_all_empty(trained):
    # The comparisons above are between real outputs, not between empty strings.
    model, _, tokenizer, _ = trained
    assert sum(bool(text) for text in translate(model, tokenizer, SENTENCES)) >= 2
