"""Sentences in, sentences out: the strings-to-strings frame around a search, and translate().

This is the only TensorFlow-specific module of :mod:`zoo.decoding`: the tokenizer is tf-text
(:class:`zoo.data.SentencePieceTokenizer`). :func:`translate_strings` is the frame, in graph
ops, shared by :func:`translate` (the search under ``tf.function(jit_compile=True)``) and the
SavedModels of :class:`zoo.export.TranslatorServing` and :class:`zoo.export.NATServing` (plain
graph mode). It knows the tokenizer and an ids -> ids search, not the model. TensorFlow is imported when a function is called.
"""

import weakref

from keras import ops

from zoo.decoding.beam import beam_search
from zoo.decoding.greedy import greedy_search
from zoo.decoding.nat import MAX_ITERATIONS, check_length_beam, length_candidates, nat_search
from zoo.decoding.sampling import sample
from zoo.decoding.search_helpers import check_count
from zoo.models.nat import decode_and_lengths, nat_modes
from zoo.models.translator import rescorer, step_and_caches, translator_layers
from zoo.progress import Progress
from zoo.special_ids import BOS_ID, EOS_ID, PAD_ID

__all__ = [
    "bucketed", "nat_counts", "nat_length_candidates", "output_length", "translate",
    "translate_strings", "translator_search", "xla_compiled",
]  # fmt: skip

METHODS = ("beam", "greedy", "sample", "mask_predict")
NAT_METHODS = ("mask_predict",)  # the methods of a non-autoregressive model (zoo.models.nat)
NAT_DEFAULTS = {"iterations": 4, "length_beam": 3}  # of the NAT task and its serving

# model -> {settings: compiled function}; a model's functions go when the model goes.
_COMPILED = weakref.WeakKeyDictionary()
_LENGTH_BUCKET = 8  # source lengths are padded to a multiple of this, to bound recompiles


def output_length(source_ids, limit=None):
    """How many target tokens a search of these sources makes room for: ``1.2 S + 10``.

    ``S`` is the width of the padded batch, as fairseq sizes its searches
    (``--max-len-a 1.2 --max-len-b 10``, the setting of its translation examples), capped by
    the model's ``limit`` positions. The caches, the buffers and beam search's exact early
    stopping bound all follow this length, so a batch of short sentences is not decoded at
    the cost of the longest one the model can read. On Multi30k training data, 8 of 29,000
    references are longer than this for their own source; in a batch, the widest source
    sets the length.

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


def translate_strings(inputs, tokenizer, search, max_input_length=None):
    """The frame of every text-to-text decoder: strings in, strings out, in TensorFlow ops.

    Invalid UTF-8 in an input is replaced by U+FFFD; the input is tokenized and truncated to
    its first ``max_input_length`` tokens. The rows with tokens go to ``search`` as one 0-padded
    batch (none at all when no row has a token); its ids are cut after the first EOS of the
    tokenizer, detokenized, and repaired to valid UTF-8 (byte pieces can spell invalid
    UTF-8). A row without tokens (empty, blank, only invalid bytes) translates to ``""``.

    Args:
        inputs: ``tf.string`` ``(B,)``, the sentences (any bytes; B may be 0).
        tokenizer: a :class:`zoo.data.SentencePieceTokenizer` (``tokenize``, ``detokenize``,
            ``eos_id``).
        search: a function of ``(B', S)`` int32 source ids, 0-padded, to ``(B', L)`` int ids
            of the outputs; traced in the caller's graph.
        max_input_length: the most tokens read per input; None reads them all.

    Returns:
        ``tf.string`` ``(B,)``: one valid UTF-8 output per input.

    Example:
        >>> import os, tempfile
        >>> import tensorflow as tf
        >>> from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> path = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> copy = lambda ids: ids  # a search that gives back its source
        >>> outputs = translate_strings(
        ...     tf.constant(["A dog runs.", ""]), SentencePieceTokenizer(path), copy)
        >>> [text.decode() for text in outputs.numpy()]
        ['A dog runs.', '']
    """
    import tensorflow as tf

    from zoo.data.utf8 import repair_utf8

    eos_id = tokenizer.eos_id if tokenizer.eos_id >= 0 else EOS_ID
    batch = tf.shape(inputs)[0]
    tokens = tokenizer.tokenize(repair_utf8(inputs))  # (B, None) ragged
    if max_input_length is not None:
        tokens = tokens[:, :max_input_length]
    # Only the rows with tokens are decoded; the others translate to "".
    keep = tf.where(tokens.row_lengths() > 0)[:, 0]  # (B',) int64
    source = tf.gather(tokens, keep).to_tensor(default_value=PAD_ID)  # (B', S)

    def decode():
        ids = tf.convert_to_tensor(search(tf.cast(source, tf.int32)))  # (B', L)
        # Cut after the first EOS.
        eos_seen = tf.cumsum(tf.cast(tf.equal(ids, eos_id), tf.int32), axis=1)
        ids = tf.where(tf.equal(eos_seen, 0), ids, PAD_ID)
        return tokenizer.detokenize(ids)  # (B',)

    outputs = tf.cond(tf.size(keep) > 0, decode, lambda: tf.zeros([0], tf.string))  # (B',)
    # Byte pieces can spell invalid UTF-8: repair it, so that every output is valid text.
    outputs = repair_utf8(outputs)
    return tf.tensor_scatter_nd_update(
        tf.fill([batch], ""), tf.expand_dims(keep, 1), outputs
    )  # (B,)


def nat_counts(model, iterations=None, length_beam=None):
    """A NAT's Mask-Predict iterations and length beam, checked against what it can use.

    A ``decoder_input="copy"`` model reads no target tokens, so refinement cannot change its
    output: it takes one iteration. A ``length_mode="max"`` model decodes one length per
    sentence: it takes one candidate. (Read from the model: :func:`zoo.models.nat.nat_modes`.)

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        iterations: a Python int, a scalar int tensor (graph mode), or None for the default:
            4, or 1 for a copy model.
        length_beam: likewise; the default is 3, or 1 for a max-length model.

    Returns:
        ``(iterations, length_beam)``: Python ints as given, or tensors clamped (to
        ``[1, MAX_ITERATIONS]`` and as by :func:`~zoo.decoding.nat.check_length_beam`, and
        to 1 where the model takes one).

    Raises:
        ValueError: an int that is not positive, more iterations than one for a copy model,
            or more candidates than one for a max-length model (or than its length classes).
    """
    modes = nat_modes(model)
    if iterations is None:
        iterations = NAT_DEFAULTS["iterations"] if modes.refines else 1
    if length_beam is None:
        length_beam = NAT_DEFAULTS["length_beam"] if modes.predicts_length else 1
    iterations = check_count(iterations, "iterations", MAX_ITERATIONS if modes.refines else 1)
    if modes.predicts_length:
        length_beam = check_length_beam(length_beam, modes.max_offset)
    else:
        length_beam = check_count(length_beam, "length_beam", 1)
    if not modes.refines and isinstance(iterations, int) and iterations > 1:
        raise ValueError(
            f"iterations={iterations}: a model with decoder_input='copy' reads no target "
            "tokens, so refinement cannot change its output; use iterations=1."
        )
    if not modes.predicts_length and isinstance(length_beam, int) and length_beam > 1:
        raise ValueError(
            f"length_beam={length_beam}: a model with length_mode='max' decodes one length "
            "per sentence; use length_beam=1."
        )
    return iterations, length_beam


def _round_up(n):
    """``n`` (an int or an int tensor) rounded up to a multiple of ``_LENGTH_BUCKET``."""
    return (n + _LENGTH_BUCKET - 1) // _LENGTH_BUCKET * _LENGTH_BUCKET


def nat_length_candidates(model, source_ids, length_beam, max_length):
    """A NAT's ``(B, l)`` candidate lengths (EOS included), best first: its length
    predictor's ``l`` best (:func:`~zoo.decoding.length_candidates`), or for a
    ``length_mode="max"`` model (``l`` = 1) each sentence's widest length.

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.
        length_beam: l, as checked or clamped by :func:`nat_counts`.
        max_length: Python int, the longest target (EOS included).
    """
    _, lengths = decode_and_lengths(model, source_ids, max_length, length_beam)
    if "lengths" in lengths:
        return ops.expand_dims(lengths["lengths"], 1)
    return length_candidates(
        **lengths, length_beam=length_beam, max_offset=nat_modes(model).max_offset,
        max_length=max_length,
    )


def translator_search(model, method, max_length, beam_size=4, compile_stage=None, **kwargs):
    """A translator's ids -> ids search, for :func:`translate_strings`.

    Args:
        model: a translator of :func:`zoo.models.build_translator`, or for ``"mask_predict"`` a
            model of :func:`zoo.models.nat.build_nat_translator`.
        method: ``"beam"``, ``"greedy"`` or ``"sample"``; ``"mask_predict"``
            (:func:`~zoo.decoding.nat_search`) for a non-autoregressive model.
        max_length: Python int, the most target tokens per sentence; None sizes each batch's
            search from its source (:func:`output_length`) for an autoregressive
            translator, and is the model's positions for ``"mask_predict"``.
        beam_size: the beam size of ``"beam"`` (an int, or a scalar int tensor in graph mode).
            Likewise ``iterations`` and ``length_beam`` of ``"mask_predict"`` (in ``kwargs``,
            1 by default; checked, or clamped, by :func:`nat_counts`).
        compile_stage: None (the search is traced in the caller's graph), or a function that
            compiles a function (``translate()`` passes XLA's). It compiles the whole search
            of an autoregressive model, and each of the two stages of ``"mask_predict"``
            (the candidate lengths, then the refinement at their width).
        **kwargs: further arguments of the search (``bos_id``, ``eos_id``, ``alpha``, ...),
            and ``monotonic_window`` of an autoregressive translator's step
            (:func:`zoo.models.translator.step`: monotonic attention decoding).

    Returns:
        A function ``(B, S)`` source ids -> ``(B, L)`` int32 target ids, ``L = max_length``
        or :func:`output_length` (``"mask_predict"``: ``L`` is the longest candidate length
        rounded up to a multiple of 8, at most ``max_length``).
    """
    compile_stage = compile_stage or (lambda function: function)
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose from {METHODS}.")
    is_nat = model.name == "nat"
    if is_nat != (method in NAT_METHODS):  # the other kind's search would run, and be wrong
        expected = NAT_METHODS if is_nat else tuple(m for m in METHODS if m not in NAT_METHODS)
        raise ValueError(
            f"Method {method!r} does not decode a model named {model.name!r}; use one of "
            f"{expected}."
        )

    positions = translator_layers(model).max_length
    if is_nat and max_length is None:  # a NAT's buffers span its predicted lengths
        max_length = positions
        if max_length is None:
            raise ValueError("The model's embedding has no max_length: pass max_length.")
    if is_nat:
        # Checked, or clamped (a tensor), once: the memory is repeated by the count searched.
        nat_kwargs = {k: v for k, v in kwargs.items() if k not in ("bos_id", "rescorer")}
        nat_kwargs["iterations"], nat_kwargs["length_beam"] = nat_counts(
            model, kwargs.get("iterations", 1), kwargs.get("length_beam", 1)
        )
        teacher = kwargs.get("rescorer")
        if teacher is not None:
            _check_rescorer(teacher, model, max_length)
    elif kwargs.get("rescorer") is not None:
        raise ValueError("rescorer reranks the candidates of method 'mask_predict' only.")
    monotonic_window = kwargs.pop("monotonic_window", None)
    if is_nat and monotonic_window is not None:
        raise ValueError("monotonic_window constrains a left-to-right decoder; not the NAT's.")

    if is_nat:
        length_beam = nat_kwargs["length_beam"]
        refine_kwargs = {k: v for k, v in nat_kwargs.items() if k != "length_beam"}

        def candidates(source_ids):
            return nat_length_candidates(model, source_ids, length_beam, max_length)

        def refine(source_ids, lengths, width_template):
            """Mask-Predict at the given candidate lengths, on buffers as wide as
            ``width_template`` (a shape, so that XLA compiles it as a constant)."""
            width = ops.shape(width_template)[1]
            decode, _ = decode_and_lengths(model, source_ids, width, length_beam)
            rescore = None
            if teacher is not None:
                rescore = rescorer(teacher, source_ids, kwargs.get("bos_id", BOS_ID))
            ids, _ = nat_search(
                decode, max_length=width, lengths=lengths, rescore=rescore, **refine_kwargs
            )
            return ids

        candidates, refine = compile_stage(candidates), compile_stage(refine)

        def nat(source_ids):
            # The buffers span the longest candidate, rounded up to a multiple of 8 (few
            # compiled shapes), not every position: the decoder runs T times on them. Two
            # stages, since a width read from values cannot be a shape inside one XLA program;
            # the encoder runs in both (it costs far less than the positions it saves).
            lengths = candidates(source_ids)  # (B, l)
            width = ops.minimum(_round_up(ops.max(lengths)), max_length)
            return refine(source_ids, lengths, ops.zeros((1, width), "int32"))

        return nat

    def search(source_ids):
        length = max_length if max_length is not None else output_length(source_ids, positions)
        step, caches = step_and_caches(model, source_ids, length, monotonic_window)
        if method == "beam":
            ids, _ = beam_search(step, caches, length, beam_size=beam_size, **kwargs)
            return ids
        if method == "greedy":
            return greedy_search(step, caches, length, **kwargs)
        return sample(step, caches, length, **kwargs)

    return compile_stage(search)


def _check_rescorer(teacher, model, max_length):
    """An autoregressive translator that can read the NAT's candidates, or a ValueError."""
    if getattr(teacher, "name", None) != "translator":
        raise ValueError(
            f"rescorer must be an autoregressive translator (a model named 'translator'), got "
            f"{getattr(teacher, 'name', type(teacher).__name__)!r}."
        )
    sizes = (translator_layers(teacher).vocab_size, translator_layers(model).vocab_size)
    if sizes[0] != sizes[1]:
        raise ValueError(
            f"The rescorer has {sizes[0]} tokens and the model {sizes[1]}: a rescorer must "
            "share the model's vocabulary."
        )
    positions = translator_layers(teacher).max_length
    if positions is not None and positions < max_length:
        raise ValueError(
            f"The rescorer reads {positions} target positions; the candidates have up to "
            f"{max_length} (pass max_length={positions})."
        )


def translate(
    model,
    tokenizer,
    sentences,
    method="beam",
    beam_size=4,
    max_length=None,
    batch_size=64,
    verbose=False,
    **kwargs,
):
    """Translate sentences with a trained translator.

    The sentences go through :func:`translate_strings` (tokenized in the graph by the tf-text
    tokenizer, truncated to the model's positions, cut after EOS, detokenized) with the search
    under ``tf.function(jit_compile=True)``, compiled once per settings and padded shape and
    cached with the model. The sentences go through in batches of ``batch_size`` sentences
    of similar lengths (sorted by length, the results in the order given); sources are padded
    to a multiple of 8 tokens and batches to a power of two, so that few shapes are ever
    compiled; padding changes no translation that ends, and the search's length follows the
    padded width (as in the SavedModel's signatures).

    Args:
        model: a translator of :func:`zoo.models.build_translator`.
        tokenizer: the :class:`zoo.data.SentencePieceTokenizer` of its vocabulary (its
            ``bos_id`` and ``eos_id`` start and end the target).
        sentences: a list of source sentences (``str``).
        method: ``"beam"`` (:func:`~zoo.decoding.beam_search`), ``"greedy"``
            (:func:`~zoo.decoding.greedy_search`) or ``"sample"`` (:func:`~zoo.decoding.sample`);
            for a model of :func:`zoo.models.nat.build_nat_translator`, ``"mask_predict"``
            (:func:`~zoo.decoding.nat_search`: ``iterations`` and ``length_beam`` in
            ``kwargs``; 1 and 1, the default, are the one-pass decoder; a copy model takes
            one iteration, a max-length model one length: :func:`nat_counts`; ``rescorer``,
            an autoregressive translator of the same vocabulary, picks among the length
            candidates by its mean log-probability per token instead of the NAT's own).
        beam_size: the beam size of ``"beam"``.
        max_length: the most target tokens per sentence; by default each batch's search is
            sized from its source (:func:`output_length`: 1.2 times its width plus 10, at
            most the model's positions), and a NAT's is its positions.
        batch_size: the most sentences decoded together.
        verbose: draw a progress bar over the sentences on stderr.
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
    if kwargs.get("rescorer", 0) is None:
        del kwargs["rescorer"]  # no rescorer: the same compiled search as without the argument
    layers = translator_layers(model)
    # The tokenizer's generation changes when a seed reset killed its tf-text op: retrace then.
    generation = tokenizer.ensure_alive() if hasattr(tokenizer, "ensure_alive") else 0
    settings = (
        id(tokenizer), generation, method, beam_size, max_length, tuple(sorted(kwargs.items()))
    )
    functions = _COMPILED.setdefault(model, {})
    if settings not in functions:
        ids_kwargs = dict(kwargs, eos_id=tokenizer.eos_id if tokenizer.eos_id >= 0 else EOS_ID)
        if tokenizer.bos_id >= 0:
            ids_kwargs["bos_id"] = tokenizer.bos_id
        if method == "beam":
            ids_kwargs["beam_size"] = beam_size
        search = translator_search(
            model,
            method,
            max_length,
            compile_stage=xla_compiled,
            **ids_kwargs,
        )
        functions[settings] = _make_translate_function(
            tf, tokenizer, search, layers.max_source_length
        )
    run = functions[settings]

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
    serving signatures run (a ``compile_stage`` of :func:`translator_search`)."""
    import tensorflow as tf

    return tf.function(function, jit_compile=True, autograph=False)


def bucketed(search, source_limit=None):
    """``search`` on sources padded to few shapes: what an XLA-compiled search needs.

    XLA compiles a function once per input shape. The source batch is padded to the next
    power of two rows and the next multiple of 8 tokens (within ``source_limit``), so that a
    stream of requests compiles a few dozen shapes, not one per request. Padding changes no
    translation that ends (the padded rows are dropped from the result), but the search's
    length follows the padded width (:func:`output_length`): a translation that never ends
    runs to that length.

    Args:
        search: a function of ``(B, S)`` int32 source ids, 0-padded, to ``(B, L)`` ids.
        source_limit: the model's source positions (None: no limit).

    Returns:
        A function of the same arguments and results, in TensorFlow ops.
    """
    import tensorflow as tf

    def run(source):  # (B', S)
        batch, length = tf.shape(source)[0], tf.shape(source)[1]
        rows = tf.while_loop(lambda n: n < batch, lambda n: 2 * n, [tf.constant(1)])[0]
        padded = tf.maximum(_round_up(length), _LENGTH_BUCKET)
        if source_limit is not None:
            padded = tf.maximum(tf.minimum(padded, source_limit), length)
        source = tf.pad(source, [[0, rows - batch], [0, padded - length]])
        return search(source)[:batch]  # (B', L)

    return run


def _make_translate_function(tf, tokenizer, search, source_limit):
    """The frame in a ``tf.function`` over the search (compiled by XLA), on bucketed shapes."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def run(sentences):
        return translate_strings(
            sentences, tokenizer, bucketed(search, source_limit), max_input_length=source_limit
        )

    return run
