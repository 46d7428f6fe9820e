"""Sentences in, sentences out: the strings-to-strings frame around an ids -> ids search.

:func:`translate_strings` is the frame in graph ops, shared by :func:`translate_sentences` (XLA,
in batches) and the SavedModels. It knows the preprocessor and a search, never the model.
TensorFlow is imported when a function is called.
"""

import weakref
from typing import NamedTuple

from keras import ops

from zoo.progress import Progress
from zoo.special_ids import EOS_ID, PAD_ID

__all__ = [
    "BUCKETS", "Buckets", "bucket_length", "bucketed", "forget_compiled", "output_length",
    "translate_sentences", "translate_strings", "xla_compiled",
]  # fmt: skip


# model -> {settings: compiled function}; a model's functions go when the model goes.
_COMPILED = weakref.WeakKeyDictionary()


def forget_compiled(model):
    """Drop the searches compiled for ``model`` (its weights changed kind, as
    ``quantize`` changes them): the next translation compiles afresh."""
    _COMPILED.pop(model, None)


class Buckets(NamedTuple):
    """The padded shapes of :func:`bucketed`: an XLA search compiles one program per (rows,
    length) pair, so these bound what a server and an export's warm-up compile.

    ``rows``: the batch sizes a batch is padded up to, ascending (a larger batch is split).
    ``lengths``: the source lengths, ascending; past the last, multiples of the last. Coarser
    buckets mean fewer programs and more padding (``benchmarks/studies/bucket_padding.py``).
    """

    rows: tuple
    lengths: tuple

    def padded_rows(self, batch):
        """The rows a batch of ``batch`` sentences is padded to, per part (Python ints)."""
        return next((rows for rows in self.rows if rows >= batch), self.rows[-1])

    def padded_length(self, length, source_limit=None):
        """The width a batch whose longest source has ``length`` tokens is padded to (a
        Python int), within ``source_limit``."""
        top = self.lengths[-1]
        padded = next((n for n in self.lengths if n >= length), -(-length // top) * top)
        return padded if source_limit is None else max(min(padded, source_limit), length)

    def widths(self, source_limit):
        """Every padded width of sources of 1 to ``source_limit`` tokens, ascending."""
        return sorted({self.padded_length(n, source_limit) for n in range(1, source_limit + 1)})


# What bucketed() pads to, in process and in every export: 3 batch sizes x 7 lengths, 21 programs
# per XLA search (a narrow model's of 1, 4 and 32 rows: its halves side by side), few enough for
# a warm-up to compile. Lengths are fine and rows coarse because padding a length costs a search
# far more than padding rows (benchmarks/studies/bucket_padding.py).
BUCKETS = Buckets(rows=(1, 8, 64), lengths=(16, 24, 32, 48, 64, 96, 128))


def output_length(source_ids, limit=None):
    """How many target tokens a search of these sources makes room for: ``1.2 S + 10``.

    ``S`` is the width of the padded batch, as fairseq sizes its searches (``--max-len-a 1.2
    --max-len-b 10``), capped by the model's ``limit`` positions. The caches, the buffers and
    beam search's early-stopping bound follow this length, so a batch of short sentences is not
    decoded at the cost of the longest one the model can read; hardly any reference is longer
    than this for its own source.

    Args:
        source_ids: ``(B, S)`` source ids, 0-padded.
        limit: the model's target positions (None: no cap).

    Returns:
        A Python int when ``S`` is known at trace time; otherwise a scalar int32 tensor
        (plain graph mode, and XLA, which folds it to a constant of each compiled shape).
    """
    width = source_ids.shape[1]
    known = width is not None
    if not known:
        width = ops.shape(source_ids)[1]
    length = width + width // 5 + 10  # integer arithmetic: XLA folds it from the shape
    if limit is None:
        return length
    return min(length, limit) if known else ops.minimum(length, limit)


def translate_strings(inputs, preprocessor, search):
    """The frame of every text-to-text decoder: strings in, strings out, in TensorFlow ops.

    The preprocessor tokenizes (invalid UTF-8 replaced, truncated to its ``max_length``); the
    rows with tokens go to ``search`` as one 0-padded batch (none when no row has a token); the
    preprocessor detokenizes (cut after the first EOS). A row without tokens gives ``""``.

    Args:
        inputs: ``tf.string`` ``(B,)``, the sentences (any bytes; B may be 0).
        preprocessor: a :class:`~zoo.models.TranslatorPreprocessor` (``tokenize``,
            ``detokenize``).
        search: a function of ``(B', S)`` int32 source ids, 0-padded, to ``(B', L)`` int ids
            of the outputs; traced in the caller's graph.

    Returns:
        ``tf.string`` ``(B,)``: one valid UTF-8 output per input.

    Example:
        >>> import os, tempfile
        >>> import tensorflow as tf
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> from zoo.models import TranslatorPreprocessor
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> path = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> copy = lambda ids: ids  # a search that gives back its source
        >>> outputs = translate_strings(
        ...     tf.constant(["A dog runs.", ""]), TranslatorPreprocessor(path), copy)
        >>> [text.decode() for text in outputs.numpy()]
        ['A dog runs.', '']
    """
    # Here, not at the top: zoo.decoding's searches must import without TensorFlow (Keras's
    # JAX backend, where TensorFlow is not installed).
    import tensorflow as tf

    batch = tf.shape(inputs)[0]
    tokens = preprocessor.tokenize(inputs)  # (B, None) ragged
    # Only the rows with tokens are decoded; the others translate to "".
    keep = tf.where(tokens.row_lengths() > 0)[:, 0]  # (B',) int64
    source = tf.gather(tokens, keep).to_tensor(default_value=PAD_ID)  # (B', S)

    def decode():
        return preprocessor.detokenize(search(tf.cast(source, tf.int32)))  # (B',)

    outputs = tf.cond(tf.size(keep) > 0, decode, lambda: tf.zeros([0], tf.string))  # (B',)
    return tf.tensor_scatter_nd_update(
        tf.fill([batch], ""), tf.expand_dims(keep, 1), outputs
    )  # (B,)


def bucket_length(length, buckets=BUCKETS, source_limit=None):
    """``length`` (an int tensor, in ``keras.ops``) padded up to its length bucket within
    ``source_limit``, as :meth:`Buckets.padded_length` pads a Python int: the widths of a
    search's buffers."""
    top = buckets.lengths[-1]
    ladder = ops.convert_to_tensor(buckets.lengths, "int32")
    fitting = ops.min(ops.where(ladder >= length, ladder, top))
    padded = ops.where(length <= top, fitting, (length + top - 1) // top * top)
    if source_limit is None:
        return padded
    return ops.maximum(ops.minimum(padded, source_limit), length)


def translate_sentences(
    model,
    preprocessor,
    sentences,
    make_search,
    method="beam",
    beam_size=4,
    max_length=None,
    batch_size=64,
    verbose=False,
    **kwargs,
):
    """Translate sentences with the search that ``make_search`` builds for ``model``.

    :func:`translate_strings` with the search under XLA, compiled once per settings and padded
    shape and cached with the model; batches of ``batch_size`` sentences of similar lengths
    (results in the order given), padded to :data:`BUCKETS` (:func:`bucketed`).

    Args:
        model: the trained model (the key of the compiled functions' cache).
        preprocessor: the model's :class:`~zoo.models.TranslatorPreprocessor` (its
            ``max_length``: the model's source positions, or None; its tokenizer's ``bos_id``
            and ``eos_id`` start and end the target).
        sentences: a list of source sentences (``str``).
        make_search: ``make_search(model, method, max_length, compile_stage=..., **kwargs)``
            -> an ids -> ids search (the task's: a translator's, a NAT's).
        method, beam_size, max_length, **kwargs: the search's settings (``beam_size`` goes to
            ``"beam"`` only; ``bos_id`` and ``eos_id`` come from the tokenizer).
        batch_size: the most sentences decoded together.
        verbose: draw a progress bar over the sentences on stderr.

    Returns:
        A list of ``str``, one translation per sentence; a sentence with no tokens (empty or
        blank) gives the empty string.
    """
    import tensorflow as tf

    if isinstance(sentences, str):
        raise TypeError("translate() takes a list of sentences; wrap a single one in a list.")
    sentences = list(sentences)
    if kwargs.get("rescorer", 0) is None:
        del kwargs["rescorer"]  # no rescorer: the same compiled search as without the argument
    tokenizer, source_limit = preprocessor.tokenizer, preprocessor.max_length
    # The tokenizer's generation changes when a seed reset killed its tf-text op: retrace then.
    generation = tokenizer.ensure_alive()
    settings = (id(tokenizer), generation, source_limit, method, beam_size, max_length,
                tuple(sorted(kwargs.items())))  # fmt: skip
    functions = _COMPILED.setdefault(model, {})
    if settings not in functions:  # built before any sentence: bad settings fail at once
        ids_kwargs = dict(kwargs, eos_id=tokenizer.eos_id if tokenizer.eos_id >= 0 else EOS_ID)
        if tokenizer.bos_id >= 0:
            ids_kwargs["bos_id"] = tokenizer.bos_id
        if method == "beam":
            ids_kwargs["beam_size"] = beam_size
        search = make_search(model, method, max_length, compile_stage=xla_compiled, **ids_kwargs)
        functions[settings] = _make_translate_function(tf, preprocessor, search)
    run = functions[settings]
    if not sentences:
        return []

    # Batches of sentences of similar lengths: a batch is decoded as long as its longest
    # sentence needs, and its search is sized from its widest source.
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    outputs = [None] * len(sentences)
    progress = Progress(len(sentences), enabled=verbose, unit="sentences")
    for start in range(0, len(sentences), batch_size):
        chunk = order[start : start + batch_size]
        texts = run(tf.constant([sentences[i] for i in chunk])).numpy()
        for i, text in zip(chunk, texts):
            outputs[i] = text.decode("utf-8", errors="replace")
        progress.add(len(chunk))
    return outputs


def xla_compiled(function):
    """``function`` compiled by XLA, as the searches of :func:`translate` and of the ``_xla``
    serving signatures run (a ``compile_stage`` of a task's search)."""
    import tensorflow as tf

    return tf.function(function, jit_compile=True, autograph=False)


def bucketed(search, source_limit=None, buckets=BUCKETS, rows=True):
    """``search`` on sources padded to few shapes: what an XLA-compiled search needs.

    XLA compiles once per input shape, so the batch is padded up to its :class:`Buckets` rows
    and length (within ``source_limit``); a batch of more rows than the largest bucket is
    searched in parts. Padding changes no translation that ends (padded rows are dropped), but
    the search's length follows the padded width (:func:`output_length`).

    A search whose ``side_by_side`` attribute is true has each part of several rows searched
    as two halves at once: XLA's CPU runtime runs a narrow model's operations one after
    another on one core, and TensorFlow runs the two halves' programs (one program, as both
    have one shape) on two of its threads (see
    :func:`zoo.models.translator.search.halves_side_by_side`).

    Args:
        search: a function of ``(B, S)`` int32 source ids, 0-padded, to ``(B, L)`` ids; when
            its ``side_by_side`` is true, a row's ids must not depend on the other rows.
        source_limit: the model's source positions (None: no limit).
        buckets: the padded shapes (:data:`BUCKETS`, those of every export).
        rows: pad and split the rows too (for XLA); False pads only the width, all that a
            plain graph-mode search needs for the same outputs (a loop over parts would keep
            TensorFlow from hoisting the weights out of the search's).

    Returns:
        A function of the same arguments and results (int32 ids), in TensorFlow ops.
    """
    import tensorflow as tf

    def searched(source):  # (rows, S) -> (rows, L) int32
        return tf.cast(search(source), tf.int32)

    def halves(source):  # the same, the two halves at once (no dependence between them)
        half = tf.shape(source)[0] // 2
        first, second = searched(source[:half]), searched(source[half:])
        # A NAT's outputs are as wide as its longest candidate: the narrower half 0-padded.
        width = tf.maximum(tf.shape(first)[1], tf.shape(second)[1])
        return tf.concat([tf.pad(ids, [[0, 0], [0, width - tf.shape(ids)[1]]])
                          for ids in (first, second)], 0)  # fmt: skip

    def part_searched(source):
        if not getattr(search, "side_by_side", False):
            return searched(source)
        return tf.cond(tf.shape(source)[0] > 1, lambda: halves(source), lambda: searched(source))

    def run(source):  # (B', S)
        batch, length = tf.shape(source)[0], tf.shape(source)[1]
        padded = tf.cast(bucket_length(length, buckets, source_limit), tf.int32)
        if not rows:
            return searched(tf.pad(source, [[0, 0], [0, padded - length]]))
        ladder = tf.constant(buckets.rows)
        part = tf.reduce_min(tf.where(ladder >= batch, ladder, buckets.rows[-1]))  # rows
        parts = (batch + part - 1) // part
        source = tf.pad(source, [[0, parts * part - batch], [0, padded - length]])
        ids = tf.map_fn(  # (parts, rows, None): one part at a time, each a bucket's shape
            lambda part_source: tf.RaggedTensor.from_tensor(part_searched(part_source)),
            tf.reshape(source, [parts, part, padded]),
            # Ragged: a NAT's part is as wide as its longest output, so parts' widths differ.
            fn_output_signature=tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1),
            parallel_iterations=1,
        )
        return ids.merge_dims(0, 1).to_tensor(default_value=PAD_ID)[:batch]  # (B', L)

    return run


def _make_translate_function(tf, preprocessor, search):
    """The frame in a ``tf.function`` over the search (compiled by XLA), on bucketed shapes."""
    search = bucketed(search, preprocessor.max_length)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def run(sentences):
        return translate_strings(sentences, preprocessor, search)

    return run
