"""The layers and models on Keras's JAX backend, every check in one JAX process.

Keras fixes its backend at import and the suite runs on TensorFlow, so these checks run in a
fresh Python with KERAS_BACKEND=jax. Starting that Python costs several seconds, so all the
checks share one process: `run_parts` runs each part in turn, prints ``ok <part>`` or
``FAILED <part>: <error>`` with the traceback, and goes on; one test per part then asserts its
marker.

The process imports zoo and runs the parts with TensorFlow out of reach
(``harness.NoTensorFlow``), as on a GPU machine where it is not installed: the layers and the
models' backbones must not need it. The parts in ``NEEDS_TENSORFLOW`` run last, with it let in.

Each part starts as it would in a process of its own: the test modules' ``RNG`` generators
are put back to their state after import, and the Keras session is cleared.
Forward passes that are compared with a reference run whole under ``jax.jit``
(``harness.jit_call``): eager JAX compiles every op on its own, which costs far more.
"""

import gc
import itertools
import sys
import time
import traceback

import keras
import numpy as np
import pytest
from keras import ops

from tests.harness import NoTensorFlow, jit_call, run_on_jax
from tests.layers import test_aft_attention as aft
from tests.layers import test_clustered_attention as clustered
from tests.layers import test_global_attention as global_attention
from tests.layers import test_local_attention as local
from tests.layers import test_pointer_generator as pointer_generator
from tests.layers import test_sinkhorn_attention as sinkhorn
from tests.layers import test_stateful_attention as stateful
from tests.layers import test_strided_attention as strided
from tests.layers import test_synthesizer_attention as synthesizer
from zoo.layers import (
    CRF,
    ALiBiAttention,
    ALiBiBias,
    CRFAccuracy,
    CRFLoss,
    LearnedPositionEmbedding,
    PointerGenerator,
    RelativePositionAttention,
    RotaryAttention,
    RotaryEmbedding,
    SinusoidalPositionEncoding,
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    crf_decode,
    crf_log_likelihood,
    crf_log_partition,
)
from zoo.models import TaggerHead, build_tagger, tagger_config

# Every module whose `RNG` a part draws from (directly or through a shared helper).
_MODULES_WITH_RNG = (clustered, global_attention, local, sinkhorn, stateful, strided, synthesizer)


# ---------------------------------------------------------------- attention variants
def _local():
    local.assert_matches_pattern(
        lambda: local.LocalAttention(num_heads=2, key_dim=8, window=2),
        lambda n: local.local_pattern(n, 2),
        lengths=(5, 8),
        causal=True,
        call=jit_call,
    )
    local.assert_encoder_learns("local", {"window": 2})


def _strided():
    local.assert_matches_pattern(
        lambda: strided.StridedAttention(num_heads=2, key_dim=8, stride=3, pattern="sparse"),
        lambda n: strided.strided_pattern(n, 3, "sparse"),
        lengths=(5, 12),
        causal=True,
        call=jit_call,
    )
    local.assert_encoder_learns("strided", {"stride": 3, "pattern": "sparse"})


def _global():
    local.assert_matches_pattern(
        lambda: global_attention.GlobalAttention(num_heads=2, key_dim=8, window=2, num_global=2),
        lambda n: global_attention.global_pattern(n, 2, 2),
        lengths=(5, 8),
        causal=False,
        call=jit_call,
    )
    local.assert_encoder_learns("global", {"window": 1, "num_global": 1})


def _clustered():
    clustered.assert_equals_the_reference(4, 2, call=jit_call)
    clustered.assert_centroids_follow_the_routed_means(call=jit_call)
    local.assert_encoder_learns("clustered", {"num_clusters": 2, "chunk_size": 4})


def _sinkhorn():
    sinkhorn.assert_equals_the_slow_reference(True, call=jit_call)
    sinkhorn.assert_equals_the_slow_reference(False, call=jit_call)
    local.assert_encoder_learns("sinkhorn", {"block_size": 4})


def _synthesizer():
    synthesizer.assert_equals_the_definition("dense", call=jit_call)
    synthesizer.test_padding_and_causal_never_leak("random")
    local.assert_encoder_learns("synthesizer", {"max_length": 12})


def _linear_performer_linformer():
    """The three kernel/low-rank variants train in a block; the Performer redraws under jit."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 9, 8)).astype("float32")
    mask = np.array([[1] * 9, [1] * 5 + [0] * 4], bool)
    for attention, kwargs in [
        ("linear", {"chunk_size": 4}),
        ("performer", {"num_features": 8, "redraw": True, "chunk_size": 4}),
        ("linformer", {"max_length": 9, "projected_length": 3}),
    ]:
        inputs, padding = keras.Input((9, 8)), keras.Input((9,), dtype="bool")
        if attention == "linformer":
            block = TransformerEncoderBlock(2, 16, attention=attention, attention_kwargs=kwargs)
        else:
            block = TransformerDecoderBlock(
                2, 16, attention=attention, attention_kwargs=kwargs, cross_attention=False
            )
        hidden = block(inputs, padding_mask=padding)
        model = keras.Model([inputs, padding], hidden)
        model.compile(optimizer="adam", loss="mse")
        layer = block.self_attention_layer
        before = np.array(getattr(layer, "random_features", 0.0))
        loss = model.fit([x, mask], x, epochs=2, verbose=0).history["loss"]
        assert np.all(np.isfinite(loss)), (attention, loss)
        if attention == "performer":  # redrawn in training, under jit
            assert not np.array_equal(before, np.array(layer.random_features))


def _aft():
    """AFT-simple under jax.jit equals its definition (causal, chunked, with padding)."""
    import jax

    aft.assert_equals_the_paper_formula(causal=True, compile_fn=jax.jit)


def _pointer_generator():
    """The copy mixture under jax.jit equals its definition (repeated ids summed, extended ids
    for unknown tokens), and a model over it trains."""
    for extended in (False, True):
        inputs = dict(pointer_generator.INPUTS)
        if extended:
            inputs["source_ids"] = pointer_generator.UNKNOWN_SOURCE_IDS
        layer = PointerGenerator(extended=extended)
        log_p, p_gen, weights = (
            np.asarray(x)
            for x in jit_call(layer, *inputs.values(), return_copy_scores=True)
        )
        np.testing.assert_allclose(
            weights, pointer_generator.reference_copy_weights(layer, inputs), atol=1e-5
        )
        logits, ids = inputs["logits"], inputs["source_ids"]
        vocab = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        copy = np.zeros(log_p.shape)
        for b, s in itertools.product(range(ids.shape[0]), range(ids.shape[1])):
            at_unk = extended and ids[b, s] == 1
            copy[b, :, logits.shape[-1] + s if at_unk else ids[b, s]] += weights[b, :, s]
        vocab = np.pad(vocab, ((0, 0), (0, 0), (0, log_p.shape[-1] - logits.shape[-1])))
        np.testing.assert_allclose(np.exp(log_p), p_gen * vocab + (1 - p_gen) * copy, atol=1e-5)

    symbolic = [keras.Input(x.shape[1:], dtype=str(x.dtype)) for x in inputs.values()]
    model = keras.Model(symbolic, PointerGenerator()(*symbolic))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    before = [np.array(w.value) for w in model.trainable_weights]
    labels = np.zeros(inputs["logits"].shape, "float32")
    loss = model.fit(list(inputs.values()), labels, epochs=1, verbose=0).history["loss"][0]
    assert np.isfinite(loss), loss
    assert all(not np.array_equal(b, np.asarray(w.value))
               for b, w in zip(before, model.trainable_weights))  # fmt: skip


# ---------------------------------------------------------------- position, CRF, blocks
def _position():
    """Cached steps under jax.jit equal the full pass; a tied functional model over each."""
    import jax

    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    for layer in (SinusoidalPositionEncoding(), LearnedPositionEmbedding(8), RotaryEmbedding()):
        full = np.asarray(jit_call(layer, x))
        step = jax.jit(lambda x, i: layer(x, start_index=i))
        np.testing.assert_allclose(np.asarray(step(x[:, 2:4], 2)), full[:, 2:4], atol=1e-6)
    assert ALiBiBias(4)(np.zeros((2, 4, 5, 5), "float32")).shape == (2, 4, 5, 5)
    for cls in (RotaryAttention, ALiBiAttention, RelativePositionAttention):
        layer = cls(num_heads=2, key_dim=8, fused_qkv=True)
        full = np.asarray(jit_call(layer, x, use_causal_mask=True))
        step = jax.jit(lambda token, cache, i: layer(token, cache=cache, cache_index=i))
        cache = layer.init_cache(2, 7)
        for t in range(5):
            out, cache = step(x[:, t : t + 1], cache, t)
            np.testing.assert_allclose(np.asarray(out)[:, 0], full[:, t], atol=1e-5)
    # Symbolic shapes: a tied functional model over every variant.
    for position in ("sinusoidal", "learned"):
        embedding = TokenAndPositionEmbedding(11, 8, max_length=6, position=position, mask_zero=True)
        ids = keras.Input((None,), dtype="int32")
        hidden = embedding(ids)
        for cls in (RotaryAttention, ALiBiAttention, RelativePositionAttention):
            hidden = cls(num_heads=2, key_dim=4)(hidden, use_causal_mask=True)
        model = keras.Model(ids, embedding(hidden, reverse=True))
        assert jit_call(model, np.array([[1, 2, 0]])).shape == (1, 3, 11)


def _chunked():
    """Chunked attention under jax.jit equals full attention in values and gradients (its
    gradient is written out with ops.custom_gradient, which JAX runs through its own path)."""
    import jax

    from zoo.layers.attention import chunked_attention, scaled_dot_product_attention
    from zoo.layers.masking import AttentionMasks

    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, length, 2, 8)).astype("float32") for length in (7, 9, 9))
    padding = np.ones((2, 9), bool)
    padding[1, -2:] = False
    pattern = rng.random((2, 7, 9)) > 0.3
    pattern[0, 2] = False  # a query with no key
    masks = AttentionMasks(padding=padding, attention=pattern)

    def loss(attend, q, k, v):
        y = attend(q, k, v)
        return ops.sum(y * ops.cos(y)), y

    def full(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask=masks.combined(7, 9))

    want = jax.jit(jax.grad(lambda *x: loss(full, *x), argnums=(0, 1, 2), has_aux=True))
    want_grads, want_y = want(q, k, v)
    for chunk_size in (2, 4, 9):
        def chunked(q, k, v, chunk_size=chunk_size):
            return chunked_attention(q, k, v, masks, chunk_size=chunk_size)

        got = jax.jit(jax.grad(lambda *x: loss(chunked, *x), argnums=(0, 1, 2), has_aux=True))
        got_grads, got_y = got(q, k, v)
        for a, b in zip((got_y, *got_grads), (want_y, *want_grads)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)


def _recomputed():
    """The blocked variants' recomputing loop (its gradient written out with
    ops.custom_gradient, which JAX runs through its own path) equals the dense blocks under
    jax.jit: the local window part (alone, and with global keys), grouped attention with keys
    in two parts, and sinkhorn's sorted blocks."""
    import jax

    from tests.layers import test_recomputed_attention as grouped
    from zoo.layers.attention.recomputed import grouped_attention

    def differentiate(loss, arguments):
        given = [i for i, x in enumerate(arguments) if x is not None]

        def of_given(*xs):
            full = list(arguments)
            for i, x in zip(given, xs):
                full[i] = x
            return loss(*full)

        grad = jax.jit(jax.grad(of_given, argnums=tuple(range(len(given))), has_aux=True))
        gradients, aux = grad(*(arguments[i] for i in given))
        gradients = iter(gradients)
        return aux, [None if x is None else next(gradients) for x in arguments]

    recomputed, dense = local.window_parts(3, True, "cosine", 6)  # (TF runs every case)
    q, k, v, scale, weights = local.window_inputs("cosine")
    args = (q, k, v, scale, weights, differentiate)
    local.assert_same_values_and_gradients(
        local.window_part_gradients(recomputed, *args), local.window_part_gradients(dense, *args)
    )
    looped, merged = global_attention.global_window_parts(True, "cosine", 6)  # global keys
    local.assert_same_values_and_gradients(
        local.window_part_gradients(looped, *args), local.window_part_gradients(merged, *args)
    )
    q, k, v, mask = grouped._inputs(5, 2)
    mask = tuple(np.logical_or(m, np.eye(3, m.shape[-1], dtype=bool)) for m in mask)

    def loss(attend, q, *kv):
        out, lse = attend(q, kv[:2], kv[2:], mask)
        return ops.sum(out * ops.cos(out)) + ops.sum(lse), (out, lse)

    def loop(q, k, v, mask):
        return grouped_attention(q, k, v, mask, step_queries=6)

    for attend in (loop, grouped.dense_grouped_attention):
        grad = jax.jit(jax.grad(lambda *x: loss(attend, *x), argnums=tuple(range(5)),
                                has_aux=True))  # fmt: skip
        if attend is loop:
            got = grad(q, *k, *v)
        else:
            want = grad(q, *k, *v)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)

    # Sinkhorn's sorted blocks, made inside the loop's steps, S differentiated too.
    from zoo.layers.attention.sinkhorn import sorted_block_attention

    inputs = sinkhorn.sorted_block_inputs(True)
    sinkhorn.assert_sorted_blocks_match(
        sinkhorn.sorted_block_gradients(
            lambda *x: sorted_block_attention(*x, step_queries=6), inputs, differentiate),
        sinkhorn.sorted_block_gradients(sinkhorn.dense_sorted_block_attention, inputs,
                                        differentiate),
    )  # fmt: skip


def _fused():
    """On JAX, scaled_dot_product_attention goes through keras.ops.dot_product_attention (a
    GPU's fused kernels); it equals softmax(q k / sqrt(H)) v written out, masks included."""
    import jax

    from zoo.layers.attention import scaled_dot_product_attention
    from zoo.layers.attention import scaled_dot_product as module

    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, length, 2, 8)).astype("float32") for length in (5, 6, 6))
    mask = rng.random((2, 5, 6)) > 0.4
    mask[1, 3] = False  # a query with no key: spread evenly, as in every other path
    assert module._fused_applies("scaled_dot", None, None, 0.0, False)
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(8)
    scores = np.where(mask[:, None], scores, -1e9)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    want = np.einsum("bnts,bsnh->btnh", weights, v)
    calls, fused = [], ops.dot_product_attention
    ops.dot_product_attention = lambda *a, **kw: calls.append(1) or fused(*a, **kw)
    try:
        got = jax.jit(lambda *x: scaled_dot_product_attention(*x[:3], mask=x[3]))(q, k, v, mask)
    finally:
        ops.dot_product_attention = fused
    assert calls, "keras.ops.dot_product_attention was not called"
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def _crf():
    """The CRF trains, its implicit mask reaches the loss, and jitted decoding and the log
    partition equal brute force over every tag path."""
    import jax

    rng = np.random.default_rng(0)
    ids = rng.integers(1, 8, size=(4, 5)).astype("int32")
    ids[1, 3:] = 0
    tags = (ids % 3).astype("int32")
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(8, 4, mask_zero=True)(inputs)
    model = keras.Model(inputs, CRF(name="crf")(keras.layers.Dense(3)(x)))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=CRFLoss(), metrics=[CRFAccuracy()])
    before = {w.path: np.array(w.value) for w in model.trainable_weights}
    loss = model.fit(ids, tags, epochs=5, verbose=0).history["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], loss
    for w in model.trainable_weights:
        assert not np.array_equal(before[w.path], np.asarray(w.value)), w.path

    potentials, mask = jit_call(model, ids), ids != 0
    # The implicit mask reaches the loss under JAX too: junk labels at padding are ignored.
    junk = np.where(mask, tags, 5)
    result = model.evaluate(ids, junk, verbose=0, return_dict=True)
    nll = -np.asarray(jax.jit(crf_log_likelihood)(potentials, tags, mask))
    assert abs(result["loss"] - nll.sum() / mask.sum()) < 1e-4, (result, nll.sum() / mask.sum())
    decoded, _ = jax.jit(crf_decode)(potentials, mask)
    log_z = np.asarray(jax.jit(crf_log_partition)(potentials, mask))
    p = np.asarray(potentials, "float64")
    for b in range(4):
        n = int(mask[b].sum())
        scores = {
            path: p[b, 0, 0, path[0]] + sum(p[b, t, path[t - 1], path[t]] for t in range(1, n))
            for path in itertools.product(range(3), repeat=n)
        }
        best = max(scores, key=scores.get)
        assert tuple(np.asarray(decoded)[b, :n]) == best
        values = np.array(list(scores.values()))
        assert abs(log_z[b] - (values.max() + np.log(np.exp(values - values.max()).sum()))) < 1e-4


def _blocks():
    """An encoder and a decoder block build, train and decode (cached, under jax.jit)."""
    import jax

    B, S, T, D, N, F = 2, 6, 5, 8, 2, 16
    rng = np.random.default_rng(0)
    source = rng.normal(size=(B, S, D)).astype("float32")
    source_mask = np.array([[1, 1, 1, 1, 0, 0], [1] * S], bool)
    target = rng.normal(size=(B, T, D)).astype("float32")

    # A functional model: encoder block, decoder block (with its cross attention), a head.
    source_in = keras.Input((S, D), name="source")
    mask_in = keras.Input((S,), dtype="bool", name="source_mask")
    target_in = keras.Input((T, D), name="target")
    encoder = TransformerEncoderBlock(
        N, F, normalize_first=True, activation="swiglu", name="encoder"
    )
    decoder = TransformerDecoderBlock(
        N, F, attention_kwargs={"score": "cosine"}, dropout=0.1, name="decoder"
    )
    memory = encoder(source_in, padding_mask=mask_in)
    hidden = decoder(target_in, memory, encoder_padding_mask=mask_in)
    model = keras.Model([source_in, mask_in, target_in], keras.layers.Dense(3, name="head")(hidden))

    # Forward pass.
    inputs = [source, source_mask, target]
    out = jit_call(model, inputs)
    assert isinstance(out, jax.Array), type(out)
    assert out.shape == (B, T, 3) and np.all(np.isfinite(np.asarray(out)))

    # One fit step: a finite loss, and every weight moves (but the cross-attention key
    # bias, to which softmax is invariant).
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    before = {w.path: np.array(w.value) for w in model.trainable_weights}
    labels = rng.normal(size=(B, T, 3)).astype("float32")
    loss = model.fit(inputs, labels, batch_size=B, epochs=1, verbose=0).history["loss"][0]
    assert np.isfinite(loss), loss
    unchanged = [
        w.path for w in model.trainable_weights
        if np.array_equal(before[w.path], np.asarray(w.value))
        and "cross_attention/key/bias" not in w.path
    ]
    assert not unchanged, unchanged

    # Cached decoding, each step under jax.jit with a traced cache index, against the
    # full causal pass.
    memory = jit_call(encoder, source, padding_mask=source_mask)
    full = np.asarray(jit_call(decoder, target, memory, encoder_padding_mask=source_mask))

    @jax.jit
    def step(token, self_cache, cross_cache, index):
        return decoder(
            token,
            self_cache=self_cache,
            cross_cache=cross_cache,
            cache_index=index,
            encoder_padding_mask=source_mask,
        )

    self_cache = decoder.init_self_cache(B, T + 1)
    cross_cache = decoder.compute_cross_cache(memory)
    for t in range(T):
        y, self_cache, cross_cache = step(target[:, t : t + 1], self_cache, cross_cache, t)
        np.testing.assert_allclose(np.asarray(y)[:, 0], full[:, t], atol=1e-5)

    # Keras implicit masks (mask_zero=True) reach the attention under compiled predict too,
    # where JAX tensors cannot carry a _keras_mask attribute.
    ids = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 1, 2]])
    ids_in = keras.Input((S,), dtype="int32")
    embedded = keras.layers.Embedding(10, D, mask_zero=True, name="embed")(ids_in)
    implicit = keras.Model(ids_in, encoder(embedded))
    explicit_in = keras.Input((S,), dtype="int32")
    explicit_embedded = implicit.get_layer("embed")(explicit_in)
    explicit = keras.Model(
        explicit_in, encoder(explicit_embedded, padding_mask=ops.not_equal(explicit_in, 0))
    )
    real = ids != 0
    np.testing.assert_allclose(
        implicit.predict(ids, verbose=0)[real], explicit.predict(ids, verbose=0)[real], atol=1e-5
    )


def _nat():
    """The NAT on JAX, each pass under jax.jit: the encoder, the length predictor and one
    decoder pass equal the model's forward pass, and the search from source ids (encoder,
    length candidates, Mask-Predict over the tiled memory) equals Mask-Predict written out in
    NumPy (tests/decoding/test_nat.py) over the same decoder pass."""
    import jax

    from tests.decoding import test_nat as reference
    from zoo.decoding import nat_search, tile_for_beams
    from zoo.models.nat import build_nat_translator, get_config, nat_decode, nat_encode

    keras.utils.set_random_seed(0)  # the same weights each run: the same candidates and tokens
    assert reference.L == 8  # the references' max_length
    model = build_nat_translator(get_config("tiny", vocab_size=20, max_length=8))
    source = np.array([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
    # As wide as the search's buffers, so that each decoder pass compiles once.
    target_in = np.array([[1, 1, 9, 3, 0, 0, 0, 0], [1, 3, 0, 0, 0, 0, 0, 0]], "int32")
    out = jit_call(model, {"source": source, "target_in": target_in})
    memory, padding, scores = jax.jit(lambda source: nat_encode(model, source))(source)
    np.testing.assert_allclose(np.asarray(scores), np.asarray(out["length"]), atol=1e-5)
    decode = jax.jit(lambda target_in: nat_decode(model, memory, padding, target_in))
    logits = np.asarray(decode(target_in))
    np.testing.assert_allclose(logits[target_in != 0], np.asarray(out["tokens"])[target_in != 0],
                               atol=1e-5)

    def search(source):
        memory, padding, scores = nat_encode(model, source)
        tiled = tile_for_beams((memory, padding), 2)
        return nat_search(
            lambda t: nat_decode(model, *tiled, t), scores, ops.sum(padding, axis=1),
            max_length=8, iterations=3, length_beam=2,
        )

    tokens, search_scores = jax.jit(search)(source)
    lengths = reference.reference_length_candidates(
        np.asarray(scores), np.asarray(padding).sum(1), 2, (scores.shape[1] - 1) // 2
    )
    want, want_scores, _ = reference._reference_nat_search(_Rows(decode, 2), range(2), lengths, 3)
    np.testing.assert_array_equal(np.asarray(tokens), want)
    np.testing.assert_allclose(np.asarray(search_scores), want_scores, atol=1e-5)

    # Both options: the uniform copy in the forward pass, each sentence at its widest length.
    from zoo.layers.uniform_copy import UniformCopy, uniform_positions
    from zoo.models.nat import decode_and_lengths

    positions = jax.jit(uniform_positions)(
        np.array([[0, 1, 2, 3, 4]]), np.array([[3]]), np.array([[5]])
    )
    np.testing.assert_array_equal(np.asarray(positions), [[0, 0, 1, 2, 2]])
    assert isinstance(jit_call(UniformCopy(), np.ones((1, 3, 2)), np.ones((1, 4), bool)),
                      jax.Array)  # fmt: skip
    model = build_nat_translator(
        get_config("tiny", vocab_size=20, max_length=8, decoder_input="copy", length_mode="max")
    )
    out = jit_call(model, {"source": source, "target_in": target_in})

    def decode_at_widths(source, target_in):
        decode, lengths = decode_and_lengths(model, source, max_length=8)
        return decode(target_in), lengths["lengths"]

    decode_at_widths = jax.jit(decode_at_widths)
    logits, widths = (np.asarray(x) for x in decode_at_widths(source, target_in))
    np.testing.assert_allclose(logits[target_in != 0], np.asarray(out["tokens"])[target_in != 0],
                               atol=1e-5)

    def widest(source):
        decode, lengths = decode_and_lengths(model, source, max_length=8)
        return nat_search(decode, **lengths, max_length=8)

    tokens, search_scores = jax.jit(widest)(source)
    rows = _Rows(lambda target_in: decode_at_widths(source, target_in)[0], 2)
    want, want_scores, _ = reference._reference_nat_search(rows, range(2), widths[:, None], 1)
    np.testing.assert_array_equal(np.asarray(tokens), want)
    np.testing.assert_allclose(np.asarray(search_scores), want_scores, atol=1e-5)

    # The CTC decoder: its one pass under jit equals the whole model's, and its search the
    # collapse of the best path written out (tests/decoding/test_ctc.py).
    from tests.decoding.test_ctc import BLANK, reference as collapsed
    from zoo.models.nat import nat_translator_search
    from zoo.models.nat.config import MASK_ID
    from zoo.models.nat.inference import ctc_logits

    assert BLANK == MASK_ID
    model = build_nat_translator(get_config("tiny", vocab_size=20, max_length=8, decoder="ctc"))
    logits = np.asarray(jax.jit(lambda source: ctc_logits(model, source))(source))
    np.testing.assert_allclose(logits, np.asarray(jit_call(model, {"source": source})["tokens"]),
                               atol=1e-5)  # fmt: skip
    search = nat_translator_search(model, "mask_predict", 8)
    want = [collapsed(row)[:8] for row in logits.argmax(-1).tolist()]
    np.testing.assert_array_equal(np.asarray(jax.jit(search)(source)), want)

    # Its loss (the forward recursion in Keras ops) and gradient under jax.jit: NumPy's.
    from tests.training.test_ctc_loss import forward_nll, log_softmax, numeric_gradient
    from zoo.training.losses import CTCLoss

    logits = np.random.default_rng(1).normal(size=(2, 6, 5))
    labels = [[2, 2], [3]]

    def numpy_loss(x):
        nll = [forward_nll(row, log_softmax(x[i])) / len(row) for i, row in enumerate(labels)]
        return np.mean(nll)

    padded = np.array([[2, 2], [3, 0]], "int32")
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: CTCLoss(1)(padded, x)))
    loss, grad = value_and_grad(logits.astype("float32"))
    assert abs(float(loss) - numpy_loss(logits)) < 1e-4, (float(loss), numpy_loss(logits))
    np.testing.assert_allclose(np.asarray(grad), numeric_gradient(numpy_loss, logits), atol=1e-4)


class _Rows:
    """``decode`` (``(B, L)`` decoder inputs to logits, jitted) one sentence at a time, as the
    NumPy references of tests/decoding/test_nat.py take a decoder: ``reference(target_in,
    memory_row)`` gives row ``memory_row``'s ``(L, V)`` logits, in float64."""

    def __init__(self, decode, batch):
        self.decode, self.batch = decode, batch

    def reference(self, target_in, memory_row):
        rows = np.tile(np.asarray(target_in, "int32"), (self.batch, 1))
        return np.asarray(self.decode(rows), "float64")[memory_row]


def _dropout():
    """The hashed dropout mask on JAX equals the Python-integer reference, under jit."""
    import jax

    from tests.layers.test_dropout import bits_reference
    from zoo.layers import Dropout
    from zoo.layers.dropout import dropout_bits

    seed = np.array([5, 2**31 + 3], "uint32")  # a JAX SeedGenerator's state is uint32
    bits = jax.jit(lambda s: dropout_bits((3, 5, 7), s))(seed)
    np.testing.assert_array_equal(np.asarray(bits), bits_reference(105, seed).reshape(3, 5, 7))
    out = np.asarray(Dropout(0.25, seed=1)(np.ones((64, 64), "float32"), training=True))
    assert 0.7 < (out > 0).mean() < 0.8 and set(np.unique(out)) == {0.0, np.float32(1 / 0.75)}


def _scheduled_sampling():
    import jax

    from tests.layers import test_scheduled_sampling as ss
    from zoo.layers import ScheduledSampling

    layer = ScheduledSampling("linear", k=0.0, c=0.0)  # only the first pass's predictions
    layer.build(ss.TARGET_IN.shape)
    shifted = np.concatenate([ss.TARGET_IN[:, :1], ss.PREDICTED[:, :-1]], axis=1)
    expected = np.where(ss.TARGET_IN == 0, 0, shifted)

    @jax.jit
    def train_call(state):  # as fit runs it on JAX: the counter's update comes back as state
        return layer.stateless_call([], state, ss.TARGET_IN, ss.LOGITS, training=True)

    variables = layer.non_trainable_variables
    state = [v.value for v in variables]
    for _ in range(2):
        mixed, state = train_call(state)
    np.testing.assert_array_equal(np.asarray(mixed), expected)
    counter = next(i for i, v in enumerate(variables) if v is layer.step)
    assert float(state[counter]) == 2.0  # one count per call


def _layer_mix():
    """The learned mix under jax.jit against its definition, and one fit step that trains it."""
    from tests.layers import test_layer_mix as layer_mix
    from zoo.layers import LayerMix

    layer = LayerMix(3)
    layer(layer_mix.OUTPUTS)  # builds it
    logits = np.array([0.5, -1.0, 2.0], "float32")
    layer.mix_logits.assign(logits)
    np.testing.assert_allclose(
        np.asarray(jit_call(layer, layer_mix.OUTPUTS)),
        layer_mix._reference(layer_mix.OUTPUTS, logits),
        atol=1e-6,
    )
    inputs = [keras.Input((5, 4)) for _ in range(3)]
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(layer_mix.OUTPUTS, np.zeros((2, 5, 4), "float32"), verbose=0)
    assert not np.allclose(np.asarray(layer.mix_logits.value), logits)


def _stateful_attention():
    """Location-aware and monotonic attention: their references, and the expected alignment's
    gradient (a scan on JAX) under jit."""
    import jax

    from zoo.layers.attention import monotonic_alignment

    stateful.test_the_expected_alignment_is_its_recurrence()
    stateful.test_location_features_of_a_whole_target_equal_a_step_by_step_loop()
    stateful.test_hard_attention_never_goes_back()
    p = np.random.default_rng(0).uniform(0.1, 0.9, (2, 2, 4, 5)).astype("float32")
    grad = jax.jit(jax.grad(lambda p: monotonic_alignment(p)[..., -1, :].sum()))(p)
    assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).sum() > 0


# ---------------------------------------------------------------- the tagger
TAGGER_SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "ran", "off", "."]]


def _tagger_arguments():
    """The tagger parts' arguments, made in the test's process: the ids of TAGGER_SENTENCES by
    the Python reference, and the model sizes of their vocabulary. The vocabulary needs
    TensorFlow, which the JAX process lets in only after the model has trained."""
    from tests.models.tagger_reference import encode
    from zoo.data import TaggerVocabulary

    vocabulary = TaggerVocabulary.build(TAGGER_SENTENCES, min_count=1, max_word_length=8)
    encoded = encode(vocabulary, TAGGER_SENTENCES)
    return {
        "encoded": {name: ids.tolist() for name, ids in encoded.items()},
        "overrides": vocabulary.config_overrides(),
    }


def _tagger(encoded, overrides):
    """The tagger builds and trains (a CRF head) without loading TensorFlow."""
    tags = np.array([[5, 7, 15, 12, 0], [5, 7, 15, 2, 12]], "int32")
    inputs = {name: np.array(ids, "int32") for name, ids in encoded.items()}
    model = build_tagger(tagger_config("tiny", **overrides))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CRFLoss(), metrics=[CRFAccuracy()])
    loss = model.fit(inputs, tags, epochs=5, verbose=0).history["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], loss
    assert model.heads == {"upos": TaggerHead(17, True)}
    assert "tensorflow" not in sys.modules


def _tagger_preprocessor(encoded, overrides):
    """On JAX, the tagger's vocabulary and preprocessor (TensorFlow text ops) give the sizes
    and the ids that the test's process gave."""
    from zoo.data import TaggerVocabulary

    # From its module: zoo.models, imported without TensorFlow, does not export it.
    from zoo.models.tagger.preprocessor import TaggerPreprocessor

    vocabulary = TaggerVocabulary.build(TAGGER_SENTENCES, min_count=1, max_word_length=8)
    assert vocabulary.config_overrides() == overrides
    words = [word for sentence in TAGGER_SENTENCES for word in sentence]
    word_ids, char_ids = TaggerPreprocessor(vocabulary).encode(words)
    assert np.asarray(word_ids).tolist() == [i for row in encoded["words"] for i in row if i]
    assert np.asarray(char_ids).tolist() == [ids for row in encoded["chars"] for ids in row
                                             if any(ids)]  # fmt: skip


PARTS = {
    "local": _local,
    "strided": _strided,
    "global": _global,
    "clustered": _clustered,
    "sinkhorn": _sinkhorn,
    "synthesizer": _synthesizer,
    "linear-performer-linformer": _linear_performer_linformer,
    "aft": _aft,
    "pointer_generator": _pointer_generator,
    "position": _position,
    "chunked": _chunked,
    "recomputed": _recomputed,
    "fused": _fused,
    "crf": _crf,
    "blocks": _blocks,
    "nat": _nat,
    "dropout": _dropout,
    "scheduled_sampling": _scheduled_sampling,
    "layer_mix": _layer_mix,
    "stateful_attention": _stateful_attention,
    "tagger": _tagger,
    "tagger_preprocessor": _tagger_preprocessor,
}
# The tagger's preprocessor, and the parts whose references live in test modules that import
# TensorFlow. Once loaded, TensorFlow cannot be put out of reach again: these run last.
NEEDS_TENSORFLOW = ("recomputed", "nat", "dropout", "tagger_preprocessor")


# ---------------------------------------------------------------- the one JAX process
def run_parts(arguments):
    """Run every part on the JAX backend, those in NEEDS_TENSORFLOW last; print its marker
    line, and never stop at a failure. ``arguments``: the keyword arguments of the parts that
    take some, by name."""
    assert keras.backend.backend() == "jax", keras.backend.backend()
    assert "tensorflow" not in sys.modules, "import this module after harness.NoTensorFlow"
    fresh = {module: module.RNG.bit_generator.state for module in _MODULES_WITH_RNG}
    # The imports leave several hundred thousand long-lived objects. Frozen, they are not
    # walked again by the collection of each part's clear_session (0.3 s each here) or by those
    # while tracing, as tests/conftest.py does for the suite.
    gc.freeze()
    for name in sorted(PARTS, key=lambda name: name in NEEDS_TENSORFLOW):
        if name in NEEDS_TENSORFLOW:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, NoTensorFlow)]
        for module, state in fresh.items():
            module.RNG.bit_generator.state = state
        keras.backend.clear_session()
        start = time.perf_counter()
        try:
            PARTS[name](**arguments.get(name, {}))
        except Exception as error:
            print(f"FAILED {name}: {type(error).__name__}: {error}")
            print(traceback.format_exc())
        else:
            print(f"ok {name} ({time.perf_counter() - start:.1f} s)")
        print(f"end {name}", flush=True)


_SCRIPT = """
import sys

from tests.harness import NoTensorFlow

sys.meta_path.insert(0, NoTensorFlow())
from tests.layers.test_layers_on_jax import run_parts

run_parts({arguments!r})
"""


@pytest.fixture(scope="module")
def jax_output():
    tagger = _tagger_arguments()
    arguments = {"tagger": tagger, "tagger_preprocessor": tagger}
    return run_on_jax(_SCRIPT.format(arguments=arguments))


def _section(output, name):
    """The lines that part ``name`` printed, its marker line first."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith((f"ok {name} ", f"FAILED {name}:"))]
    if not starts:
        return []
    end = lines.index(f"end {name}", starts[0])
    return lines[starts[0] : end]


@pytest.mark.parametrize("name", list(PARTS))
def test_runs_on_jax(jax_output, name):
    section = _section(jax_output, name)
    assert section, f"part {name!r} printed no marker line:\n{jax_output}"
    assert section[0].startswith(f"ok {name} "), "\n".join(section)
