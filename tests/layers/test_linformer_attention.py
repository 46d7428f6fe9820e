import numpy as np
import pytest

from tests.harness import check_padding_leak, run_layer_test
from tests.layers.test_linear_attention import (
    B,
    D,
    PADDING,
    S,
    SOURCE_PADDING,
    T,
    encoder_loss_goes_down,
    output,
    project,
    sample,
)
from zoo.layers.attention import LinformerAttention, MultiHeadAttention, get_attention


def _linformer(layer, query, value, padding):
    """Wang et al. 2020, eq. (7), per head: softmax(Q (E^T K)^T / sqrt(H)) (F^T V), with the
    first S rows of E and F, and the padded keys and values zeroed first."""
    q, k, v = project(layer, query, value)
    real = padding[:, :, None, None]
    e = np.asarray(layer.key_projection, "float64")[: k.shape[1]]  # (S, P)
    f = np.asarray(layer.value_projection, "float64")[: k.shape[1]]
    k_proj = np.einsum("bsnh,sp->bpnh", k * real, e)
    v_proj = np.einsum("bsnh,sp->bpnh", v * real, f)
    scores = np.einsum("btnh,bpnh->bntp", q, k_proj) / np.sqrt(q.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    z = np.einsum("bntp,bpnh->btnh", p, v_proj)
    dense_weights = np.einsum("bntp,sp->bnts", p, f) * padding[:, None, None, :]
    return output(layer, z), dense_weights


# ---------------------------------------------------------------- harness runs
def test_self_attention_layer():
    run_layer_test(
        LinformerAttention,
        {
            "num_heads": 2,
            "key_dim": 8,
            "fused_qkv": True,
            "max_length": 12,
            "projected_length": 4,
            "dropout": 0.1,
        },
        {"query": sample(B, T, D), "padding_mask": PADDING},
        expected_output_shape=(B, T, D),
    )


def test_cross_attention_layer_shared_projection_returns_weights():
    run_layer_test(
        LinformerAttention,
        {
            "num_heads": 2,
            "key_dim": 4,
            "value_dim": 6,
            "output_dim": 10,
            "max_length": 9,
            "projected_length": 3,
            "share_kv_projection": True,
            "projection_initializer": "random_normal",
        },
        {"query": sample(B, T, D), "value": sample(B, S, 12), "padding_mask": SOURCE_PADDING},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=[(B, T, 10), (B, 2, T, S)],
    )


# ---------------------------------------------------------------- the definition
def test_identity_projections_equal_full_attention():
    layer = LinformerAttention(num_heads=2, key_dim=8, max_length=T, projected_length=T)
    assert get_attention("linformer") is LinformerAttention
    full = MultiHeadAttention(num_heads=2, key_dim=8)
    x = sample(B, T, D)
    layer(x), full(x)
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        getattr(full, name).set_weights(getattr(layer, name).get_weights())
    layer.key_projection.assign(np.eye(T, dtype="float32"))
    layer.value_projection.assign(np.eye(T, dtype="float32"))
    got, weights = layer(x, return_attention_scores=True)
    want, want_weights = full(x, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
    np.testing.assert_allclose(np.asarray(weights), np.asarray(want_weights), atol=1e-6)


@pytest.mark.parametrize("share", [False, True])
def test_cross_attention_with_padding_equals_the_paper(share):
    # S = 7 keys with max_length = 9: the first 7 rows of E and F.
    layer = LinformerAttention(
        num_heads=2,
        key_dim=4,
        value_dim=5,
        max_length=9,
        projected_length=3,
        share_kv_projection=share,
        projection_initializer="random_normal",
    )
    query, value = sample(B, T, D), sample(B, S, 12)
    got, weights = layer(query, value, padding_mask=SOURCE_PADDING, return_attention_scores=True)
    want, want_weights = _linformer(layer, query, value, SOURCE_PADDING)
    assert (layer.value_projection is layer.key_projection) == share
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)


def test_dropout_only_in_training():
    layer = LinformerAttention(
        num_heads=2, key_dim=4, max_length=T, projected_length=4, dropout=0.5
    )
    x = sample(B, T, D)
    inference = np.asarray(layer(x))
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), inference)
    assert np.abs(np.asarray(layer(x, training=True)) - inference).max() > 1e-3


# ---------------------------------------------------------------- masks and errors
def test_padding_never_leaks():
    layer = LinformerAttention(
        num_heads=2, key_dim=8, fused_qkv=True, max_length=T, projected_length=4
    )
    check_padding_leak(lambda x, m: layer(x, padding_mask=m), sample(B, T, D), PADDING)


def test_unsupported_combinations_are_clear_errors():
    layer = LinformerAttention(num_heads=2, key_dim=4, max_length=T, projected_length=4)
    x = sample(B, T, D)
    with pytest.raises(ValueError, match="does not support `use_causal_mask`"):
        layer(x, use_causal_mask=True)
    with pytest.raises(ValueError, match="arbitrary .* `attention_mask`"):
        layer(x, attention_mask=np.ones((B, T, T), bool))
    with pytest.raises(ValueError, match="at most max_length=10 keys; got 12"):
        layer(x, sample(B, 12, D))
    with pytest.raises(ValueError, match="has no KV cache"):
        layer.compute_cache(x)
    with pytest.raises(ValueError, match="must be >= 1"):
        LinformerAttention(num_heads=2, key_dim=4, projected_length=0)


def test_encoder_block_trains():
    encoder_loss_goes_down("linformer", {"max_length": 12, "projected_length": 4})
