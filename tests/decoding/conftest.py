"""Tiny translators for the decoding tests, built (and one of them trained) once per session."""

import keras
import numpy as np
import pytest

from tests.harness import fit_built
from zoo.data import BOS_ID, EOS_ID
from zoo.models import build_translator, translator_config

VOCAB_SIZE = 20  # ids 0-3 are PAD, UNK, BOS, EOS; 4-19 are "words"
MAX_LENGTH = 12
COPY_TRAINING_STEPS = 200  # about 5 s: the model copies most sources, with mistakes left


def _copy_batch(rng, size, max_source=8):
    """Copy-task examples: the target is the source, ``target_in`` starts with BOS."""
    source = np.zeros((size, max_source), "int32")
    target_in = np.zeros((size, max_source + 1), "int32")
    target_out = np.zeros((size, max_source + 1), "int32")
    for row, length in enumerate(rng.integers(1, max_source + 1, size)):
        tokens = rng.integers(4, VOCAB_SIZE, length)
        source[row, :length] = tokens
        target_in[row, 0] = BOS_ID
        target_in[row, 1 : length + 1] = tokens
        target_out[row, :length] = tokens
        target_out[row, length] = EOS_ID
    return {"source": source, "target_in": target_in}, target_out


@pytest.fixture(scope="session")
def copy_model():
    """Pre-LN, tied embeddings, sinusoidal positions: briefly trained to copy its source.

    Briefly, so that its outputs stop at different lengths and are not all right: the
    searches then have real choices to make.
    """
    keras.utils.set_random_seed(0)
    model = build_translator(
        translator_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH)
    )
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    features, labels = _copy_batch(np.random.default_rng(0), 64 * COPY_TRAINING_STEPS)
    fit_built(model, features, labels, batch_size=64, epochs=1, shuffle=False, verbose=0)
    return model


@pytest.fixture(scope="session")
def random_model():
    """Post-LN (no final norms), separate embeddings with an untied output projection,
    learned positions, two decoder blocks; random weights."""
    keras.utils.set_random_seed(1)
    config = translator_config(
        "tiny",
        vocab_size=VOCAB_SIZE,
        max_length=MAX_LENGTH,
        normalize_first=False,
        share_embeddings=False,
        position="learned",
        decoder_layers=2,
    )
    return build_translator(config)


@pytest.fixture(params=["copy_model", "random_model"])
def model(request):
    """Each test that takes ``model`` runs on both translators."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def sources():
    """A batch of sources padded to different lengths (one fills the whole width)."""
    return np.array(
        [
            [5, 9, 13, 7, 0, 0, 0],
            [11, 0, 0, 0, 0, 0, 0],
            [4, 18, 6, 10, 15, 12, 8],
            [17, 17, 5, 0, 0, 0, 0],
        ],
        "int32",
    )
