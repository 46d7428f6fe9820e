"""Step-by-step decoding of a trained translator with the decoder blocks' KV caches.

:class:`IncrementalTranslator` takes apart a model of :func:`zoo.models.build_translator` by its
stable layer names, and runs it in the three pieces that every search needs: the encoder once
per source (:meth:`~IncrementalTranslator.encode`), the caches once per source
(:meth:`~IncrementalTranslator.init_caches`) and the decoder one token at a time
(:meth:`~IncrementalTranslator.step`). Everything is written in ``keras.ops``, with
fixed-size caches and a tensor step index, so that the loops of :mod:`zoo.decoding` compile
with XLA (``tf.function(jit_compile=True)``) and also trace in plain TensorFlow graph mode.

The helpers at the bottom are shared by the searches: the masking of the padding id, the
writing of one column of a ``(B, L)`` buffer, and the repetition of the encoder outputs and
caches per beam (:func:`tile_for_beams`).
"""

import numbers

import keras
from keras import ops

from zoo.data.sentencepiece_vocab import PAD_ID

__all__ = ["IncrementalTranslator", "tile_for_beams"]


class IncrementalTranslator:
    """A trained translator, run one target token at a time with KV caches.

    The model must come from :func:`zoo.models.build_translator` (or share its layer names):
    ``embedding`` (shared, with the tied output projection) or ``source_embedding``,
    ``target_embedding`` and ``output_projection``; ``encoder_block_{i}``, ``encoder_norm``
    (pre-LN models only), ``decoder_block_{i}`` and ``decoder_norm`` (pre-LN only). The
    wrapper holds no weights of its own: it calls the model's layers, so it always decodes
    with the model's current weights. Every call runs with ``training=False``.

    Args:
        model: the functional translator, ``{"source", "target_in"}`` ids -> logits.

    Attributes:
        model: the wrapped model.
        vocab_size: V, the size of the target vocabulary.
        max_length: the number of target positions of the embedding (None when unbounded,
            sinusoidal encodings without ``max_length``). A search of ``max_length`` steps
            uses positions ``0 .. max_length - 1``.
        num_caches: the length of the tuple of caches: two per decoder block.

    Example:
        >>> from zoo.models import build_translator, translator_config
        >>> model = build_translator(translator_config("tiny"))
        >>> translator = IncrementalTranslator(model)
        >>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]], "int32")
        >>> memory, padding = translator.encode(source)
        >>> caches = translator.init_caches(memory, max_length=4)
        >>> bos = keras.ops.convert_to_tensor([[2]], "int32")
        >>> logits, caches = translator.step(bos, caches, 0, padding)
        >>> tuple(logits.shape)
        (1, 1000)

    References:
        Vaswani et al. 2017, "Attention Is All You Need" (the encoder-decoder); the caches
        follow Ott et al. 2019, "fairseq: A Fast, Extensible Toolkit for Sequence Modeling"
        (incremental decoding).
    """

    def __init__(self, model):
        layers = {layer.name: layer for layer in model.layers}

        def find(name, required=True):
            if name not in layers and required:
                raise ValueError(
                    f"IncrementalTranslator needs a layer named {name!r} in model "
                    f"{model.name!r} (a model of zoo.models.build_translator); it has "
                    f"{sorted(layers)}."
                )
            return layers.get(name)

        self.model = model
        if "embedding" in layers:
            self._source_embedding = self._target_embedding = layers["embedding"]
            self._output_projection = None  # tied: embedding(hidden, reverse=True)
        else:
            self._source_embedding = find("source_embedding")
            self._target_embedding = find("target_embedding")
            self._output_projection = find("output_projection")
        self._encoder_blocks = _numbered(layers, "encoder_block_")
        self._decoder_blocks = _numbered(layers, "decoder_block_")
        if not self._decoder_blocks:
            raise ValueError(f"Model {model.name!r} has no layer named 'decoder_block_0'.")
        self._encoder_norm = find("encoder_norm", required=False)
        self._decoder_norm = find("decoder_norm", required=False)
        self.vocab_size = self._target_embedding.vocab_size
        self.max_length = self._target_embedding.max_length
        self.num_caches = 2 * len(self._decoder_blocks)

    # ------------------------------------------------------------------ the pieces
    def encode(self, source_ids):
        """Run the encoder once.

        Args:
            source_ids: ``(B, S)`` int ids, 0-padded.

        Returns:
            ``(memory, source_padding)``: the encoder output ``(B, S, D)`` (after the final
            norm of pre-LN models) and the boolean ``(B, S)`` mask, True on real tokens.
        """
        source_ids = ops.cast(source_ids, "int32")
        source_padding = ops.not_equal(source_ids, PAD_ID)  # (B, S)
        x = self._source_embedding(source_ids, training=False)  # (B, S, D)
        for block in self._encoder_blocks:
            x = block(x, padding_mask=source_padding, training=False)
        if self._encoder_norm is not None:
            x = self._encoder_norm(x)
        return x, source_padding

    def init_caches(self, memory, max_length):
        """The caches of a search of ``max_length`` steps over ``memory``.

        Args:
            memory: ``(B, S, D)``, the output of :meth:`encode` (already repeated per beam
                when the search has beams, see :func:`tile_for_beams`).
            max_length: int, the number of decoder steps (and self-attention cache slots).

        Returns:
            A tuple of ``2 * decoder_layers`` tensors: for each decoder block, its empty
            self-attention cache ``(B, 2, max_length, N, H)`` followed by its
            cross-attention cache ``(B, 2, S, N, H)``, computed here once from ``memory``.
        """
        batch = ops.shape(memory)[0]
        caches = []
        for block in self._decoder_blocks:
            caches.append(block.init_self_cache(batch, max_length))
            caches.append(block.compute_cross_cache(memory))
        return tuple(caches)

    def step(self, token_ids, caches, index, source_padding):
        """One decoder step: the logits of the token after ``token_ids``.

        Args:
            token_ids: ``(B, 1)`` int ids, the token at position ``index`` (BOS at 0).
            caches: the tuple of :meth:`init_caches`, or of the previous step.
            index: int or scalar int tensor, the position of ``token_ids``.
            source_padding: ``(B, S)`` boolean, True on real source tokens.

        Returns:
            ``(logits, caches)``: float32 logits ``(B, V)`` of the next token and the caches
            with this step's keys and values written at ``index``.
        """
        if len(caches) != self.num_caches:
            raise ValueError(f"Expected {self.num_caches} caches, got {len(caches)}.")
        token_ids = ops.cast(token_ids, "int32")
        y = self._target_embedding(token_ids, start_index=index, training=False)  # (B, 1, D)
        new_caches = []
        for i, block in enumerate(self._decoder_blocks):
            y, self_cache, cross_cache = block(
                y,
                encoder_padding_mask=source_padding,
                self_cache=caches[2 * i],
                cross_cache=caches[2 * i + 1],
                cache_index=index,
                training=False,
            )
            new_caches += [self_cache, cross_cache]
        if self._decoder_norm is not None:
            y = self._decoder_norm(y)
        if self._output_projection is None:
            logits = self._target_embedding(y, reverse=True)  # (B, 1, V)
        else:
            logits = self._output_projection(y)  # (B, 1, V)
        return ops.cast(logits[:, 0, :], "float32"), tuple(new_caches)

    def cross_attention_weights(self, source_ids, target_in):
        """The cross-attention weights of every decoder block, for pictures.

        Args:
            source_ids: ``(B, S)`` int ids, 0-padded.
            target_in: ``(B, T)`` int ids, BOS first (the decoder input).

        Returns:
            A list with one ``(B, N, T, S)`` array per decoder block: how much each target
            position attends to each source token.
        """
        memory, source_padding = self.encode(source_ids)
        target_in = ops.cast(target_in, "int32")
        y = self._target_embedding(target_in, training=False)  # (B, T, D)
        weights = []
        for block in self._decoder_blocks:
            y, _, cross = block(
                y,
                memory,
                padding_mask=ops.not_equal(target_in, PAD_ID),
                encoder_padding_mask=source_padding,
                return_attention_scores=True,
                training=False,
            )
            weights.append(cross)
        return weights

    def full_logits(self, source_ids, target_in):
        """The whole model at once: ``(B, S)`` and ``(B, T)`` ids -> float32 ``(B, T, V)``."""
        inputs = {
            "source": ops.cast(source_ids, "int32"),
            "target_in": ops.cast(target_in, "int32"),
        }
        return ops.cast(self.model(inputs, training=False), "float32")


def _numbered(layers, prefix):
    """The layers named ``{prefix}0``, ``{prefix}1``, ... in order."""
    blocks = []
    while f"{prefix}{len(blocks)}" in layers:
        blocks.append(layers[f"{prefix}{len(blocks)}"])
    return blocks


# ---------------------------------------------------------------------- shared helpers
def tile_for_beams(x, beam_size):
    """Repeat each batch row ``beam_size`` times: ``(B, ...)`` -> ``(B * K, ...)``.

    Row ``b * K + k`` of the result is beam ``k`` of example ``b``. ``x`` may be a tensor or
    a tuple/list of tensors (the caches); ``beam_size`` an int or a scalar int tensor.
    """
    if isinstance(x, (tuple, list)):
        return type(x)(tile_for_beams(item, beam_size) for item in x)
    return ops.repeat(x, beam_size, axis=0)


def mask_padding_logits(logits, pad_id=PAD_ID):
    """Forbid the padding id: its logit becomes -inf, so no search ever emits it."""
    vocab = ops.arange(ops.shape(logits)[-1], dtype="int32")
    return ops.where(ops.equal(vocab, pad_id), float("-inf"), logits)


def write_column(buffer, index, values):
    """``buffer`` ``(..., L)`` with column ``index`` set to ``values`` ``(...)``."""
    columns = ops.arange(ops.shape(buffer)[-1], dtype="int32")
    at_index = ops.equal(columns, ops.cast(index, "int32"))
    return ops.where(at_index, ops.expand_dims(ops.cast(values, buffer.dtype), -1), buffer)


def check_max_length(translator, max_length):
    """``max_length`` as an int; it must be positive and fit the embedding's positions.

    None means every position of the embedding (a ``ValueError`` when it has no limit).
    """
    if max_length is None:
        if translator.max_length is None:
            raise ValueError("The model's embedding has no max_length: pass max_length.")
        return translator.max_length
    if not isinstance(max_length, numbers.Integral) or isinstance(max_length, bool):
        raise ValueError(f"max_length must be a Python int, got {max_length!r}.")
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}.")
    limit = translator.max_length
    if limit is not None and max_length > limit:
        raise ValueError(
            f"max_length={max_length} needs {max_length} target positions, but the model's "
            f"embedding has max_length={limit}."
        )
    return int(max_length)


def as_translator(model_or_translator):
    """An :class:`IncrementalTranslator` for a model, or the translator itself."""
    if isinstance(model_or_translator, IncrementalTranslator):
        return model_or_translator
    if isinstance(model_or_translator, keras.Model):
        return IncrementalTranslator(model_or_translator)
    raise TypeError(
        "Expected an IncrementalTranslator or a keras.Model of build_translator, got "
        f"{type(model_or_translator).__name__}."
    )
