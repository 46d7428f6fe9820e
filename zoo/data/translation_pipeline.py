"""The tf.data pipeline for sequence-to-sequence training with teacher forcing.

:func:`make_translation_dataset` turns ``(source, target)`` pairs into token-budget batches of
ids, bucketed by length and padded with :data:`~zoo.data.PAD_ID`, each
``({"source": S, "target_in": [BOS] + target}, target + [EOS])`` (:class:`TeacherForcing`), or
whatever examples another objective (masked targets, CTC targets) makes of each pair.
"""

import tensorflow as tf

from zoo.data.epoch_order import (
    DataPosition,
    draw_seed,
    epoch_shuffled,
    per_pass,
    resumable_pass,
)
from zoo.data.parallel_corpus import SHUFFLE_BUFFER, ParallelCorpus
from zoo.data.sentencepiece_vocab import PAD_ID

__all__ = [
    "TeacherForcing", "bucket_spec", "equal_shares", "make_translation_dataset", "prefetched",
    "teacher_forcing",
]  # fmt: skip

# Pairs are tokenized this many at a time (one tf-text call per chunk instead of one per pair).
_TOKENIZE_CHUNK = 1024


def bucket_spec(batch_tokens, max_length, bucket_width=8, batch_multiple=1):
    """The length buckets and their batch sizes for a token budget.

    Bucket ``i`` holds the examples whose length (see :func:`make_translation_dataset`) is at
    most ``upper[i]``, where ``upper = [w, 2w, 3w, ..., max_length]``; its batches hold
    ``batch_tokens // upper[i]`` examples, so that a batch padded to at most ``upper[i]``
    positions never holds more than ``batch_tokens`` positions.

    Args:
        batch_tokens: the token budget of a batch.
        max_length: the longest sequence, in tokens.
        bucket_width: the length step between bucket bounds.
        batch_multiple: round each batch size down to a multiple of this: the number of
            replicas a batch is split across, so that each replica gets the same number of
            examples (a bucket's last, partial batch is cut by :func:`equal_shares`). A bucket
            whose budget holds fewer examples than that gets one per replica, over its budget.

    Returns:
        ``(upper_bounds, batch_sizes)``: two lists of ints of the same length.

    Example:
        >>> bucket_spec(batch_tokens=64, max_length=20, bucket_width=8)
        ([8, 16, 20], [8, 4, 3])
    """
    sizes = {"batch_tokens": batch_tokens, "max_length": max_length, "bucket_width": bucket_width,
             "batch_multiple": batch_multiple}
    for field, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{field} must be a positive int, got {value!r}.")
    if batch_tokens < max_length:
        raise ValueError(
            f"batch_tokens ({batch_tokens}) must be at least max_length ({max_length}), so that "
            "one example of the longest length fits in a batch."
        )
    upper = list(range(bucket_width, max_length, bucket_width)) + [max_length]
    multiple = batch_multiple
    return upper, [max(multiple, batch_tokens // u // multiple * multiple) for u in upper]


def teacher_forcing(source, target, source_limit, max_length, bos_id, eos_id):
    """Pack token ids for teacher forcing: one example ``(S,)``, ``(T,)`` or a ragged batch.

    The one packing of the translators, shared by this pipeline and their preprocessor
    (``fit`` on strings, :class:`zoo.models.TranslatorPreprocessor`).

    Returns:
        ``({"source": source[:source_limit], "target_in": [BOS] + target}, target + [EOS])``,
        the target cut to ``max_length - 1`` tokens first.
    """
    source = source[..., :source_limit]
    target = target[..., : max_length - 1]
    rows = tf.shape(target.row_lengths()) if isinstance(target, tf.RaggedTensor) else (
        tf.shape(target)[:-1])  # fmt: skip
    column = tf.concat([rows, [1]], 0)  # one BOS or EOS per row
    bos, eos = tf.fill(column, bos_id), tf.fill(column, eos_id)
    return {"source": source, "target_in": tf.concat([bos, target], -1)}, tf.concat(
        [target, eos], -1
    )


class TeacherForcing:
    """Teacher forcing (:func:`teacher_forcing`) as the objective of the pipeline: its default.

    An objective is what :func:`make_translation_dataset` makes of the ids of each pair: an
    object with ``example(source, target, seed=None)``, ``(S,)`` and ``(T,)`` int32 ids ->
    ``(features, labels)``, nests of int32 tensors (sequences 1-D, padded with
    :data:`~zoo.data.PAD_ID`, or scalars), none longer than ``max_length``; and
    ``target_limit``, the most target ids an example keeps (a longer target is cut, or with
    ``long_pairs="skip"`` its pair skipped). ``seed`` (shape (2,)) is the seed of whatever the
    example draws, with stateless ops: a function of the epoch and the pair's place alone.

    Args:
        max_length: the most source ids, and target ids with BOS or EOS.
        bos_id: the vocabulary's BOS id.
        eos_id: the vocabulary's EOS id.

    Example:
        >>> features, labels = TeacherForcing(8, bos_id=2, eos_id=3).example(
        ...     tf.constant([5, 6]), tf.constant([7, 8, 9]))
        >>> features["target_in"].numpy().tolist(), labels.numpy().tolist()
        ([2, 7, 8, 9], [7, 8, 9, 3])
    """

    def __init__(self, max_length, bos_id, eos_id):
        self.max_length, self.bos_id, self.eos_id = max_length, bos_id, eos_id
        self.target_limit = max_length - 1  # room for the BOS or the EOS

    def example(self, source, target, seed=None):
        """``({"source", "target_in": [BOS] + target}, target + [EOS])``, cut to fit; it draws
        nothing (``seed`` unused)."""
        return teacher_forcing(source, target, self.max_length, self.max_length, self.bos_id,
                               self.eos_id)  # fmt: skip


def make_translation_dataset(
    pairs,
    tokenizer,
    batch_tokens=4096,
    max_length=128,
    bucket_width=8,
    shuffle=True,
    shuffle_buffer=None,
    seed=None,
    pad_to_bucket=False,
    drop_remainder=False,
    objective=None,
    batch_multiple=1,
    epoch=None,
    long_pairs="truncate",
    counts=None,
    part=None,
):
    """Build a ``tf.data.Dataset`` of token-budget batches of pairs, teacher-forced by default.

    Shuffle the pairs, tokenize both sides in-graph, make each pair's example with
    ``objective``, group the examples into length buckets (:func:`bucket_spec`), batch each to
    the token budget and pad with :data:`~zoo.data.PAD_ID`. An example's length is that of its
    longest sequence; a batch of ``B`` examples padded to ``T`` keeps ``B * T <= batch_tokens``.
    One pass is one epoch, every pair once (each bucket's partial batch kept unless
    ``drop_remainder``); ``.repeat()`` for more, each in a new order with ``shuffle``.

    Args:
        pairs: a :class:`~zoo.data.ParallelCorpus` (streamed), or a sequence of
            ``(source, target)`` strings (held in memory). Pairs with an empty side are skipped.
        tokenizer: a :class:`~zoo.data.SentencePieceTokenizer` (or any object with
            ``tokenize`` and ``pad_id``/``bos_id``/``eos_id``); its pad id must be 0.
        batch_tokens: the token budget of a batch (examples times padded length).
        max_length: the longest sequence kept, in tokens.
        bucket_width: the length step between buckets (smaller: less padding, more buckets).
        shuffle: shuffle the pairs before bucketing, anew each epoch.
        shuffle_buffer: the pairs of a corpus's shuffle window (by default
            :data:`~zoo.data.parallel_corpus.SHUFFLE_BUFFER`); in-memory pairs are shuffled
            whole, and, with a ``DataPosition``, bucketed in windows of this many.
        seed: the seed of the shuffle and of the objective's draws.
        epoch: a :class:`zoo.data.DataPosition`, or its ``epoch`` variable: each epoch's order
            is then a function of ``seed`` and the epoch alone, as a run resumed mid-epoch
            needs. With the position (and ``shuffle``), the epoch is bucketed window by
            window (each window ends with its partial batches), so that a resumed run starts
            in the window it stopped in, without making those before
            (:func:`zoo.data.resumable_pass`).
        pad_to_bucket: pad every batch to its bucket's upper bound (fewer shapes, fewer XLA
            retracings); source and target of a batch then have the same length.
        drop_remainder: drop the last partial batch of each bucket.
        objective: what each pair's ids become, made for this ``max_length``; by default
            ``TeacherForcing(max_length, tokenizer.bos_id, tokenizer.eos_id)``.
        batch_multiple: batch sizes are multiples of this (see :func:`bucket_spec`).
        long_pairs: ``"truncate"`` over-long sides (validation: every pair counts), or
            ``"skip"`` pairs whose source is over ``max_length`` or target over the
            objective's ``target_limit`` (training: a truncated target teaches the model to
            stop mid-sentence).
        counts: a :class:`zoo.data.DataCounts` that counts the pairs read and skipped.
        part: ``(index, count)``: only part ``index`` of ``count`` disjoint parts of each
            epoch (a worker's): a corpus's by file or line
            (:meth:`~zoo.data.ParallelCorpus.part_of`), a sequence's every ``count``-th pair.

    Returns:
        A ``tf.data.Dataset`` of the objective's examples in batches, padded: by default
        ``({"source": (B, S), "target_in": (B, T)}, (B, T))``, all ``int32``, where
        ``target_in[:, 0] == BOS`` and ``target_in[:, 1:]`` equals the labels ``[:, :-1]``.

    Raises:
        ValueError: empty ``pairs``, no pair left once the empty and (``"skip"``) the long
            ones are skipped, a pair that is not two strings (named by its index), a
            tokenizer without pad id 0 or without BOS/EOS, an objective made for another
            ``max_length``, or a bad size argument.

    Example:
        >>> import tempfile, os
        >>> from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
        >>> pairs = load_multi30k("val")
        >>> texts = [s for pair in pairs for s in pair]
        >>> tokenizer = SentencePieceTokenizer(
        ...     train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), vocab_size=500))
        >>> ds = make_translation_dataset(pairs, tokenizer, batch_tokens=1024, max_length=64)
        >>> features, labels = next(iter(ds))
        >>> sorted(features), features["target_in"].shape == labels.shape
        (['source', 'target_in'], True)
    """
    upper, batch_sizes = bucket_spec(batch_tokens, max_length, bucket_width, batch_multiple)
    pad_id, bos_id, eos_id = (getattr(tokenizer, f"{n}_id", -1) for n in ("pad", "bos", "eos"))
    if pad_id != PAD_ID:
        raise ValueError(f"The tokenizer's pad id is {pad_id}; the pipeline pads with {PAD_ID}.")
    if bos_id < 0 or eos_id < 0:
        raise ValueError(
            f"The tokenizer needs BOS and EOS ids, got bos_id={bos_id}, eos_id={eos_id}."
        )

    if objective is None:
        objective = TeacherForcing(max_length, bos_id, eos_id)
    if objective.max_length != max_length:
        raise ValueError(f"The objective is made for max_length={objective.max_length}, the "
                         f"pipeline's is {max_length}.")  # fmt: skip
    if long_pairs not in ("truncate", "skip"):
        raise ValueError(f"long_pairs must be 'truncate' or 'skip', got {long_pairs!r}.")
    target_limit = objective.target_limit
    part_index = 0 if part is None else part[0]

    def tokenize(places, src, tgt):  # (C,) strings -> (C, None) ids
        return places, tokenizer.tokenize(src), tokenizer.tokenize(tgt)

    def fits(place, src, tgt):  # what "skip" keeps: within the limits (the objective may cut)
        return tf.logical_and(tf.shape(src)[0] <= max_length, tf.shape(tgt)[0] <= target_limit)

    def kept(places, counts):  # the non-empty pairs' ids and places; with "skip", those that fit
        ds = _without_empty_pairs(places, counts)
        ds = ds.batch(_TOKENIZE_CHUNK).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.unbatch()
        if long_pairs == "skip":
            ds = ds.filter(fits if counts is None else
                           lambda *pair: counts.counted(fits(*pair), "too_long"))  # fmt: skip
        return ds

    # The look for a pair left counts nothing: the counts are of what training reads.
    # In-memory pairs become tensors once, here: made inside a pass's traced function, they
    # would be a constant copied into it.
    texts = pairs if isinstance(pairs, ParallelCorpus) else _pair_tensors(pairs)
    position = epoch if isinstance(epoch, DataPosition) else None
    if position is not None:
        epoch = position.epoch
    placed = _pair_lines(texts, shuffle, shuffle_buffer, seed, epoch, part).enumerate()
    _require_a_pair(kept(placed.map(lambda place, pair: (place, *pair)), None), pairs,
                    long_pairs, max_length, target_limit)  # fmt: skip

    def examples(places, *where):  # its draws a function of the epoch and its place alone
        def example(place, src, tgt):
            return objective.example(src, tgt, draw_seed(seed, *where, place))

        return kept(places, counts).map(example, num_parallel_calls=tf.data.AUTOTUNE)

    def length(features, labels):  # the example's longest sequence
        sequences = [t for t in tf.nest.flatten((features, labels)) if t.shape.rank == 1]
        return tf.reduce_max([tf.shape(t)[0] for t in sequences])

    def batched(ds):
        # Every sequence is padded with PAD_ID, to its batch's longest (or its bucket's bound).
        padding = tf.nest.map_structure(lambda spec: tf.constant(PAD_ID, spec.dtype),
                                        ds.element_spec)  # fmt: skip
        # Bucket i takes lengths in (upper[i-1], upper[i]]; the extra last bucket (over
        # max_length) stays empty, since truncation bounds every length by max_length.
        ds = ds.bucket_by_sequence_length(
            element_length_func=length,
            bucket_boundaries=[u + 1 for u in upper],
            bucket_batch_sizes=batch_sizes + [1],
            padding_values=padding,
            pad_to_bucket_boundary=pad_to_bucket,
            drop_remainder=drop_remainder,
        )
        return equal_shares(ds, batch_multiple)

    if position is not None and shuffle:
        # Bucketed window by window (a window ends with its buckets' partial batches), so that
        # a resumed run makes no window before the one it stops in (resumable_pass).
        window_size = shuffle_buffer or SHUFFLE_BUFFER

        def windows(value, start):
            if isinstance(texts, ParallelCorpus):
                return texts.windows(seed, value, start, window_size, part)
            return _memory_windows(texts, seed, value, start, window_size, part)

        def window_batches(value, index, window):
            places = tf.data.Dataset.from_tensor_slices(window).enumerate()
            places = places.map(lambda place, pair: (place, *pair))
            return batched(examples(places, value, part_index, index))

        return prefetched(resumable_pass(position, windows, window_batches))

    def one_pass(value):  # value: the epoch, read as the pass begins (None: no epoch given)
        lines = _pair_lines(texts, shuffle, shuffle_buffer, seed, value, part).enumerate()
        return examples(lines.map(lambda place, pair: (place, *pair)),
                        0 if value is None else value, part_index)  # fmt: skip

    return prefetched(batched(one_pass(None) if epoch is None else per_pass(epoch, one_pass)))


def equal_shares(ds, batch_multiple):
    """``ds``'s batches cut to a multiple of ``batch_multiple`` examples, the empty ones dropped.

    A bucket's last batch is partial: split across replicas, a batch of 1 leaves a replica
    nothing, and its gradients (of shape 0 on the batch axis) cannot be summed with the others.
    Cutting loses fewer than ``batch_multiple`` examples per bucket per epoch, each epoch others.
    """
    if batch_multiple == 1:
        return ds

    def cut(features, labels):
        whole = tf.shape(tf.nest.flatten(features)[0])[0] // batch_multiple * batch_multiple
        return tf.nest.map_structure(lambda t: t[:whole], (features, labels))

    return ds.map(cut).filter(lambda features, _: tf.shape(tf.nest.flatten(features)[0])[0] > 0)


def prefetched(ds):
    """``ds`` prefetching two batches, with tf.data's autotuning off.

    Autotuning runs a thread per iterator (``tf_data_model``), and an iterator's destructor
    waits for it, for a long and random time, whenever Python's garbage collector frees one
    (Keras leaves each ``fit``'s iterators in reference cycles). Our
    pipelines read from memory and feed a model that costs far more per batch, so a fixed
    prefetch and the parallel maps' default parallelism lose nothing.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(2).with_options(options)


def _pair_lines(pairs, shuffle, shuffle_buffer, seed, epoch, part=None):
    """The ``(source, target)`` strings of an epoch (of its ``part``): a corpus's streamed
    from its files, or in-memory pairs' (``pairs``: :func:`_pair_tensors`)."""
    if part is not None and shuffle and seed is None:
        raise ValueError("A part of an epoch needs a seed: every part must draw one order.")
    if isinstance(pairs, ParallelCorpus):
        return pairs.lines(seed=seed, epoch=epoch, shuffle=shuffle,
                           shuffle_buffer=shuffle_buffer or SHUFFLE_BUFFER, part=part)  # fmt: skip
    # In memory, the pairs are shuffled whole: a shuffle window is a corpus's bound on memory.
    ds = (epoch_shuffled(pairs, seed, epoch) if shuffle
          else tf.data.Dataset.from_tensor_slices(pairs))  # fmt: skip
    # Every part draws the same order (the seed's), and keeps its every count-th pair.
    return ds if part is None else ds.shard(part[1], part[0])


def _memory_windows(pairs, seed, epoch, start, size, part):
    """In-memory pairs (:func:`_pair_tensors`) as :meth:`ParallelCorpus.windows` gives a
    corpus's: the epoch's order (:func:`~zoo.data.epoch_shuffled`'s, drawn from ``seed`` and
    ``epoch``) cut into windows of ``size`` pairs, from window ``start`` on; with ``part``,
    every ``count``-th pair of the order from ``index``."""
    total = int(pairs[0].shape[0])
    if part is not None:  # whole strides in a window: the parts are those of the whole order
        size = -(-size // part[1]) * part[1]
    order = tf.stack([tf.constant(seed or 0, tf.int64), tf.cast(epoch, tf.int64)])

    def window(index):
        places = tf.range(index * size, tf.minimum((index + 1) * size, total))
        if total > 1:
            places = tf.random.experimental.index_shuffle(places, order, max_index=total - 1)
        if part is not None:
            places = places[part[0] :: part[1]]
        return index, tuple(tf.gather(t, places) for t in pairs)

    return tf.data.Dataset.range(tf.cast(start, tf.int64), -(-total // size)).map(window)


def _without_empty_pairs(ds, counts):
    """``ds`` (``(place, source, target)``) without the pairs of which a side is empty or
    whitespace (counted)."""

    def keep(place, src, tgt):
        full = tf.logical_and(tf.strings.length(tf.strings.strip(src)) > 0,
                              tf.strings.length(tf.strings.strip(tgt)) > 0)  # fmt: skip
        if counts is None:
            return full
        return counts.counted(counts.counted(full), "empty")

    return ds.filter(keep)


def _require_a_pair(ds, pairs, long_pairs, max_length, target_limit):
    """Refuse, before training, a dataset in which no pair is left (a quick look: it stops at
    the first pair kept, which is at once in any usable corpus)."""
    for _ in ds.take(1):
        return
    what = pairs if isinstance(pairs, ParallelCorpus) else f"the {len(pairs)} pairs"
    limits = (f" and within max_length ({max_length} source tokens, {target_limit} target "
              "tokens: --max-length)" if long_pairs == "skip" else "")  # fmt: skip
    raise ValueError(f"{what}: no pair is left to train on; none is non-empty on both "
                     f"sides{limits}")


def _pair_tensors(pairs):
    """Check ``pairs``: two string tensors, the sources and the targets."""
    sources, targets = _split_pairs(pairs)
    return tf.constant(sources, tf.string), tf.constant(targets, tf.string)


def _split_pairs(pairs):
    """Check ``pairs`` and split it into a list of sources and a list of targets."""
    sources, targets = [], []
    for index, pair in enumerate(pairs):
        is_pair = isinstance(pair, (tuple, list)) and len(pair) == 2
        if not (is_pair and all(isinstance(s, str) for s in pair)):
            raise ValueError(
                f"pairs[{index}] is not a (source, target) pair of strings: {pair!r:.80}"
            )
        sources.append(pair[0])
        targets.append(pair[1])
    if not sources:
        raise ValueError("pairs is empty; the dataset needs at least one (source, target) pair.")
    return sources, targets
