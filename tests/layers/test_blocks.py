import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test
from zoo.layers import (
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    register_attention,
)
from zoo.layers.attention import registry

RNG = np.random.default_rng(0)
B, T, S, D, N, F = 2, 5, 6, 8, 2, 16
# Row 0 is padded at the end, row 1 at both ends: a real query may see only padded keys
# before it (causal) and must still not be moved by them.
PADDING = np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 0]], bool)
ENCODER_PADDING = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


class RecordingAttention(MultiHeadAttention):
    """A variant the blocks have never heard of: plain MHA that counts its attention calls."""

    calls = 0

    def _attend(self, *args):
        type(self).calls += 1
        return super()._attend(*args)


@pytest.fixture
def recording_variant():
    """RecordingAttention registered as "test-recording-mha" for one test, then removed."""
    register_attention("test-recording-mha")(RecordingAttention)
    RecordingAttention.calls = 0
    yield RecordingAttention
    registry._REGISTRY.pop("test-recording-mha")


# ---------------------------------------------------------------- harness runs
def test_encoder_block_post_ln():
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": N, "ff_dim": F, "dropout": 0.1, "attention_dropout": 0.1, "ff_dropout": 0.1},
        {"x": _x(B, T, D), "padding_mask": PADDING},
        expected_output_shape=(B, T, D),
    )


def test_encoder_block_pre_ln_glu_cosine_attention():
    run_layer_test(
        TransformerEncoderBlock,
        {
            "num_heads": N,
            "ff_dim": F,
            "key_dim": 3,
            "activation": "geglu",
            "normalize_first": True,
            "layer_norm_epsilon": 1e-6,
            "attention": "mha",
            "attention_kwargs": {"score": "cosine"},
        },
        {"x": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, D), (B, N, T, T)],
    )


def test_decoder_block_post_ln():
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": N, "ff_dim": F, "dropout": 0.1, "attention_dropout": 0.1},
        {
            "x": _x(B, T, D),
            "encoder_output": _x(B, S, 12),  # the encoder may be wider than the decoder
            "padding_mask": PADDING,
            "encoder_padding_mask": ENCODER_PADDING,
        },
        expected_output_shape=(B, T, D),
        # Softmax is invariant to a per-query constant, so the key bias gets no gradient.
        allow_untrained_weights=("cross_attention/key/bias",),
    )


def test_decoder_block_pre_ln_swiglu_with_weights():
    run_layer_test(
        TransformerDecoderBlock,
        {
            "num_heads": N,
            "ff_dim": F,
            "activation": "swiglu",
            "normalize_first": True,
            "attention_kwargs": {"score": "cosine"},
            "cross_attention_variant": "mha",
            "cross_attention_kwargs": {"score": "dot"},
        },
        {"x": _x(B, T, D), "encoder_output": _x(B, S, D), "encoder_padding_mask": ENCODER_PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, D), (B, N, T, T), (B, N, T, S)],
        allow_untrained_weights=("cross_attention/key/bias",),
    )


def test_decoder_only_block():
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": N, "ff_dim": F, "cross_attention": False, "normalize_first": True},
        {"x": _x(B, T, D), "padding_mask": PADDING},
        expected_output_shape=(B, T, D),
    )


# ---------------------------------------------------------------- masks
@pytest.mark.parametrize("normalize_first", [False, True])
def test_encoder_padding_never_leaks(normalize_first):
    block = TransformerEncoderBlock(N, F, normalize_first=normalize_first, activation="glu")
    check_padding_leak(lambda x, m: block(x, padding_mask=m), _x(B, T, D), PADDING)
    _, weights = block(_x(B, T, D), padding_mask=PADDING, return_attention_scores=True)
    weights = _np(weights)  # (B, N, T, T)
    real_queries = np.broadcast_to(PADDING[:, None, :, None], weights.shape)
    padded_keys = np.broadcast_to(~PADDING[:, None, None, :], weights.shape)
    np.testing.assert_allclose(weights[real_queries & padded_keys], 0.0, atol=1e-7)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_encoder_causal_flag_and_attention_mask():
    block = TransformerEncoderBlock(N, F)
    check_causal_leak(lambda x: block(x, use_causal_mask=True), _x(B, T, D))
    # attention_mask: queries may see keys 0..1 only; the other keys must not matter.
    mask = np.zeros((B, T, T), bool)
    mask[:, :, :2] = True
    x = _x(B, T, D)
    noisy = x.copy()
    noisy[:, 2:] += 5.0
    got, want = block(noisy, attention_mask=mask), block(x, attention_mask=mask)
    # Rows 0..1 have unchanged inputs and see only unchanged keys.
    np.testing.assert_allclose(_np(got)[:, :2], _np(want)[:, :2], atol=1e-5)


def test_encoder_honours_keras_implicit_mask():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0]])
    keep = ids != 0
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    block = TransformerEncoderBlock(N, F, normalize_first=True)
    embedded = embedding(ids)  # carries the implicit mask
    implicit = block(embedded)
    explicit = block(_np(embedded), padding_mask=keep)
    np.testing.assert_allclose(_np(implicit)[keep], _np(explicit)[keep], atol=1e-5)
    np.testing.assert_array_equal(_np(implicit._keras_mask), keep)  # passed on downstream
    # Without the mask the padded tokens do move the real ones: the check can fail.
    unmasked = block(_np(embedded))
    assert np.abs(_np(unmasked)[keep] - _np(explicit)[keep]).max() > 1e-3
    # The same in a functional model.
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, block(embedding(inputs)))
    np.testing.assert_allclose(_np(model(ids))[keep], _np(explicit)[keep], atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_own_padding_never_leaks(normalize_first):
    block = TransformerDecoderBlock(N, F, normalize_first=normalize_first)
    memory = _x(B, S, D)
    check_padding_leak(
        lambda x, m: block(x, memory, padding_mask=m, encoder_padding_mask=ENCODER_PADDING),
        _x(B, T, D),
        PADDING,
    )


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_encoder_padding_never_leaks(normalize_first):
    block = TransformerDecoderBlock(N, F, normalize_first=normalize_first)
    x, memory = _x(B, T, D), _x(B, S, D)
    noisy = np.where(ENCODER_PADDING[..., None], memory, memory + 10 * _x(B, S, D))
    before = _np(block(x, memory, encoder_padding_mask=ENCODER_PADDING))
    after = _np(block(x, noisy, encoder_padding_mask=ENCODER_PADDING))
    np.testing.assert_allclose(after, before, atol=1e-5)  # every decoder position
    # Without the encoder mask the same noise does move the outputs: the check can fail.
    assert np.abs(_np(block(x, noisy)) - _np(block(x, memory))).max() > 1e-3


def test_decoder_honours_implicit_mask_of_the_encoder_output():
    source = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 1, 2]])
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    encoder = TransformerEncoderBlock(N, F)
    decoder = TransformerDecoderBlock(N, F)
    x = _x(B, T, D)
    memory = encoder(embedding(source))  # the encoder passes the mask on
    implicit = decoder(x, memory)
    explicit = decoder(x, _np(memory), encoder_padding_mask=source != 0)
    np.testing.assert_allclose(_np(implicit), _np(explicit), atol=1e-5)
    # Without the mask the padded encoder positions are attended: the check can fail.
    assert np.abs(_np(decoder(x, _np(memory))) - _np(explicit)).max() > 1e-3


@pytest.mark.parametrize(
    "kwargs", [{}, {"normalize_first": True, "attention_kwargs": {"score": "cosine"}}]
)
def test_decoder_is_causal(kwargs):
    block = TransformerDecoderBlock(N, F, **kwargs)
    memory = _x(B, S, D)
    check_causal_leak(lambda x: block(x, memory), _x(B, T, D))
    decoder_only = TransformerDecoderBlock(N, F, cross_attention=False, **kwargs)
    check_causal_leak(lambda x: decoder_only(x), _x(B, T, D))
    # With the causal mask off the future does leak: the check above can fail.
    with pytest.raises(AssertionError, match="future leaked"):
        check_causal_leak(lambda x: block(x, memory, use_causal_mask=False), _x(B, T, D))


# ---------------------------------------------------------------- the caches
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"normalize_first": True, "activation": "geglu", "attention_kwargs": {"score": "cosine"}},
        {"normalize_first": True, "cross_attention": False},
        # Position-aware variants in both slots: the cross attention must learn each
        # step's query position from the cache index.
        {"attention": "rotary", "cross_attention_variant": "rotary"},
        {"attention": "alibi", "cross_attention_variant": "alibi"},
        {"attention": "relative", "cross_attention_variant": "relative",
         "attention_kwargs": {"max_relative_position": 2},
         "cross_attention_kwargs": {"max_relative_position": 2}},
    ],
    ids=["post-ln", "pre-ln-cosine", "decoder-only", "rotary", "alibi", "relative"],
)
def test_cached_decoding_equals_full_causal_pass(kwargs):
    block = TransformerDecoderBlock(N, F, **kwargs)
    cross = block.cross_attention
    x, memory = _x(B, T, D), _x(B, S, D)
    memory_kwargs = {"encoder_output": memory, "encoder_padding_mask": ENCODER_PADDING}
    full = block(x, **(memory_kwargs if cross else {}), return_attention_scores=True)
    full = [_np(o) for o in full]

    @tf.function(jit_compile=True)
    def step(token, self_cache, cross_cache, index):
        memory = {"cross_cache": cross_cache, "encoder_padding_mask": ENCODER_PADDING}
        return block(
            token,
            self_cache=self_cache,
            cache_index=index,
            return_attention_scores=True,
            **(memory if cross else {}),
        )

    max_length = T + 2  # longer than needed: the empty slots must stay unseen
    self_cache = block.init_self_cache(B, max_length)
    cross_cache = block.compute_cross_cache(memory) if cross else None
    for t in range(T):
        outputs = step(x[:, t : t + 1], self_cache, cross_cache, tf.constant(t))
        if cross:
            out, self_weights, cross_weights, self_cache, same_cross_cache = outputs
            np.testing.assert_array_equal(_np(same_cross_cache), _np(cross_cache))
            cross_weights = _np(cross_weights)
            np.testing.assert_allclose(cross_weights[:, :, 0], full[2][:, :, t], atol=1e-5)
        else:
            out, self_weights, self_cache = outputs
        out, self_weights = _np(out), _np(self_weights)
        assert [tuple(c.shape) for c in self_cache] == [(B, max_length, N, D // N)] * 2
        np.testing.assert_allclose(out[:, 0], full[0][:, t], atol=1e-5, err_msg=f"step {t}")
        np.testing.assert_allclose(self_weights[:, :, 0, :T], full[1][:, :, t], atol=1e-5)
        np.testing.assert_allclose(self_weights[:, :, 0, t + 1 :], 0.0, atol=1e-7)


def test_cached_step_computes_the_cross_cache_from_the_encoder_output():
    block = TransformerDecoderBlock(N, F)
    x, memory = _x(B, T, D), _x(B, S, D)
    full = _np(block(x, memory))
    out, self_cache, cross_cache = block(
        x[:, :1], memory, self_cache=block.init_self_cache(B, T), cache_index=0
    )
    np.testing.assert_allclose(_np(out)[:, 0], full[:, 0], atol=1e-5)
    np.testing.assert_allclose(_np(cross_cache), _np(block.compute_cross_cache(memory)), atol=1e-6)
    out, _, _ = block(x[:, 1:2], self_cache=self_cache, cross_cache=cross_cache, cache_index=1)
    np.testing.assert_allclose(_np(out)[:, 0], full[:, 1], atol=1e-5)


# ---------------------------------------------------------------- post-LN and pre-LN
def _zero(dense):
    dense.set_weights([np.zeros_like(w) for w in dense.get_weights()])


def _zero_sublayers(block):
    _zero(block.self_attention_layer.output_dense)
    _zero(block.feed_forward.output_dense)
    if getattr(block, "cross_attention_layer", None) is not None:
        _zero(block.cross_attention_layer.output_dense)


def _standardize(x, epsilon=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon)


def _blocks(normalize_first):
    """A built encoder block and decoder block, and how to call each on x."""
    memory = _x(B, S, D)
    encoder = TransformerEncoderBlock(N, F, normalize_first=normalize_first)
    decoder = TransformerDecoderBlock(N, F, normalize_first=normalize_first)
    return [(encoder, lambda x: encoder(x)), (decoder, lambda x: decoder(x, memory))]


def test_post_ln_output_rows_are_layer_normalized():
    x = 3.0 + 4.0 * _x(B, T, D)  # far from normalized
    for block, call in _blocks(normalize_first=False):
        out = _np(call(x))
        np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)
        np.testing.assert_allclose(out.std(-1), 1.0, atol=1e-3)
        # With every sublayer silenced, what is left is LN(LN(x)): x normalized.
        _zero_sublayers(block)
        np.testing.assert_allclose(_np(call(x)), _standardize(_standardize(x)), atol=1e-4)


def test_pre_ln_keeps_the_residual_stream_unnormalized():
    x = 50.0 + 4.0 * _x(B, T, D)
    for block, call in _blocks(normalize_first=True):
        out = _np(call(x))
        # The sublayers see LN(x), so they add O(1) to a stream that keeps its offset of 50.
        assert out.mean(-1).min() > 40.0
        # With every sublayer silenced, a pre-LN block is exactly the identity.
        _zero_sublayers(block)
        np.testing.assert_allclose(_np(call(x)), x, atol=1e-6)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_block_equals_its_definition(normalize_first):
    """The block against the wiring of Vaswani et al. (post-LN) or Xiong et al. (pre-LN)."""
    block = TransformerDecoderBlock(N, F, normalize_first=normalize_first)
    x, memory = _x(B, T, D), _x(B, S, D)
    got = _np(block(x, memory))
    sublayers = [
        (lambda h: block.self_attention_layer(h, use_causal_mask=True), block.self_attention_norm),
        (lambda h: block.cross_attention_layer(h, memory), block.cross_attention_norm),
        (block.feed_forward, block.feed_forward_norm),
    ]
    want = x
    for sublayer, norm in sublayers:
        if normalize_first:
            want = want + sublayer(norm(want))  # Xiong et al. 2020, fig. 1(b)
        else:
            want = norm(want + sublayer(want))  # Vaswani et al. 2017, section 3.1
    np.testing.assert_allclose(got, _np(want), atol=1e-5)


# ---------------------------------------------------------------- attention variants
def test_blocks_make_any_registered_variant_with_its_kwargs(recording_variant):
    encoder = TransformerEncoderBlock(
        N, F, attention="test-recording-mha", attention_kwargs={"score": "cosine"}
    )
    decoder = TransformerDecoderBlock(
        N,
        F,
        key_dim=3,
        cross_attention_variant="test-recording-mha",
        cross_attention_kwargs={"score": "dot"},
    )
    x, memory = _x(B, T, D), _x(B, S, D)
    encoder(x), decoder(x, memory)
    assert isinstance(encoder.self_attention_layer, RecordingAttention)
    self_attention, cross_attention = encoder.self_attention_layer, decoder.cross_attention_layer
    assert self_attention.score == "cosine"
    assert self_attention.fused_qkv and self_attention.key_dim == D // N
    assert type(decoder.self_attention_layer) is MultiHeadAttention
    assert isinstance(cross_attention, RecordingAttention)
    assert cross_attention.score == "dot"
    assert not cross_attention.fused_qkv and cross_attention.key_dim == 3
    assert RecordingAttention.calls == 2


def test_unknown_attention_name_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown attention 'performr'.*registered:.*mha"):
        TransformerEncoderBlock(N, F, attention="performr")
    with pytest.raises(ValueError, match="Unknown attention 'performr'"):
        TransformerDecoderBlock(N, F, cross_attention_variant="performr")
    with pytest.raises(ValueError, match="Unknown score"):
        TransformerEncoderBlock(N, F, attention_kwargs={"score": "euclid"})(_x(B, T, D))
    with pytest.raises(ValueError, match="may not set \\['num_heads'\\]"):
        TransformerEncoderBlock(N, F, attention_kwargs={"num_heads": 4})
    with pytest.raises(ValueError, match="Unknown feed-forward activation"):
        TransformerDecoderBlock(N, F, activation="tanh")


def test_decoder_argument_errors():
    block = TransformerDecoderBlock(N, F)
    with pytest.raises(ValueError, match="Build"):
        block.init_self_cache(B, T)
    x, memory = _x(B, T, D), _x(B, S, D)
    block(x, memory)
    with pytest.raises(ValueError, match="encoder_output` or `cross_cache"):
        block(x)
    with pytest.raises(ValueError, match="together"):
        block(x[:, :1], memory, self_cache=block.init_self_cache(B, T))
    decoder_only = TransformerDecoderBlock(N, F, cross_attention=False)
    with pytest.raises(ValueError, match="cross_attention=False"):
        decoder_only(x, memory)
    with pytest.raises(ValueError, match="not divisible"):
        TransformerEncoderBlock(3, F)(x)


def test_dropout_only_when_training():
    block = TransformerEncoderBlock(N, F, dropout=0.5, attention_dropout=0.5, ff_dropout=0.5)
    x = _x(B, T, D)
    inference = _np(block(x))
    np.testing.assert_array_equal(_np(block(x, training=False)), inference)
    assert np.abs(_np(block(x, training=True)) - inference).max() > 1e-3
