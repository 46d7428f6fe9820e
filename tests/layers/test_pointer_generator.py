import doctest

import keras
import numpy as np
import pytest

from tests.harness import run_layer_test
from zoo.layers import PointerGenerator
from zoo.layers import pointer_generator as pointer_generator_module
from zoo.layers.pointer_generator import copied_source_tokens, scatter_to_ids

B, T, S, D, V = 2, 3, 5, 8, 12
RNG = np.random.default_rng(0)
# Repeated ids (7 twice in the first source, 4 three times in the second) and padding.
SOURCE_IDS = np.array([[7, 5, 7, 3, 0], [4, 9, 4, 4, 3]], "int32")
# Unknown tokens (id 1), for the extended ids.
UNKNOWN_SOURCE_IDS = np.array([[7, 1, 5, 1, 0], [1, 9, 4, 4, 3]], "int32")
INPUTS = {
    "logits": RNG.normal(size=(B, T, V)).astype("float32") * 2,
    "decoder_state": RNG.normal(size=(B, T, D)).astype("float32"),
    "decoder_input": RNG.normal(size=(B, T, D)).astype("float32"),
    "memory": RNG.normal(size=(B, S, D)).astype("float32"),
    "source_ids": SOURCE_IDS,
}


def call(layer, inputs=INPUTS, **kwargs):
    return [np.asarray(x) for x in layer(**inputs, return_copy_scores=True, **kwargs)]


def with_gate(bias, **kwargs):
    """A layer whose generation probability is sigmoid(bias) everywhere."""
    layer = PointerGenerator(**kwargs)
    call(layer)  # builds it
    gate = layer.generation_gate
    gate.set_weights([np.zeros_like(gate.kernel), np.full((1,), bias, "float32")])
    return layer


def reference_copy_weights(layer, inputs=INPUTS):
    """The copy attention by its definition, in NumPy."""
    query = inputs["decoder_state"] @ np.asarray(layer.query_dense.kernel)  # (B, T, K)
    keys = inputs["memory"] @ np.asarray(layer.key_dense.kernel)  # (B, S, K)
    scores = np.einsum("btk,bsk->bts", query, keys) / np.sqrt(query.shape[-1])
    scores = np.where(inputs["source_ids"][:, None, :] != 0, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def test_layer_contract():
    run_layer_test(PointerGenerator, {"key_dim": 4}, INPUTS, expected_output_shape=(B, T, V))


def test_the_mixture_is_a_distribution_and_its_own_log_softmax():
    log_p, p_gen, weights = call(PointerGenerator())
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)
    assert np.all((p_gen > 0) & (p_gen < 1))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    # What the from-logits loss and the searches compute reads the log-probabilities unchanged.
    np.testing.assert_allclose(np.asarray(keras.ops.log_softmax(log_p)), log_p, atol=1e-5)


def test_p_gen_one_gives_the_plain_softmax():
    log_p, p_gen, _ = call(with_gate(60.0))
    np.testing.assert_allclose(p_gen, 1.0)
    expected = np.asarray(keras.ops.log_softmax(INPUTS["logits"]))
    np.testing.assert_allclose(log_p, expected, atol=1e-6)


def test_p_gen_zero_puts_the_copy_weights_on_the_source_ids():
    """Each source position's weight lands on its id; repeated ids add up; padding gets none."""
    layer = with_gate(-60.0)
    log_p, _, weights = call(layer)
    np.testing.assert_allclose(weights, reference_copy_weights(layer), atol=1e-5)
    assert np.all(weights[0, :, 4] == 0)  # the padding of the first source
    expected = np.zeros((B, T, V))
    for b in range(B):
        for s in range(S):
            expected[b, :, SOURCE_IDS[b, s]] += weights[b, :, s]
    np.testing.assert_allclose(np.exp(log_p), expected, atol=1e-5)
    np.testing.assert_allclose(expected[1, :, 4], weights[1, :, [0, 2, 3]].sum(0), atol=1e-6)


def test_the_mixture_weighs_the_two_distributions_by_p_gen():
    layer = PointerGenerator()
    log_p, p_gen, weights = call(layer)
    vocab = np.asarray(keras.ops.softmax(INPUTS["logits"]))
    copy = np.asarray(scatter_to_ids(weights, SOURCE_IDS, V))
    np.testing.assert_allclose(np.exp(log_p), p_gen * vocab + (1 - p_gen) * copy, atol=1e-5)


def test_scatter_to_ids_sums_repeated_ids():
    weights = RNG.random((B, T, S)).astype("float32")
    expected = np.zeros((B, T, V), "float32")
    np.add.at(expected, (np.arange(B)[:, None, None], np.arange(T)[None, :, None],
                         SOURCE_IDS[:, None, :]), weights)  # fmt: skip
    np.testing.assert_allclose(np.asarray(scatter_to_ids(weights, SOURCE_IDS, V)), expected,
                               atol=1e-6)  # fmt: skip


def test_cached_keys_give_the_same_output():
    layer = PointerGenerator()
    full = call(layer)[0]
    keys = layer.compute_cache(INPUTS["memory"])
    np.testing.assert_allclose(call(layer, memory_keys=keys)[0], full, atol=1e-6)


def test_extended_ids_copy_unknown_source_tokens():
    """Unknown source tokens (id 1) are copied as V + their position, and read back as the
    source's own tokens."""
    inputs = {**INPUTS, "source_ids": UNKNOWN_SOURCE_IDS}
    layer = with_gate(-60.0, extended=True)
    log_p, _, weights = call(layer, inputs)
    assert log_p.shape == (B, T, V + S)
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)
    p = np.exp(log_p)
    np.testing.assert_allclose(p[0, :, V + 1], weights[0, :, 1], atol=1e-6)
    np.testing.assert_allclose(p[0, :, V + 3], weights[0, :, 3], atol=1e-6)
    np.testing.assert_allclose(p[1, :, V + 0], weights[1, :, 0], atol=1e-6)
    assert np.all(p[..., 1] < 1e-20)  # nothing is copied as the unknown id itself
    assert np.all(p[0, :, V + 2] < 1e-20)  # a known token keeps its own id
    # The vocabulary's mass stays on its ids.
    log_p, _, _ = call(with_gate(60.0, extended=True), inputs)
    vocab = np.asarray(keras.ops.softmax(INPUTS["logits"]))
    np.testing.assert_allclose(np.exp(log_p)[..., :V], vocab, atol=1e-6)
    words = [["the", "Zaphod", "and", "Trillian", ""], ["Marvin", "is", "sad", "sad", "."]]
    assert copied_source_tokens([[V + 1, 5, V + 3], [V, 3, 3]], words, V) == [
        ["Zaphod", 5, "Trillian"],
        ["Marvin", 3, 3],
    ]


def test_extended_layer_contract():
    run_layer_test(
        PointerGenerator,
        {"extended": True, "unk_id": 1},
        {**INPUTS, "source_ids": UNKNOWN_SOURCE_IDS},
        expected_output_shape=(B, T, V + S),
    )


def test_bad_key_dim_is_refused():
    with pytest.raises(ValueError, match="key_dim must be None or a positive int"):
        PointerGenerator(key_dim=0)


def test_docstring_examples():
    result = doctest.testmod(pointer_generator_module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
