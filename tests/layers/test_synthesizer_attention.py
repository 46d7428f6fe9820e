import doctest

import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test
from tests.layers.test_local_attention import (
    _eager,
    assert_decoder_block_is_causal,
    assert_dropout_only_in_training,
    assert_dynamic_length_matches,
    assert_encoder_learns,
)
from zoo.layers import get_attention
from zoo.layers.attention import synthesizer as synthesizer_module
from zoo.layers.attention.synthesizer import SynthesizerAttention

RNG = np.random.default_rng(0)
B, T, D, L = 2, 6, 16, 9
PADDING = np.array([[1] * T, [1] * 4 + [0] * 2], bool)


def _x(*shape):
    return RNG.normal(size=shape).astype("float32")


def _dense(layer, x):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def _reference(layer, x, mask):
    """``softmax(B) v`` by hand: B from the MLP of each token (dense) or from R (random)."""
    n, length = layer.num_heads, x.shape[1]
    v = _dense(layer.value_dense, x).reshape(x.shape[:2] + (n, -1))  # (B, T, N, Hv)
    if layer.mode == "dense":
        hidden = np.maximum(_dense(layer.synthesizer_hidden, x), 0)
        logits = _dense(layer.synthesizer_logits, hidden).reshape(x.shape[:2] + (n, L))
        logits = logits[..., :length].transpose(0, 2, 1, 3)  # (B, N, T, T)
    else:
        logits = np.asarray(layer.random_logits)[None, :, :length, :length]  # (1, N, T, T)
    logits = np.where(mask[:, None], logits, -1e9)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    z = np.einsum("bnts,bsnh->btnh", weights, v).reshape(x.shape[:2] + (-1,))
    return _dense(layer.output_dense, z), weights


# ---------------------------------------------------------------- harness runs
def test_dense_layer_with_padding_and_causal_mask():
    run_layer_test(
        SynthesizerAttention,
        {"num_heads": 2, "key_dim": 4, "max_length": L, "mode": "dense", "hidden_dim": 12,
         "fused_qkv": True, "dropout": 0.1},
        {"query": _x(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_random_layer_returns_weights():
    run_layer_test(
        SynthesizerAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 10, "max_length": L,
         "mode": "random"},
        {"query": _x(B, T, D), "attention_mask": RNG.random((B, T, T)) > 0.3},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, 10), (B, 2, T, T)],
    )


def test_fixed_random_layer():
    layer, _ = run_layer_test(
        SynthesizerAttention,
        {"num_heads": 2, "key_dim": 4, "max_length": L, "mode": "random", "trainable_random": False},
        _x(B, T, D),
        expected_output_shape=(B, T, D),
    )
    assert not layer.random_logits.trainable
    assert all("random_logits" not in w.path for w in layer.trainable_weights)


# ---------------------------------------------------------------- the definition
@pytest.mark.parametrize("mode", ["dense", "random"])
def test_equals_softmax_of_the_synthetic_logits_times_values(mode):
    assert get_attention("synthesizer") is SynthesizerAttention
    assert_equals_the_definition(mode)


def assert_equals_the_definition(mode, call=_eager):
    """The layer (with an attention mask and padding, and causal) equals :func:`_reference`.
    ``call(layer, *inputs, **kwargs)`` runs it (the JAX checks pass ``harness.jit_call``)."""
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=L, mode=mode)
    x = _x(B, T, D)
    mask = (RNG.random((B, T, T)) > 0.4) | np.eye(T, dtype=bool)
    got, weights = call(layer, x, attention_mask=mask, padding_mask=PADDING,
                        return_attention_scores=True)  # fmt: skip
    want, want_weights = _reference(layer, x, mask & PADDING[:, None, :])
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)
    causal = np.tril(np.ones((T, T), bool))[None].repeat(B, 0)
    want, _ = _reference(layer, x, causal)
    np.testing.assert_allclose(np.asarray(call(layer, x, use_causal_mask=True)), want, atol=1e-5)


def test_random_weights_do_not_depend_on_the_input():
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=L, mode="random")
    _, first = layer(_x(B, T, D), return_attention_scores=True)
    _, second = layer(_x(B, T, D), return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(first), np.asarray(second), atol=1e-6)


def test_shorter_sequences_use_the_leading_logits():
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=L, mode="random")
    x = _x(1, 3, D)
    _, weights = layer(x, return_attention_scores=True)
    logits = np.asarray(layer.synthetic_logits(x))
    np.testing.assert_allclose(logits, np.asarray(layer.random_logits)[None, :, :3, :3])
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, atol=1e-5)


def test_dropout_only_in_training():
    assert_dropout_only_in_training(SynthesizerAttention(num_heads=2, key_dim=4, max_length=L, dropout=0.5))


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("mode", ["dense", "random"])
def test_padding_and_causal_never_leak(mode):
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=L, mode=mode, fused_qkv=True)
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), _x(B, T, D), PADDING)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), _x(B, T, D))


def test_clear_errors():
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=4)
    with pytest.raises(ValueError, match="max_length=4, but got a sequence of length 6"):
        layer(_x(B, T, D))
    with pytest.raises(ValueError, match="self-attention only"):
        SynthesizerAttention(num_heads=2, key_dim=4, max_length=L)(_x(B, T, D), _x(B, 5, D))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.init_cache(B, 4)
    with pytest.raises(ValueError, match="Unknown synthesizer mode 'factorized'"):
        SynthesizerAttention(num_heads=2, key_dim=4, mode="factorized")
    with pytest.raises(ValueError, match="no query-key score"):
        SynthesizerAttention(num_heads=2, key_dim=4, score="cosine")
    with pytest.raises(ValueError, match="use mode='random'"):
        SynthesizerAttention(num_heads=2, key_dim=4, mode="dense", trainable_random=False)


# ---------------------------------------------------------------- in the blocks
@pytest.mark.parametrize("mode", ["dense", "random"])
def test_encoder_block_learns(mode):
    assert_encoder_learns("synthesizer", {"max_length": 12, "mode": mode})


def test_decoder_block_is_causal():
    assert_decoder_block_is_causal("synthesizer", {"max_length": 9})


def test_unknown_length_in_a_graph():
    layer = SynthesizerAttention(num_heads=2, key_dim=4, max_length=L)
    assert_dynamic_length_matches(layer, (5, 9))


def test_docstring_examples_run():
    result = doctest.testmod(synthesizer_module)
    assert result.attempted > 0 and result.failed == 0
