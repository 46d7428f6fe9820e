"""The one-query path of scaled_dot_product_attention (a decoding step) against the formula
written out in NumPy, and its mask."""

import numpy as np
import pytest
from keras import ops

from zoo.layers.attention.scaled_dot_product import (
    _single_query_applies,
    scaled_dot_product_attention,
)


def _reference(q, k, v, mask, scale):
    """softmax(scale q.k, masked) v, one query per row: (B, 1, N, H), (B, N, 1, S)."""
    scores = np.einsum("btnh,bsnh->bnts", q, k).astype("float64") * scale
    scores = np.where(mask[:, None], scores, -np.inf)  # (B, 1, S) -> (B, N, 1, S)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, v), weights


@pytest.mark.parametrize("score, scale", [("scaled_dot", 1 / np.sqrt(8)), ("dot", 1.0)])
def test_one_query_equals_the_formula_and_never_sees_a_masked_key(score, scale):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 1, 2, 8)).astype("float32")
    k = rng.normal(size=(3, 5, 2, 8)).astype("float32")
    v = rng.normal(size=(3, 5, 2, 6)).astype("float32")
    mask = np.ones((3, 1, 5), bool)
    mask[0, 0, 3:] = False
    mask[2, 0, :1] = False
    q_, k_, v_, mask_ = (ops.convert_to_tensor(x) for x in (q, k, v, mask))
    assert _single_query_applies(q_, mask_, score, None, None, False)
    out, weights = scaled_dot_product_attention(
        q_, k_, v_, mask=mask_, score=score, return_weights=True
    )
    expected_out, expected_weights = _reference(q, k, v, mask, scale)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected_out, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), expected_weights, atol=1e-6)
    # What a query may not attend moves nothing.
    k[~np.broadcast_to(mask[:, 0, :, None, None], k.shape)] = 100.0
    v[~np.broadcast_to(mask[:, 0, :, None, None], v.shape)] = -100.0
    moved = scaled_dot_product_attention(
        ops.convert_to_tensor(q), ops.convert_to_tensor(k), ops.convert_to_tensor(v),
        mask=mask_, score=score,
    )  # fmt: skip
    np.testing.assert_allclose(ops.convert_to_numpy(moved), ops.convert_to_numpy(out), atol=1e-6)
