import math
import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import fit_built, load_in_fresh_process, run_layer_test
from zoo.layers import MultiHeadAttention, SinusoidalPositionEncoding, TokenAndPositionEmbedding
from zoo.layers.masking import implicit_mask

RNG = np.random.default_rng(0)
B, T, V, D = 2, 5, 11, 8
IDS = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 1]], "int32")


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


# ---------------------------------------------------------------- harness runs
@pytest.mark.parametrize(
    "kwargs",
    [
        {"position": "sinusoidal", "mask_zero": True, "dropout": 0.1},
        {"position": "learned", "max_length": 7, "scale_embeddings": False},
    ],
    ids=["sinusoidal", "learned"],
)
def test_embedding_layer(kwargs):
    run_layer_test(
        TokenAndPositionEmbedding,
        {"vocab_size": V, "embed_dim": D, **kwargs},
        IDS,
        call_kwargs={"start_index": 1},
        expected_output_shape=(B, T, D),
    )


def test_tied_output_projection_layer():
    run_layer_test(
        TokenAndPositionEmbedding,
        {"vocab_size": V, "embed_dim": D, "embeddings_initializer": keras.initializers.Orthogonal()},
        _x(B, T, D),
        call_kwargs={"reverse": True},
        expected_output_shape=(B, T, V),
    )


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("position", ["sinusoidal", "learned", None])
def test_embedding_is_scaled_tokens_plus_positions(position):
    layer = TokenAndPositionEmbedding(V, D, max_length=9, position=position)
    got = np.asarray(layer(IDS, start_index=2))
    table = np.asarray(layer.embeddings)
    want = table[IDS] * math.sqrt(D)
    if position == "sinusoidal":
        want += np.asarray(SinusoidalPositionEncoding()(np.zeros((1, 7, D))))[0, 2:]
    elif position == "learned":
        want += np.asarray(layer.position_embedding.embeddings)[2:7]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_tokens_only_and_given_token_embeddings_split_the_sum():
    """tokens_only is the scaled lookup; token_embeddings replace it, and the ids then give
    only the mask: the two halves add up to the plain call."""
    layer = TokenAndPositionEmbedding(V, D, max_length=9, position="learned", mask_zero=True)
    full = layer(IDS, start_index=2)
    tokens = layer(IDS, tokens_only=True)
    np.testing.assert_allclose(
        np.asarray(tokens), np.asarray(layer.embeddings)[IDS] * math.sqrt(D), atol=1e-6
    )
    other_ids = np.where(IDS != 0, 1, 0).astype("int32")  # the same mask, other tokens
    given = layer(other_ids, start_index=2, token_embeddings=tokens)
    np.testing.assert_allclose(np.asarray(given), np.asarray(full), atol=1e-6)
    for x in (tokens, given):
        np.testing.assert_array_equal(np.asarray(implicit_mask(x)), IDS != 0)


def test_unscaled_embedding_and_default_initializer():
    layer = TokenAndPositionEmbedding(1000, 64, position=None, scale_embeddings=False)
    got = np.asarray(layer(IDS))
    np.testing.assert_array_equal(got, np.asarray(layer.embeddings)[IDS])
    # The default initializer gives the scaled embeddings unit variance.
    assert abs(np.asarray(layer.embeddings).std() * math.sqrt(64) - 1) < 0.05


def test_reverse_is_the_transposed_embedding_matrix():
    layer = TokenAndPositionEmbedding(V, D)
    hidden = _x(B, T, D)
    logits = np.asarray(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden @ np.asarray(layer.embeddings).T, atol=1e-5)
    assert len(layer.weights) == 1  # one matrix, whichever way it is used


def test_the_int8_projection_is_the_dequantized_table_on_the_quantized_inputs():
    """After ``quantize("int8")`` the tied logits come from one int8 matmul, rescaled: equal to
    the slow reference, the float product of the row-quantized hidden states and the table as
    Keras stores it (int8 / its scale per token), and close to the float layer's."""
    layer = TokenAndPositionEmbedding(V, D)
    hidden = _x(B, T, D)
    before = np.asarray(layer(hidden, reverse=True))
    layer.token_embedding.quantize("int8")
    table = np.asarray(layer.token_embedding.embeddings)
    assert table.dtype == np.int8
    scale = np.asarray(layer.token_embedding.embeddings_scale)
    flat = hidden.reshape(-1, D)
    hidden_scale = 127 / np.maximum(np.abs(flat).max(-1, keepdims=True), 1e-7)
    reference = (np.round(flat * hidden_scale) / hidden_scale) @ (table / scale[:, None]).T
    logits = np.asarray(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits.reshape(-1, V), reference, rtol=1e-4, atol=1e-4)
    assert 0 < np.abs(logits - before).max() < 0.05 * np.abs(before).max()


def test_incremental_positions_equal_the_full_pass_under_xla():
    layer = TokenAndPositionEmbedding(V, D, max_length=T, position="learned")
    full = np.asarray(layer(IDS))
    step = tf.function(lambda ids, i: layer(ids, start_index=i), jit_compile=True)
    for t in range(T):
        got = np.asarray(step(IDS[:, t : t + 1], tf.constant(t)))
        np.testing.assert_allclose(got[:, 0], full[:, t], atol=1e-6, err_msg=f"step {t}")


def test_clear_errors():
    with pytest.raises(ValueError, match="Unknown position 'rotary'"):
        TokenAndPositionEmbedding(V, D, position="rotary")
    with pytest.raises(ValueError, match="needs `max_length`"):
        TokenAndPositionEmbedding(V, D, position="learned")
    with pytest.raises(ValueError, match="5 tokens starting at position 0 need 5.*max_length=4"):
        TokenAndPositionEmbedding(V, D, max_length=4)(IDS)


# ---------------------------------------------------------------- masks
def test_mask_zero_produces_the_implicit_mask():
    layer = TokenAndPositionEmbedding(V, D, mask_zero=True)
    hidden = layer(IDS)
    np.testing.assert_array_equal(np.asarray(hidden._keras_mask), IDS != 0)
    logits = layer(hidden, reverse=True)  # the mask of the hidden states passes through
    np.testing.assert_array_equal(np.asarray(logits._keras_mask), IDS != 0)
    assert getattr(TokenAndPositionEmbedding(V, D)(IDS), "_keras_mask", None) is None


def test_implicit_mask_reaches_the_attention():
    embedding = TokenAndPositionEmbedding(V, D, mask_zero=True)
    attention = MultiHeadAttention(num_heads=2, key_dim=4)
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, attention(embedding(ids)))
    real = IDS != 0
    got = np.asarray(model(IDS))
    want = np.asarray(attention(embedding(IDS, reverse=False), padding_mask=real))
    np.testing.assert_allclose(got[real], want[real], atol=1e-5)
    unmasked = np.asarray(attention(np.asarray(embedding(IDS))))  # NumPy drops the mask
    assert np.abs(unmasked[0, :3] - got[0, :3]).max() > 1e-3  # so the mask did matter


# ---------------------------------------------------------------- the tied functional model
def _tied_language_model():
    embedding = TokenAndPositionEmbedding(V, D, mask_zero=True, name="embedding")
    ids = keras.Input((None,), dtype="int32", name="ids")
    hidden = embedding(ids)
    attention = MultiHeadAttention(num_heads=2, key_dim=4, name="attention")
    hidden = attention(hidden, use_causal_mask=True)
    logits = embedding(hidden, reverse=True)
    return keras.Model(ids, logits), embedding


def test_tied_model_shares_one_matrix_and_trains_it():
    model, embedding = _tied_language_model()
    names = [w.path for w in model.weights if "embedding" in w.path]
    assert names == ["embedding/token_embedding/embeddings"], names
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = np.asarray(embedding.embeddings).copy()
    targets = np.roll(IDS, -1, axis=1)
    fit_built(model, IDS, targets, epochs=1, verbose=0)
    assert not np.array_equal(before, np.asarray(embedding.embeddings))


def test_tied_model_survives_a_keras_round_trip():
    model, _ = _tied_language_model()
    want = np.asarray(model(IDS))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.keras")
        model.save(path)
        (got,) = load_in_fresh_process(path, {"ids": IDS})
    np.testing.assert_allclose(got, want, atol=1e-5)
