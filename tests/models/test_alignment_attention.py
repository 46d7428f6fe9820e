"""The translator with location-aware or monotonic cross attention (``cross_attention``): the
whole-target pass is the two passes written out, the cached steps give the whole pass's logits
given the same attention history, hard monotonic decoding never goes back, the searches run,
and a ``.keras`` round trip keeps the outputs. (Serving: tests/export/test_translator_options.py.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.models.test_translator_options import SOURCES, teacher_forced_input, tiny_translator
from zoo.models import translator_config
from zoo.models.translator import encode, init_caches, step, translator_layers
from zoo.models.translator.stacks import cross_attention_of, decoder_stack
from zoo.decoding import beam_search, greedy_search
from zoo.models.translator import step_and_caches

INPUTS = {"source": SOURCES, "target_in": teacher_forced_input()}


def stack_logits(model, cross_states=None, return_cross_attention=False):
    """decoder_stack over the whole teacher-forced target, with the given states."""
    layers = translator_layers(model)
    memory, padding = encode(model, SOURCES)
    target = tf.constant(INPUTS["target_in"])
    return decoder_stack(
        layers, target, memory, padding_mask=layers.target_embedding.compute_mask(target),
        encoder_padding_mask=padding, cross_states=cross_states,
        return_cross_attention=return_cross_attention, training=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def location():
    return tiny_translator(cross_attention="location_aware")


@pytest.fixture(scope="module")
def monotonic():
    return tiny_translator(cross_attention="monotonic")


def test_the_whole_target_pass_is_a_stateless_first_pass_then_its_states(location):
    stateless = (None, None)
    _, _, weights = stack_logits(location, stateless, return_cross_attention=True)
    blocks = translator_layers(location).decoder_blocks
    states = tuple(cross_attention_of(b).sequence_state(w) for b, w in zip(blocks, weights))
    expected, _, _ = stack_logits(location, states)
    np.testing.assert_allclose(location(INPUTS), expected, atol=1e-5)
    plain, _, _ = stack_logits(location, stateless)
    assert not np.allclose(plain, expected, atol=1e-4)  # the states change the logits


def test_cached_steps_equal_the_whole_pass_given_the_same_attention_history(location):
    """Step by step, the caches carry the summed weights of the steps so far; the whole pass
    with those sums as its states (each step's, shifted) gives the same logits."""
    memory, padding = encode(location, SOURCES)
    caches = init_caches(location, memory, padding, max_length=8)
    stepped, history = [], []
    for t in range(INPUTS["target_in"].shape[1]):
        history.append(caches["cross_states"])
        logits, caches = step(location, INPUTS["target_in"][:, t : t + 1], caches, t)
        stepped.append(np.asarray(logits))
    states = tuple(tf.stack([h[i] for h in history], axis=1) for i in range(2))  # (B, T, S)
    expected, _, _ = stack_logits(location, states)
    np.testing.assert_allclose(np.stack(stepped, axis=1), expected, atol=1e-4)


def test_hard_monotonic_decoding_never_goes_back(monotonic):
    memory, padding = encode(monotonic, SOURCES)
    caches = init_caches(monotonic, memory, padding, max_length=8)
    positions, tokens = [], np.full((len(SOURCES), 1), 2, "int32")
    for t in range(8):
        logits, caches = step(monotonic, tokens, caches, t)
        tokens = np.argmax(np.asarray(logits), axis=-1)[:, None].astype("int32")
        positions.append(np.stack([np.asarray(s) for s in caches["cross_states"]]))
    positions = np.stack(positions)  # (steps, blocks, B, N)
    assert (np.diff(positions, axis=0) >= 0).all()
    real = (SOURCES > 0).sum(1)
    assert (positions < real[None, None, :, None]).all()  # never onto the padding


@pytest.mark.parametrize("variant", ["location", "monotonic"])
def test_the_searches_run_and_a_keras_file_keeps_the_outputs(variant, request, tmp_path):
    model = request.getfixturevalue(variant)  # the module's model of that cross attention
    step_fn, caches = step_and_caches(model, SOURCES, max_length=8)
    greedy = np.asarray(greedy_search(step_fn, caches, max_length=8))
    beams, _ = beam_search(step_fn, caches, max_length=8, beam_size=3)
    assert greedy.shape == (3, 8) and np.asarray(beams).shape[0] == 3
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(INPUTS), model(INPUTS), atol=1e-5)
    assert type(loaded.get_layer("decoder_block_0").cross_attention_layer).__name__ == {
        "location": "LocationAwareAttention", "monotonic": "MonotonicAttention"}[variant]


def test_bad_cross_attention_settings_are_refused():
    with pytest.raises(ValueError, match="Unknown cross_attention 'hard'"):
        translator_config("tiny", cross_attention="hard")
    with pytest.raises(ValueError, match="cross_attention_score must stay 'scaled_dot'"):
        translator_config("tiny", cross_attention="monotonic", cross_attention_score="dot")
