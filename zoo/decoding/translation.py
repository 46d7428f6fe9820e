"""Sentences in, sentences out: tokenize, search under XLA, cut after EOS, detokenize.

This is the only TensorFlow-specific module of :mod:`zoo.decoding`: the tokenizer is tf-text
(:class:`zoo.data.SentencePieceTokenizer`) and the search runs under
``tf.function(jit_compile=True)``. TensorFlow is imported when :func:`translate` is called.
"""

import weakref

from zoo.data.sentencepiece_vocab import EOS_ID, PAD_ID
from zoo.decoding.beam import beam_search
from zoo.decoding.greedy import greedy_search
from zoo.decoding.incremental import IncrementalTranslator, check_max_length
from zoo.decoding.sampling import sample

__all__ = ["translate"]

METHODS = ("beam", "greedy", "sample")

# model -> {settings: compiled function}; a model's functions go when the model goes.
_COMPILED = weakref.WeakKeyDictionary()
_LENGTH_BUCKET = 8  # source lengths are padded to a multiple of this, to bound recompiles


def translate(
    model,
    tokenizer,
    sentences,
    method="beam",
    beam_size=4,
    max_length=None,
    batch_size=64,
    **kwargs,
):
    """Translate sentences with a trained translator.

    The sentences are tokenized in the graph by the tf-text tokenizer, truncated to the
    model's positions and 0-padded; the search runs under ``tf.function(jit_compile=True)``,
    compiled once per settings and padded shape and cached with the model; the ids are cut
    after the first EOS and detokenized. Sources are padded to a multiple of 8 tokens, and
    the sentences go through in batches of ``batch_size`` (the last one padded to a power of
    two), so that few shapes are ever compiled; padding never changes a translation.

    Args:
        model: a translator of :func:`zoo.models.build_translator`.
        tokenizer: the :class:`zoo.data.SentencePieceTokenizer` of its vocabulary (its
            ``bos_id`` and ``eos_id`` start and end the target).
        sentences: a list of source sentences (``str``).
        method: ``"beam"`` (:func:`~zoo.decoding.beam_search`), ``"greedy"``
            (:func:`~zoo.decoding.greedy_search`) or ``"sample"`` (:func:`~zoo.decoding.sample`).
        beam_size: the beam size of ``"beam"``.
        max_length: the most target tokens per sentence; defaults to the model's positions.
        batch_size: the most sentences decoded together.
        **kwargs: further arguments of the search: ``alpha``, ``early_stopping`` for beam
            search; ``temperature``, ``top_k``, ``top_p``, ``seed`` for sampling (an int seed
            gives the same translations on every call; without one they change).

    Returns:
        A list of ``str``, one translation per sentence; a sentence with no tokens (empty or
        blank) gives the empty string.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
        >>> from zoo.models import build_translator, translator_config
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> path = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> model = build_translator(translator_config("tiny", vocab_size=400))
        >>> texts = translate(model, SentencePieceTokenizer(path), ["A dog runs."], "greedy")
        >>> len(texts), type(texts[0])
        (1, <class 'str'>)
    """
    import tensorflow as tf

    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose from {METHODS}.")
    if isinstance(sentences, str):
        raise TypeError("translate() takes a list of sentences; wrap a single one in a list.")
    sentences = list(sentences)
    if not sentences:
        return []
    translator = IncrementalTranslator(model)
    max_length = check_max_length(translator, max_length)
    # The tokenizer's generation changes when a seed reset killed its tf-text op: retrace then.
    generation = tokenizer.ensure_alive() if hasattr(tokenizer, "ensure_alive") else 0
    settings = (
        id(tokenizer), generation, method, beam_size, max_length, tuple(sorted(kwargs.items()))
    )
    functions = _COMPILED.setdefault(model, {})
    if settings not in functions:
        functions[settings] = _make_translate_function(
            tf, translator, tokenizer, method, beam_size, max_length, kwargs
        )
    run = functions[settings]

    outputs = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        padded = 1 << (len(chunk) - 1).bit_length()  # the next power of two
        texts = run(tf.constant(chunk + [""] * (padded - len(chunk))))
        texts = texts.numpy()[: len(chunk)]
        outputs += [text.decode("utf-8", errors="replace") for text in texts]
    return outputs


def _make_translate_function(tf, translator, tokenizer, method, beam_size, max_length, kwargs):
    eos_id = tokenizer.eos_id if tokenizer.eos_id >= 0 else EOS_ID
    ids_kwargs = dict(kwargs)
    if tokenizer.bos_id >= 0:
        ids_kwargs["bos_id"] = tokenizer.bos_id
    ids_kwargs["eos_id"] = eos_id
    source_limit = translator.max_length

    @tf.function(jit_compile=True)
    def search(source):
        if method == "beam":
            ids, _ = beam_search(
                translator, source, beam_size=beam_size, max_length=max_length, **ids_kwargs
            )
            return ids
        if method == "greedy":
            return greedy_search(translator, source, max_length, **ids_kwargs)
        return sample(translator, source, max_length, **ids_kwargs)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def run(sentences):
        tokens = tokenizer.tokenize(sentences)  # (B, None) ragged
        if source_limit is not None:
            tokens = tokens[:, :source_limit]
        source = tokens.to_tensor(default_value=PAD_ID)  # (B, S)
        length = tf.shape(source)[1]
        padded = tf.maximum((length + _LENGTH_BUCKET - 1) // _LENGTH_BUCKET, 1) * _LENGTH_BUCKET
        if source_limit is not None:
            padded = tf.maximum(tf.minimum(padded, source_limit), length)
        source = tf.pad(source, [[0, 0], [0, padded - length]])
        ids = search(source)  # (B, L)
        # Cut after the first EOS (the searches already pad with 0 there).
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, eos_id), tf.int32), axis=1), 0)
        ids = tf.where(before_eos, ids, PAD_ID)
        # A sentence with no tokens (empty, blank) translates to the empty string.
        has_tokens = tf.reduce_any(tf.not_equal(source, PAD_ID), axis=1)
        return tf.where(has_tokens, tokenizer.detokenize(ids), "")

    return run
