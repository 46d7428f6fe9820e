import doctest

import keras
import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, fit_built, run_layer_test
from zoo.layers import TransformerDecoderBlock, TransformerEncoderBlock
from zoo.layers.attention import LocalAttention, MultiHeadAttention, get_attention
from zoo.layers.attention import local as local_module

RNG = np.random.default_rng(0)
B, T, D = 2, 7, 16
# Row 1 is padded at both ends: a real query may have padded keys on either side.
PADDING = np.array([[1] * T, [0, 1, 1, 1, 1, 0, 0]], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _padding(batch, length):
    """Row 0 is all real; the others lose their first and last two positions (if long enough)."""
    padding = np.ones((batch, length), bool)
    if length > 3:
        padding[1:, 0] = False
        padding[1:, -2:] = False
    return padding


def _eager(layer, *inputs, **kwargs):
    return layer(*inputs, **kwargs)


# ---------------------------------------------------------------- the slow reference
# These helpers are shared by the strided and global attention tests.
def local_pattern(length, window):
    """The dense ``(T, T)`` sliding-window pattern: ``|i - j| <= window``."""
    distance = np.arange(length)[:, None] - np.arange(length)[None]
    return np.abs(distance) <= window


def full_attention_twin(layer, *inputs):
    """A ``MultiHeadAttention`` with the configuration and the weights of ``layer``."""
    base_keys = MultiHeadAttention(num_heads=1, key_dim=1).get_config()
    config = {k: v for k, v in layer.get_config().items() if k in base_keys and k != "name"}
    twin = MultiHeadAttention.from_config(config)
    twin(*(keras.Input(batch_shape=x.shape) for x in inputs))  # builds it
    twin.set_weights(layer.get_weights())
    return twin


def assert_matches_pattern(
    make_layer, pattern, lengths, causal, batch=2, value_size=None, call=_eager
):
    """The blocked layer equals full attention restricted by the dense ``pattern(T)`` mask.

    ``pattern(T)`` is a ``(T, T)`` NumPy boolean array; the causal mask and the padding are
    added here. Outputs are compared at the real positions only. ``call(layer, *inputs,
    **kwargs)`` runs both layers (the JAX checks pass ``harness.jit_call``). One layer and its
    twin serve every length: building them costs more than calling them.
    """
    layer, twin = make_layer(), None
    for length in lengths:
        x = _x(batch, length, D)
        inputs = (x,) if value_size is None else (x, _x(batch, length, value_size))
        padding = _padding(batch, length)
        got = call(layer, *inputs, padding_mask=padding, use_causal_mask=causal)
        allowed = pattern(length)
        if causal:
            allowed = allowed & np.tril(np.ones((length, length), bool))
        if twin is None:  # the layer is built now
            twin = full_attention_twin(layer, *inputs)
        mask = np.broadcast_to(allowed, (batch, length, length))
        want = call(twin, *inputs, padding_mask=padding, attention_mask=mask)
        np.testing.assert_allclose(
            np.asarray(got)[padding],
            np.asarray(want)[padding],
            atol=1e-5,
            err_msg=f"T={length}, causal={causal}",
        )


def assert_equals_full_attention(layer, causal, padding=PADDING):
    """``layer`` equals ``MultiHeadAttention`` with its weights, at the real positions."""
    x = _x(B, T, D)
    got = layer(x, padding_mask=padding, use_causal_mask=causal)
    want = full_attention_twin(layer, x)(x, padding_mask=padding, use_causal_mask=causal)
    np.testing.assert_allclose(np.asarray(got)[padding], np.asarray(want)[padding], atol=1e-5)


def assert_masks_never_leak(layer, padding=PADDING):
    """Padded keys and (with the causal flag) future keys never move a real output."""
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), padding)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, 11, D))


def assert_dropout_only_in_training(layer):
    x = _x(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-3


def assert_unsupported_inputs_raise(layer):
    """A (B, T, S) mask, the dense weights, T != S and a KV cache are clear errors."""
    x = _x(B, T, D)
    with pytest.raises(ValueError, match="not an arbitrary"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(x, return_attention_scores=True)
    with pytest.raises(ValueError, match=f"T={T}, S={T - 2}"):
        layer(x, _x(B, T - 2, D))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.init_cache(B, 8)


def assert_encoder_learns(attention, attention_kwargs, steps=15):
    """A tiny encoder block with ``attention`` lowers its loss over a few training steps."""
    keras.utils.set_random_seed(0)
    x = _x(8, 12, D)
    target = np.roll(x, 1, axis=1)  # the previous token: a job for attention
    inputs = keras.Input((12, D))
    hidden = TransformerEncoderBlock(
        num_heads=2, ff_dim=32, attention=attention, attention_kwargs=attention_kwargs
    )(inputs)
    model = keras.Model(inputs, keras.layers.Dense(D)(hidden))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    loss = fit_built(model, x, target, batch_size=8, epochs=steps, verbose=0).history["loss"]
    assert np.all(np.isfinite(loss))
    assert loss[-1] < 0.7 * loss[0], f"the loss did not go down: {loss}"


def assert_decoder_block_is_causal(attention, attention_kwargs):
    """The variant plugs into a decoder block, whose outputs never see the future."""
    block = TransformerDecoderBlock(
        num_heads=2, ff_dim=32, attention=attention, attention_kwargs=attention_kwargs
    )
    memory = _x(B, 5, D)
    check_causal_leak(lambda x: block(x, memory), _x(B, 9, D))


def assert_dynamic_length_matches(layer, lengths):
    """In a graph with an unknown length (None), the outputs equal the eager ones."""
    import tensorflow as tf  # a graph with unknown dimensions; the tests run on TensorFlow

    graph = tf.function(
        lambda x, m: layer(x, padding_mask=m, use_causal_mask=True),
        input_signature=[tf.TensorSpec((None, None, D)), tf.TensorSpec((None, None), tf.bool)],
    )
    for length in lengths:
        x, padding = _x(B, length, D), _padding(B, length)
        eager = layer(x, padding_mask=padding, use_causal_mask=True)
        np.testing.assert_allclose(np.asarray(graph(x, padding)), np.asarray(eager), atol=1e-5)


# ---------------------------------------------------------------- harness runs
def test_causal_self_attention_layer():
    run_layer_test(
        LocalAttention,
        {"num_heads": 2, "key_dim": 4, "window": 2, "fused_qkv": True, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_layer_with_a_separate_value_of_the_same_length():
    run_layer_test(
        LocalAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10, "window": 3},
        {"query": _x(B, T, D), "value": _x(B, T, 12)},
        expected_output_shape=(B, T, 10),
        # Softmax is invariant to a per-query constant, so the key bias gets no gradient.
        allow_untrained_weights=("key/bias",),
    )


# ---------------------------------------------------------------- the definition
def test_registered_as_local():
    assert get_attention("local") is LocalAttention


@pytest.mark.parametrize("causal", [False, True])
def test_window_at_least_the_length_is_full_attention(causal):
    for window in (T - 1, T, 50):
        assert_equals_full_attention(LocalAttention(num_heads=2, key_dim=8, window=window), causal)


@pytest.mark.filterwarnings("ignore:You are using a softmax")  # the reference at T=1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [0, 1, 3])
def test_equals_full_attention_under_the_dense_window_pattern(window, causal):
    # Lengths below, at and between multiples of the block (the window).
    assert_matches_pattern(
        lambda: LocalAttention(num_heads=2, key_dim=8, window=window),
        lambda length: local_pattern(length, window),
        lengths=(1, 3, 5, 8, 12, 13),
        causal=causal,
    )


@pytest.mark.parametrize("score", ["dot", "cosine", "additive"])
def test_every_score_function_and_a_separate_value(score):
    assert_matches_pattern(
        lambda: LocalAttention(num_heads=2, key_dim=8, value_dim=5, window=2, score=score),
        lambda length: local_pattern(length, 2),
        lengths=(7,),
        causal=False,
        value_size=12,
    )


def window_part_gradients(part, q, k, v, scale, weights, differentiate):
    """``out``, ``lse`` and the gradients of ``sum(out cos(out)) + sum(lse w)`` for q, k, v
    and the scale (the lse term is what the global and strided variants' merges read), over
    the queries that have a key in their window: the others' outputs are meaningless (the
    dense blocks' lse of about -1e9 loses their log(K) to rounding, so they sum the values
    where the loop averages them), and both are zeroed. ``differentiate(loss, arguments)``
    is the backend's ``(aux, gradients)``."""

    def loss(q, k, v, scale):
        out, lse = part(q, k, v, scale)
        seen = lse > -1e8  # (B, T, N); about -1e9 where no key is
        out = keras.ops.where(seen[..., None], out, 0.0)
        lse = keras.ops.where(seen, lse, 0.0)
        return keras.ops.sum(out * keras.ops.cos(out)) + keras.ops.sum(lse * weights), (
            out, lse)

    return differentiate(loss, (q, k, v, scale))


def window_parts(window, causal, score, step_queries):
    """The recomputing loop and the dense blocks, as ``part(q, k, v, scale)``."""
    from zoo.layers.attention.scaled_dot_product import attention_scores

    block = max(window, 1)
    valid = np.ones((2, 12), bool)
    valid[1, :2] = valid[1, -3:] = False  # keys padded at both ends
    valid[1, 5:8] = False  # and a window with no real key for some queries

    def recomputed(q, k, v, scale):
        return local_module.recomputed_window_part(
            q, k, v, valid, window, block, causal, score=score, scale=scale,
            step_queries=step_queries)  # fmt: skip

    def dense(q, k, v, scale):
        return local_module.local_window_part(
            q, k, v, valid, window, block, causal,
            score_fn=lambda q, k: attention_scores(q, k, score, scale))  # fmt: skip

    return recomputed, dense


def tf_differentiate(loss, arguments):
    import tensorflow as tf

    arguments = [None if x is None else tf.convert_to_tensor(x) for x in arguments]
    given = [x for x in arguments if x is not None]
    with tf.GradientTape() as tape:
        tape.watch(given)
        value, aux = loss(*arguments)
    gradients = iter(tape.gradient(value, given))
    return aux, [None if x is None else next(gradients) for x in arguments]


def window_inputs(score):
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 12, 2, 4)).astype("float32") for _ in range(3))
    scale = np.array([[[2.0]], [[0.5]]], "float32") if score == "cosine" else np.float32(0.4)
    return q, k, v, scale, rng.normal(size=(2, 12, 2)).astype("float32")


def assert_same_values_and_gradients(got, want):
    (got_out, got_lse), got_grads = got
    (want_out, want_lse), want_grads = want
    np.testing.assert_allclose(np.asarray(got_out), np.asarray(want_out), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_lse), np.asarray(want_lse), atol=1e-4, rtol=1e-5)
    for name, a, b in zip("qkv", got_grads, want_grads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5,
                                   err_msg=f"d {name}")  # fmt: skip
    if got_grads[3] is not None or want_grads[3] is not None:  # the scale
        np.testing.assert_allclose(np.asarray(got_grads[3]), np.asarray(want_grads[3]),
                                   atol=1e-4, rtol=1e-5, err_msg="d scale")  # fmt: skip


# Steps of 6 queries: 2 steps; of 9: a padded last step; of 100: 1 step.
@pytest.mark.parametrize("causal, score, step_queries", [
    (False, "scaled_dot", 6), (True, "cosine", 6), (True, "scaled_dot", 9), (False, "cosine", 100)
])  # fmt: skip
def test_the_recomputed_window_equals_the_dense_blocks_in_values_and_gradients(
    causal, score, step_queries
):
    """The O(T) training path (a loop whose backward pass recomputes the weights) against
    the dense blocks, which keep them: outputs, log-normalisers and every gradient."""
    recomputed, dense = window_parts(3, causal, score, step_queries)
    q, k, v, scale, weights = window_inputs(score)
    if score == "scaled_dot":
        scale = None  # the default 1/sqrt(H)
    args = (q, k, v, scale, weights, tf_differentiate)
    assert_same_values_and_gradients(
        window_part_gradients(recomputed, *args), window_part_gradients(dense, *args)
    )


def assert_xla_matches_eager_at_unknown_lengths(layer, lengths, **call_kwargs):
    """Outputs and the gradients of ``sum(y cos(y))`` for the input and every weight, from one
    XLA function traced with an unknown batch and length, equal eager ones; rows 1+ are
    padded at the end."""
    import tensorflow as tf

    layer(_x(B, T, D))

    def values_and_gradients(x, padding):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, padding_mask=padding, **call_kwargs)
            loss = tf.reduce_sum(y * tf.cos(y))
        return [y] + tape.gradient(loss, [x] + layer.trainable_weights)

    compiled = tf.function(values_and_gradients, jit_compile=True, input_signature=[
        tf.TensorSpec((None, None, D)), tf.TensorSpec((None, None), tf.bool)])  # fmt: skip
    for length in lengths:
        x = tf.constant(_x(B, length, D))
        padding = np.ones((B, length), bool)
        padding[1, -2:] = False
        for got, want in zip(compiled(x, padding), values_and_gradients(x, padding)):
            # XLA sums in another order: float32 gradients differ by up to about 1e-4 of their size.
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def test_the_recomputed_window_under_xla_with_an_unknown_length():
    keras.utils.set_random_seed(0)  # its weights whatever ran before in this process
    assert_xla_matches_eager_at_unknown_lengths(
        LocalAttention(num_heads=2, key_dim=8, window=2), (5, 9), training=True
    )


def test_the_dense_blocks_serve_dropout_in_training_and_the_additive_score(monkeypatch):
    """Only those need the whole weights; everything else takes the recomputing loop."""
    calls = []
    recomputed = local_module.recomputed_window_part
    monkeypatch.setattr(local_module, "recomputed_window_part",
                        lambda *a, **k: calls.append("loop") or recomputed(*a, **k))  # fmt: skip
    x = _x(B, T, D)
    LocalAttention(num_heads=2, key_dim=4, window=2, dropout=0.5)(x, training=True)
    LocalAttention(num_heads=2, key_dim=4, window=2, score="additive")(x, training=True)
    assert calls == []
    LocalAttention(num_heads=2, key_dim=4, window=2, dropout=0.5)(x, training=False)
    LocalAttention(num_heads=2, key_dim=4, window=2)(x, training=True)
    assert calls == ["loop", "loop"]


def test_pattern_helper_is_the_definition():
    np.testing.assert_array_equal(
        local_module.local_window_pattern(block_size=2, window=2, causal=True),
        # query a of a block sees key slots m with 0 <= a + 2 - m <= 2.
        [[1, 1, 1, 0], [0, 1, 1, 1]],
    )


def test_unknown_length_in_a_graph():
    assert_dynamic_length_matches(LocalAttention(num_heads=2, key_dim=8, window=2), (5, 9))


def test_dropout_only_in_training():
    assert_dropout_only_in_training(LocalAttention(num_heads=2, key_dim=4, window=2, dropout=0.5))


# ---------------------------------------------------------------- masks and errors
def test_padding_and_causal_never_leak():
    assert_masks_never_leak(LocalAttention(num_heads=2, key_dim=8, window=2, fused_qkv=True))


def test_unsupported_inputs_are_clear_errors():
    assert_unsupported_inputs_raise(LocalAttention(num_heads=2, key_dim=4, window=2))
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="`window` must be an integer >= 0"):
            LocalAttention(num_heads=2, key_dim=4, window=bad)


# ---------------------------------------------------------------- in the blocks
def test_encoder_block_learns():
    assert_encoder_learns("local", {"window": 2})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("local", {"window": 3})


def test_docstring_examples_run():
    result = doctest.testmod(local_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
