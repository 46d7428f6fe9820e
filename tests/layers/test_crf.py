import doctest
import itertools

import keras
import numpy as np
import pytest

from tests.harness import check_padding_leak, fit_built, run_layer_test
from zoo.layers import crf as crf_module
from zoo.layers import (
    CRF,
    CRFAccuracy,
    CRFDecode,
    CRFLoss,
    crf_decode,
    crf_log_likelihood,
    crf_log_partition,
    crf_sequence_score,
)

RNG = np.random.default_rng(0)
B, T, K = 6, 5, 3
# Full, shorter, one token, empty, a hole and leading padding: every kind of mask.
MASK = np.array(
    [
        [1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0],
        [1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
        [1, 1, 0, 1, 0],
        [0, 0, 1, 1, 1],
    ],
    bool,
)
EMISSIONS = RNG.normal(size=(B, T, K)).astype("float32")


def _crf():
    """A built CRF with random (non-zero) transitions."""
    layer = CRF(transitions_initializer=keras.initializers.RandomNormal(stddev=1.0, seed=1))
    layer.build((None, None, K))
    return layer


def _weights(layer):
    weights = (layer.transitions, layer.start_transitions, layer.end_transitions)
    return [np.asarray(w, "float64") for w in weights]


def _all_paths(emissions, transitions, start, end, mask):
    """The definition, one sentence at a time: the score of every one of the K^n tag paths of
    the real tokens, ``start[y_1] + sum emissions + sum transitions + end[y_n]``."""
    sentences = []
    for b in range(emissions.shape[0]):
        real = np.flatnonzero(mask[b])
        paths = {}
        for path in itertools.product(range(emissions.shape[-1]), repeat=len(real)):
            score = 0.0
            if path:
                score = start[path[0]] + end[path[-1]]
                score += sum(emissions[b, t, y] for t, y in zip(real, path))
                score += sum(transitions[a, c] for a, c in zip(path, path[1:]))
            paths[path] = score
        sentences.append((real, paths))
    return sentences


def _logsumexp(values):
    values = np.asarray(values, "float64")
    return values.max() + np.log(np.exp(values - values.max()).sum())


# ---------------------------------------------------------------- against the definition
def test_log_partition_is_logsumexp_over_all_paths():
    layer = _crf()
    potentials = layer(EMISSIONS, mask=MASK)
    got = np.asarray(crf_log_partition(potentials, MASK))
    sentences = _all_paths(EMISSIONS, *_weights(layer), MASK)
    want = [_logsumexp(list(paths.values())) for _, paths in sentences]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got[3] == 0.0  # the empty sentence has one (empty) path


def test_viterbi_is_the_best_of_all_paths():
    layer = _crf()
    tags, scores = crf_decode(layer(EMISSIONS, mask=MASK), MASK)
    tags, scores = np.asarray(tags), np.asarray(scores)
    assert tags.dtype == np.int32
    for b, (real, paths) in enumerate(_all_paths(EMISSIONS, *_weights(layer), MASK)):
        best = max(paths, key=paths.get)
        np.testing.assert_array_equal(tags[b, real], best)
        np.testing.assert_allclose(scores[b], paths[best], rtol=1e-5, atol=1e-5)
        assert not tags[b, ~MASK[b]].any(), "padding positions must decode to 0"


def test_sequence_score_and_likelihood_are_the_definition():
    layer = _crf()
    potentials = layer(EMISSIONS, mask=MASK)
    gold = RNG.integers(0, K, size=(B, T)).astype("int32")
    gold_with_junk = np.where(MASK, gold, 99)  # labels at padding are never read
    score = np.asarray(crf_sequence_score(potentials, gold_with_junk, MASK))
    log_likelihood = np.asarray(crf_log_likelihood(potentials, gold, MASK))
    for b, (real, paths) in enumerate(_all_paths(EMISSIONS, *_weights(layer), MASK)):
        want = paths[tuple(gold[b, real])]
        np.testing.assert_allclose(score[b], want, rtol=1e-5, atol=1e-5)
        log_z = _logsumexp(list(paths.values()))
        np.testing.assert_allclose(log_likelihood[b], want - log_z, atol=1e-5)


def test_zero_transitions_make_the_crf_independent_softmaxes():
    potentials = CRF()(EMISSIONS, mask=MASK)
    gold = RNG.integers(0, K, size=(B, T))
    log_softmax = EMISSIONS - np.log(np.exp(EMISSIONS).sum(-1, keepdims=True))
    want = np.where(MASK, np.take_along_axis(log_softmax, gold[..., None], -1)[..., 0], 0).sum(1)
    np.testing.assert_allclose(crf_log_likelihood(potentials, gold, MASK), want, atol=1e-5)
    tags, _ = crf_decode(potentials, MASK)
    np.testing.assert_array_equal(tags, np.where(MASK, EMISSIONS.argmax(-1), 0))


# ---------------------------------------------------------------- masks
def test_padding_never_changes_real_positions():
    layer = _crf()
    check_padding_leak(lambda x, m: layer(x, mask=m), EMISSIONS, MASK)
    # Padding tokens added at the end change nothing either: potentials, log Z, tags, scores.
    longer = np.concatenate([EMISSIONS, RNG.normal(size=(B, 3, K)).astype("float32")], axis=1)
    longer_mask = np.pad(MASK, ((0, 0), (0, 3)))
    short, long = layer(EMISSIONS, mask=MASK), layer(longer, mask=longer_mask)
    np.testing.assert_allclose(np.asarray(long)[:, :T], short, atol=1e-6)
    np.testing.assert_allclose(
        crf_log_partition(long, longer_mask), crf_log_partition(short, MASK), atol=1e-5
    )
    tags_long, scores_long = crf_decode(long, longer_mask)
    tags, scores = crf_decode(short, MASK)
    np.testing.assert_array_equal(np.asarray(tags_long)[:, :T], tags)
    np.testing.assert_allclose(scores_long, scores, atol=1e-5)


def test_the_implicit_mask_is_the_explicit_mask():
    ids = np.array([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]], "int32")
    inputs = keras.Input((None,), dtype="int32")
    emissions = keras.layers.Dense(K)(keras.layers.Embedding(12, 4, mask_zero=True)(inputs))
    layer = CRF(transitions_initializer="random_normal")
    model = keras.Model(inputs, [emissions, layer(emissions)])
    emitted, implicit = model(ids)
    np.testing.assert_allclose(implicit, layer(emitted, mask=ids != 0), atol=1e-6)
    # The potentials carry the mask on, for the loss and the metric.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(implicit._keras_mask), ids != 0)


# ---------------------------------------------------------------- harness runs
@pytest.mark.parametrize("explicit_mask", [True, False], ids=["explicit-mask", "no-mask"])
def test_crf_layer(explicit_mask):
    data = {"emissions": EMISSIONS[:2], "mask": MASK[:2]} if explicit_mask else EMISSIONS[:2]
    run_layer_test(
        CRF,
        {"transitions_initializer": "random_normal"},
        data,
        expected_output_shape=(2, T, K, K),
        # The harness's MSE step cannot weight (B, T, K, K) outputs by a (B, T) mask; the
        # unmasked run does the fit step, and the fit tests below train through the mask.
        run_training=not explicit_mask,
    )


def test_crf_decode_layer():
    potentials = np.asarray(_crf()(EMISSIONS, mask=MASK))
    _, (tags,) = run_layer_test(
        CRFDecode, {}, {"potentials": potentials, "mask": MASK}, expected_output_shape=(B, T),
        run_training=False,
    )
    np.testing.assert_array_equal(tags, crf_decode(potentials, MASK)[0])


# ---------------------------------------------------------------- training with fit
def _toy_model():
    ids = keras.Input((None,), dtype="int32", name="ids")
    x = keras.layers.Embedding(8, 8, mask_zero=True, name="embedding")(ids)
    emissions = keras.layers.Dense(2, name="emissions")(x)
    return keras.Model(ids, CRF(name="crf")(emissions))


def _alternating_task(n, rng):
    """Tags alternate 0, 1, 0, ... or 1, 0, 1, ..., chosen by the first token (1 or 2); the
    other tokens are noise (3..7) and sentences have 2 to 6 tokens, then padding (0). Emissions
    alone cannot tell the tag of a noise token; the transitions can."""
    ids = np.zeros((n, 6), "int32")
    tags = np.full((n, 6), 7, "int32")  # junk labels at padding
    for b in range(n):
        length, phase = rng.integers(2, 7), rng.integers(0, 2)
        ids[b, :length] = np.concatenate([[1 + phase], rng.integers(3, 8, length - 1)])
        tags[b, :length] = (phase + np.arange(length)) % 2
    return ids, tags


def test_crf_loss_and_accuracy_under_fit_are_the_masked_references():
    model = _toy_model()
    ids, tags = _alternating_task(8, np.random.default_rng(1))
    model.compile(loss=CRFLoss(), metrics=[CRFAccuracy()])
    result = model.evaluate(ids, tags, batch_size=8, verbose=0, return_dict=True)
    mask = ids != 0
    potentials = model(ids)
    nll = -np.asarray(crf_log_likelihood(potentials, np.where(mask, tags, 0), mask))
    np.testing.assert_allclose(result["loss"], nll.sum() / mask.sum(), rtol=1e-5)
    decoded = np.asarray(crf_decode(potentials, mask)[0])
    np.testing.assert_allclose(result["accuracy"], (decoded == tags)[mask].mean(), rtol=1e-5)


def test_accuracy_counts_every_token_once_across_batches_of_different_lengths():
    layer, metric = _crf(), CRFAccuracy()
    right = total = 0
    for batch, length in ((slice(0, 2), 5), (slice(2, 6), 3)):  # (2, 5) then (4, 3) tokens
        potentials = layer(EMISSIONS[batch, :length], mask=MASK[batch, :length])
        mask = MASK[batch, :length]
        tags = RNG.integers(0, K, size=mask.shape)
        metric.update_state(tags, potentials)
        decoded = np.asarray(crf_decode(potentials, mask)[0])
        right += int(((decoded == tags) & mask).sum())
        total += int(mask.sum())
    np.testing.assert_allclose(float(metric.result()), right / total, rtol=1e-6)


def _loss_and_accuracy(model, ids, tags):
    """The masked mean negative log-likelihood and the decoding accuracy (the references of
    CRFLoss and CRFAccuracy above)."""
    mask = ids != 0
    potentials = model(ids)
    nll = -np.asarray(crf_log_likelihood(potentials, np.where(mask, tags, 0), mask))
    decoded = np.asarray(crf_decode(potentials, mask)[0])
    return nll.sum() / mask.sum(), (decoded == tags)[mask].mean()


def test_fit_learns_transitions_that_emissions_alone_cannot():
    ids, tags = _alternating_task(64, np.random.default_rng(2))
    model = _toy_model()
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss=CRFLoss(), metrics=[CRFAccuracy()])
    before, _ = _loss_and_accuracy(model, ids, tags)
    # 40 steps on the one batch, in one epoch: 40 epochs of one step cost twice as much.
    fit_built(model, np.tile(ids, (40, 1)), np.tile(tags, (40, 1)), batch_size=64,
              shuffle=False, verbose=0)  # fmt: skip
    loss, accuracy = _loss_and_accuracy(model, ids, tags)
    assert loss < 0.2 * before, (before, loss)
    assert accuracy == 1.0
    # A softmax over the same emissions is at chance on the noise tokens.
    transitions = np.asarray(model.get_layer("crf").transitions)
    assert transitions[0, 1] > transitions[0, 0] and transitions[1, 0] > transitions[1, 1]


def test_unknown_lengths_trace_and_fit():
    import tensorflow as tf  # a graph with an unknown T, as `fit` traces variable-length batches

    potential_spec = tf.TensorSpec((None, None, K, K), tf.float32)
    mask_spec = tf.TensorSpec((None, None), tf.bool)
    tags_spec = tf.TensorSpec((None, None), tf.int32)
    layer = _crf()
    potentials = layer(EMISSIONS, mask=MASK)
    gold = RNG.integers(0, K, size=(B, T)).astype("int32")
    traced = tf.function(crf_log_likelihood, input_signature=[potential_spec, tags_spec, mask_spec])
    np.testing.assert_allclose(
        traced(potentials, gold, MASK), crf_log_likelihood(potentials, gold, MASK), atol=1e-5
    )
    decode = tf.function(crf_decode, input_signature=[potential_spec, mask_spec])
    np.testing.assert_array_equal(decode(potentials, MASK)[0], crf_decode(potentials, MASK)[0])

    def batches():  # three lengths: Keras retraces with an unknown T
        rng = np.random.default_rng(3)
        while True:
            for length in (3, 6, 4):
                ids, tags = _alternating_task(8, rng)
                yield ids[:, :length], tags[:, :length]

    model = _toy_model()
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=CRFLoss(), metrics=[CRFAccuracy()])
    history = fit_built(model, batches(), steps_per_epoch=6, epochs=2, shuffle=False,
                        verbose=0).history
    assert np.all(np.isfinite(history["loss"]))


def test_docstring_examples_run():
    result = doctest.testmod(crf_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_loss_and_its_gradient_compile_with_xla_for_unknown_lengths():
    """`fit(jit_compile=True)` traces an unknown T; the gradient of a loop under XLA needs its
    bound. Values and gradients equal the eager ones, and Viterbi compiles too."""
    import tensorflow as tf

    potentials = tf.convert_to_tensor(_crf()(EMISSIONS, mask=MASK))
    gold = RNG.integers(0, K, size=(B, T)).astype("int32")

    def loss_and_gradient(potentials, tags, mask):
        with tf.GradientTape() as tape:
            tape.watch(potentials)
            loss = -tf.reduce_sum(crf_log_likelihood(potentials, tags, mask))
        return loss, tape.gradient(loss, potentials)

    compiled = tf.function(loss_and_gradient, jit_compile=True, input_signature=[
        tf.TensorSpec((None, None, K, K), tf.float32), tf.TensorSpec((None, None), tf.int32),
        tf.TensorSpec((None, None), tf.bool)])
    for got, want in zip(compiled(potentials, gold, MASK), loss_and_gradient(potentials, gold, MASK)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    decode = tf.function(crf_decode, jit_compile=True)
    np.testing.assert_array_equal(decode(potentials, MASK)[0], crf_decode(potentials, MASK)[0])

    model = _toy_model()
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=CRFLoss(), metrics=[CRFAccuracy()],
                  jit_compile=True)
    ids, tags = _alternating_task(64, np.random.default_rng(4))
    history = fit_built(model, ids, tags, batch_size=16, epochs=15, verbose=0).history
    assert history["accuracy"][-1] == 1.0, history
