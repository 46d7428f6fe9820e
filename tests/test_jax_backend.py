"""The blocks are backend-agnostic: they build, train and decode on Keras's JAX backend.

Keras fixes its backend at import, and this test session runs on TensorFlow, so the JAX
run happens in a fresh Python process with KERAS_BACKEND=jax.
"""

import textwrap

from tests.harness import run_on_jax

_SCRIPT = textwrap.dedent(
    """
    import jax
    import keras
    import numpy as np
    from keras import ops

    from zoo.layers import TransformerDecoderBlock, TransformerEncoderBlock

    print("backend:", keras.backend.backend())
    assert keras.backend.backend() == "jax"
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
    out = model(inputs)
    assert isinstance(out, jax.Array), type(out)
    assert out.shape == (B, T, 3) and np.all(np.isfinite(np.asarray(out)))
    print("forward ok")

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
    print("fit ok", float(loss))

    # Cached decoding, each step under jax.jit with a traced cache index, against the
    # full causal pass.
    memory = encoder(source, padding_mask=source_mask)
    full = np.asarray(decoder(target, memory, encoder_padding_mask=source_mask))

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
    print("cached decoding ok")

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
    print("implicit mask ok")
    """
)


def test_blocks_build_train_and_decode_on_jax():
    stdout = run_on_jax(_SCRIPT)
    lines = stdout.splitlines()
    assert "backend: jax" in lines, stdout
    for stage in ("forward ok", "cached decoding ok", "implicit mask ok"):
        assert stage in lines, stdout
    assert any(line.startswith("fit ok") for line in lines), stdout
