import numpy as np
import pytest

from tests.harness import check_causal_leak, check_padding_leak, run_layer_test
from tests.layers.test_linear_attention import (
    B,
    CAUSAL,
    D,
    PADDING,
    S,
    SOURCE_PADDING,
    T,
    encoder_loss_goes_down,
    output,
    project,
    quadratic_form,
    sample,
)
from zoo.layers.attention import PerformerAttention, get_attention
from zoo.layers.attention.performer import favor_attention, orthogonal_random_features


def _favor_phi(x, w):
    """The paper's positive random features, phi(x) = exp(w x' - |x'|^2 / 2) / sqrt(m)."""
    x = x / x.shape[-1] ** 0.25
    return np.exp(x @ w.T - 0.5 * (x**2).sum(-1, keepdims=True)) / np.sqrt(len(w))


def _features(layer):
    return np.array(layer.random_features.numpy(), "float64")


def _softmax_attention(q, k, v):
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, v)


# ---------------------------------------------------------------- harness runs
def test_causal_self_attention_layer():
    run_layer_test(
        PerformerAttention,
        {"num_heads": 2, "key_dim": 8, "fused_qkv": True, "num_features": 16, "chunk_size": 4},
        {"query": sample(B, T, D), "padding_mask": PADDING},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_with_redraw_returns_weights():
    run_layer_test(
        PerformerAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "num_features": 12, "redraw": 2, "seed": 3},
        {"query": sample(B, T, D), "value": sample(B, S, 12), "padding_mask": SOURCE_PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, D), (B, 2, T, S)],
    )


# ---------------------------------------------------------------- the definition
def test_orthogonal_random_features():
    w = np.asarray(orthogonal_random_features(20, 8, seed=0), "float64")
    assert w.shape == (20, 8)
    for block in (w[:8], w[8:16], w[16:]):
        gram = block @ block.T
        np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-4)  # orthogonal rows
    assert np.abs(w[:8] @ w[8:16].T).max() > 0.1  # independent blocks, not one repeated
    norms = np.linalg.norm(w, axis=1)
    assert norms.std() > 0.1 and 1.5 < norms.mean() < 4.5  # chi(8) norms: mean ~2.7
    np.testing.assert_array_equal(np.asarray(orthogonal_random_features(20, 8, seed=0)), w)


@pytest.mark.parametrize("causal", [False, True])
def test_equals_its_quadratic_form(causal):
    layer = PerformerAttention(num_heads=2, key_dim=8, num_features=24, chunk_size=3)
    assert get_attention("performer") is PerformerAttention
    x = sample(B, T, D) * 3  # large inputs: the features span many orders of magnitude
    got, weights = layer(
        x, padding_mask=PADDING, use_causal_mask=causal, return_attention_scores=True
    )
    q, k, v = project(layer, x)
    w = _features(layer)
    mask = (CAUSAL[None] if causal else True) & PADDING[:, None, :]
    z, want_weights = quadratic_form(_favor_phi(q, w), _favor_phi(k, w), v, mask)
    np.testing.assert_allclose(np.asarray(got), output(layer, z), atol=1e-5)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)


def test_cross_attention_equals_its_quadratic_form():
    layer = PerformerAttention(num_heads=2, key_dim=4, value_dim=5, num_features=8)
    query, value = sample(B, T, D), sample(B, S, 12)
    got = layer(query, value, padding_mask=SOURCE_PADDING)
    q, k, v = project(layer, query, value)
    w = _features(layer)
    mask = np.broadcast_to(SOURCE_PADDING[:, None, :], (B, T, S))
    z, _ = quadratic_form(_favor_phi(q, w), _favor_phi(k, w), v, mask)
    np.testing.assert_allclose(np.asarray(got), output(layer, z), atol=1e-5)


def test_approximation_error_falls_as_features_grow():
    # FAVOR+ is an unbiased estimate of softmax attention whose error falls like 1/sqrt(m).
    rng = np.random.default_rng(1)
    d = 16
    q, k = (rng.normal(size=(2, 32, 2, d)).astype("float32") * 0.5 for _ in range(2))
    v = rng.normal(size=(2, 32, 2, d)).astype("float32")
    exact = _softmax_attention(q.astype("float64"), k.astype("float64"), v.astype("float64"))
    errors = []
    for m in (16, 64, 256):
        runs = [
            np.asarray(favor_attention(q, k, v, orthogonal_random_features(m, d, seed=seed)))
            for seed in range(5)
        ]
        errors.append(np.mean([np.linalg.norm(r - exact) / np.linalg.norm(exact) for r in runs]))
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < 0.2, errors


# ---------------------------------------------------------------- random features
def test_redraw_changes_the_features_in_training_only():
    layer = PerformerAttention(num_heads=2, key_dim=8, num_features=16, redraw=True, seed=1)
    x = sample(B, T, D)
    first = np.asarray(layer(x))
    features = _features(layer)
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), first)
    np.testing.assert_array_equal(_features(layer), features)
    trained = np.asarray(layer(x, training=True))
    assert np.abs(_features(layer) - features).max() > 0.1
    assert np.abs(trained - first).max() > 1e-4
    np.testing.assert_array_equal(np.asarray(layer(x)), np.asarray(layer(x)))


@pytest.mark.parametrize("redraw, changes", [(False, []), (3, [3, 6])])
def test_redraw_schedule(redraw, changes):
    layer = PerformerAttention(num_heads=2, key_dim=8, num_features=16, redraw=redraw)
    x = sample(B, T, D)
    layer(x)
    changed = []
    for call in range(1, 7):
        before = _features(layer)
        layer(x, training=True)
        if not np.array_equal(before, _features(layer)):
            changed.append(call)
    assert changed == changes


def test_seed_fixes_the_features():
    x = sample(B, T, D)
    layers = [PerformerAttention(num_heads=2, key_dim=8, seed=s) for s in (5, 5, 6)]
    for layer in layers:
        layer(x)
    assert layers[0].num_features == round(8 * np.log(8))  # the paper's m = d log d
    np.testing.assert_array_equal(_features(layers[0]), _features(layers[1]))
    assert not np.array_equal(_features(layers[0]), _features(layers[2]))


# ---------------------------------------------------------------- masks and errors
@pytest.mark.parametrize("causal", [False, True])
def test_padding_never_leaks(causal):
    layer = PerformerAttention(num_heads=2, key_dim=8, num_features=16, chunk_size=3)
    check_padding_leak(
        lambda x, m: layer(x, padding_mask=m, use_causal_mask=causal), sample(B, T, D), PADDING
    )


def test_causal_never_leaks():
    layer = PerformerAttention(num_heads=2, key_dim=8, num_features=16, chunk_size=3)
    check_causal_leak(lambda x: layer(x, use_causal_mask=True), sample(B, T, D))


def test_unsupported_arguments_are_clear_errors():
    x = sample(B, T, D)
    with pytest.raises(ValueError, match="arbitrary .* `attention_mask`"):
        PerformerAttention(num_heads=2, key_dim=4)(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="has no KV cache"):
        PerformerAttention(num_heads=2, key_dim=4).init_cache(B, T)
    with pytest.raises(ValueError, match="num_features must be >= 1"):
        PerformerAttention(num_heads=2, key_dim=4, num_features=0)
    for redraw in (0, -2, 1.5, "yes"):
        with pytest.raises(ValueError, match="redraw must be"):
            PerformerAttention(num_heads=2, key_dim=4, redraw=redraw)


# ---------------------------------------------------------------- blocks
def test_encoder_block_trains():
    encoder_loss_goes_down("performer", {"num_features": 16, "redraw": 5})

