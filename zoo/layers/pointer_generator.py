"""The copy mechanism: a pointer-generator that mixes the vocabulary distribution with copies of
source tokens, through a learned generation probability."""

import math

import keras
from keras import ops

# The floor under the copy distribution: ids no source position holds get probability 1e-30
# rather than 0, so that no log-probability (nor its gradient) is infinite. The mixture then
# sums to 1 within (V + S) * 1e-30.
_COPY_FLOOR = 1e-30


def scatter_to_ids(weights, ids, size):
    """Add each source position's weight onto its token id: ``(B, T, S)`` -> ``(B, T, size)``.

    Positions that hold the same id add up. It is a product with the sources' one-hot rows,
    one matrix product, under XLA as on every backend.

    Args:
        weights: ``(B, T, S)`` float weights over source positions.
        ids: ``(B, S)`` int ids, each in ``[0, size)``.
        size: the number of ids (Python int).

    Returns:
        ``(B, T, size)``, ``out[b, t, v] = sum of weights[b, t, s] over s with ids[b, s] == v``.

    Example:
        >>> weights = keras.ops.convert_to_tensor([[[0.5, 0.3, 0.2]]])
        >>> ids = keras.ops.convert_to_tensor([[4, 2, 4]])
        >>> [round(float(p), 3) for p in scatter_to_ids(weights, ids, 5)[0, 0]]
        [0.0, 0.0, 0.3, 0.0, 0.7]
    """
    one_hot = ops.one_hot(ops.cast(ids, "int32"), size, dtype=weights.dtype)  # (B, S, size)
    return ops.einsum("bts,bsv->btv", weights, one_hot)


def copied_source_tokens(ids, source_tokens, vocab_size):
    """Read an extended-vocabulary output back: ids ``V + s`` become the source's token ``s``.

    With ``PointerGenerator(extended=True)`` an unknown source token at position ``s`` is
    copied as the id ``V + s``; this puts the source's own token there (its text, or its id in
    a larger vocabulary) and leaves every id below ``V`` as it is.

    Args:
        ids: ``(B, T)`` output ids (a nested list or an array).
        source_tokens: ``(B, S)``: what each source position holds (strings, ids, anything).
        vocab_size: V, the size of the fixed vocabulary.

    Returns:
        A list of ``B`` lists: each output id, or the source token it copies.

    Example:
        >>> copied_source_tokens([[5, 11, 3]], [["Zaphod", "says", "hi"]], vocab_size=10)
        [[5, 'says', 3]]
    """
    return [
        [source[i - vocab_size] if i >= vocab_size else i for i in map(int, row)]
        for row, source in zip(ids, source_tokens)
    ]


@keras.saving.register_keras_serializable(package="zoo")
class PointerGenerator(keras.layers.Layer):
    """Mix the vocabulary distribution with a copy distribution over source tokens.

    A one-head copy attention of the decoder state over the encoder output gives weights ``a``
    over the source and a context ``c``; ``p_gen = sigmoid(w . [c, decoder state, decoder input]
    + b)`` mixes ``P(v) = p_gen * softmax(logits)_v + (1 - p_gen) * sum of a_s over s with source
    id v`` (See et al. 2017). Padding is never attended to. The output is ``log P`` in float32,
    a normalised log-distribution, so a loss or a search that reads logits reads it as it is.

    The copy attention is the layer's own, not the decoder's cross attention averaged over
    heads: those heads may use any score, layers and dropout, and their average blurs a pointer.
    Copying works piece by piece (with byte fallback, no source token is ever unknown);
    ``extended=True`` is for vocabularies without byte fallback: a source ``unk_id`` at position
    ``s`` becomes the extra id ``V + s``, read back by :func:`copied_source_tokens`.

    Args:
        key_dim: the size of the copy attention's queries and keys; defaults to the decoder
            state's size.
        extended: give unknown source tokens their own ids ``V + position``.
        unk_id: the id of the unknown token (``extended`` only).
        pad_id: the id of source padding, never copied.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the generation probability's bias.

    Call arguments:
        logits: ``(B, T, V)``, the decoder's vocabulary logits. Its Keras implicit mask is
            the output's.
        decoder_state: ``(B, T, D)``, the decoder's last hidden states (the queries).
        decoder_input: ``(B, T, D)``, the decoder's input embeddings.
        memory: ``(B, S, Dm)``, the encoder output.
        source_ids: ``(B, S)`` int ids of the source, ``pad_id`` for padding.
        memory_keys: ``(B, S, key_dim)``, the keys of :meth:`compute_cache`, to skip their
            projection (incremental decoding).
        return_copy_scores: also return ``p_gen`` and the copy attention weights.

    Returns:
        The log-probabilities ``(B, T, V)`` (``(B, T, V + S)`` when ``extended``); with
        ``return_copy_scores`` also ``p_gen`` ``(B, T, 1)`` and the copy weights ``(B, T, S)``.

    Example:
        >>> layer = PointerGenerator()
        >>> logits = keras.random.normal((2, 3, 10))
        >>> state, inputs = keras.random.normal((2, 3, 8)), keras.random.normal((2, 3, 8))
        >>> memory = keras.random.normal((2, 4, 8))
        >>> source = keras.ops.convert_to_tensor([[5, 6, 5, 3], [7, 3, 0, 0]])
        >>> log_p = layer(logits, state, inputs, memory, source)
        >>> tuple(log_p.shape)
        (2, 3, 10)
        >>> bool(keras.ops.all(keras.ops.abs(keras.ops.sum(keras.ops.exp(log_p), -1) - 1) < 1e-5))
        True

    References:
        See et al. 2017, "Get To The Point: Summarization with Pointer-Generator Networks".
        Gu et al. 2016, "Incorporating Copying Mechanism in Sequence-to-Sequence Learning".
        Vinyals et al. 2015, "Pointer Networks".
    """

    def __init__(
        self,
        key_dim=None,
        extended=False,
        unk_id=1,
        pad_id=0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if key_dim is not None and (not isinstance(key_dim, int) or key_dim < 1):
            raise ValueError(f"key_dim must be None or a positive int, got {key_dim!r}.")
        self.key_dim = key_dim
        self.extended = extended
        self.unk_id = unk_id
        self.pad_id = pad_id
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        dense = dict(kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy)
        self.query_dense = None  # made in build(): the key size may be the state's
        self.key_dense = None
        self.generation_gate = keras.layers.Dense(
            1, bias_initializer=self.bias_initializer, name="generation_gate", **dense
        )
        self._dense = dense
        self.supports_masking = True

    def build(self, logits_shape, decoder_state_shape=None, decoder_input_shape=None,
              memory_shape=None):  # fmt: skip
        state_dim = decoder_state_shape[-1]
        key_dim = self.key_dim or state_dim
        self.query_dense = keras.layers.Dense(key_dim, use_bias=False, name="query", **self._dense)
        self.key_dense = keras.layers.Dense(key_dim, use_bias=False, name="key", **self._dense)
        self.query_dense.build(decoder_state_shape)
        self.key_dense.build(memory_shape)
        gate_dim = memory_shape[-1] + state_dim + decoder_input_shape[-1]
        self.generation_gate.build(tuple(decoder_state_shape[:-1]) + (gate_dim,))
        self.built = True

    def compute_cache(self, memory):
        """The copy attention's keys ``(B, S, key_dim)``, computed once per source."""
        if not self.built:
            raise ValueError(f"Build {self.name!r} before calling compute_cache(): call it once.")
        return self.key_dense(memory)

    def call(
        self,
        logits,
        decoder_state,
        decoder_input,
        memory,
        source_ids,
        memory_keys=None,
        return_copy_scores=False,
    ):
        source_ids = ops.cast(source_ids, "int32")
        keys = self.key_dense(memory) if memory_keys is None else memory_keys  # (B, S, K)
        query = self.query_dense(decoder_state)  # (B, T, K)
        scores = ops.einsum("btk,bsk->bts", query, keys) / math.sqrt(ops.shape(query)[-1])
        real = ops.expand_dims(ops.not_equal(source_ids, self.pad_id), 1)  # (B, 1, S)
        scores = ops.where(real, ops.cast(scores, "float32"), -1e9)
        weights = ops.softmax(scores, axis=-1)  # (B, T, S), float32
        context = ops.einsum("bts,bsd->btd", ops.cast(weights, memory.dtype), memory)  # (B, T, Dm)
        gate = self.generation_gate(ops.concatenate([context, decoder_state, decoder_input], -1))
        gate = ops.cast(gate, "float32")  # (B, T, 1), p_gen = sigmoid(gate)

        vocab = logits.shape[-1]
        copy_ids, size = source_ids, vocab
        log_vocab = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B, T, V)
        if self.extended:
            length = ops.shape(source_ids)[1]
            positions = vocab + ops.arange(length, dtype="int32")  # (S,)
            copy_ids = ops.where(ops.equal(source_ids, self.unk_id), positions, source_ids)
            size = vocab + length
            # The vocabulary has nothing at the extra ids: the floor, as for the copies.
            extra = ops.full(ops.shape(log_vocab)[:2] + (length,), math.log(_COPY_FLOOR))
            log_vocab = ops.concatenate([log_vocab, extra], axis=-1)  # (B, T, V + S)
        copy = scatter_to_ids(weights, copy_ids, size)  # (B, T, size)
        log_copy = ops.log(ops.maximum(copy, _COPY_FLOOR))
        log_p = ops.logaddexp(
            log_vocab + ops.log_sigmoid(gate), log_copy + ops.log_sigmoid(-gate)
        )  # (B, T, size): log(p_gen * P_vocab + (1 - p_gen) * P_copy)
        log_p = ops.cast(log_p, self.compute_dtype)
        if return_copy_scores:
            return log_p, ops.sigmoid(gate), weights
        return log_p

    def compute_output_spec(self, logits, decoder_state, decoder_input, memory, source_ids,
                            memory_keys=None, return_copy_scores=False):  # fmt: skip
        batch, length = logits.shape[0], logits.shape[1]
        size = logits.shape[-1]
        if self.extended:
            size = None if source_ids.shape[1] is None else size + source_ids.shape[1]
        log_p = keras.KerasTensor((batch, length, size), self.compute_dtype)
        if not return_copy_scores:
            return log_p
        return (
            log_p,
            keras.KerasTensor((batch, length, 1), "float32"),
            keras.KerasTensor((batch, length, source_ids.shape[1]), "float32"),
        )

    def get_config(self):
        return {
            **super().get_config(),
            "key_dim": self.key_dim,
            "extended": self.extended,
            "unk_id": self.unk_id,
            "pad_id": self.pad_id,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
