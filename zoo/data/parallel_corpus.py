"""A parallel corpus in files: line-aligned source and target files of any size, streamed.

:class:`ParallelCorpus` scans every file once before training, so that a bad file is a one-line
error naming the file and the line, and fingerprints the files so that a workdir resumes on the
same files at another path. :meth:`ParallelCorpus.lines` streams the pairs (shards cut into
pieces read in a drawn order, then shuffled in bounded windows by a stateless permutation), so
that each epoch's order depends on the seed and the epoch alone and a resumed run sees what the
interrupted one saw. After OpenNMT-tf's ``training_pipeline``.
"""

import dataclasses
import itertools
import os
import random

import tensorflow as tf

from zoo.data.epoch_order import per_pass
from zoo.data.file_scan import GZIP_MAGIC, UTF8_BOM, FileRecord, matching_files, scan_file

__all__ = [
    "DATA_ERROR",
    "SHUFFLE_BUFFER",
    "CorpusFiles",
    "FileRecord",
    "ParallelCorpus",
    "data_error",
    "fingerprint_change",
    "scan_file",
]

SHUFFLE_BUFFER = 100_000  # pairs in a shuffle window (about 20 MB of text at Multi30k's lengths)
CYCLE = 4  # pieces read at once: each window mixes lines of this many places in the corpus
DATA_ERROR = "zoo data error: "  # how a pipeline's assertion says it is one of ours


@dataclasses.dataclass(frozen=True)
class CorpusFiles:
    """One corpus: its source and target files (paths or globs of shards), and its weight in
    a mix of several (None: every corpus once per epoch)."""

    source: str
    target: str
    weight: float | None = None


class ParallelCorpus:
    """Line-aligned source and target files, scanned once and streamed by ``tf.data``.

    Args:
        corpora: :class:`CorpusFiles`, or ``(source, target)`` / ``(source, target, weight)``
            tuples: one per corpus. A glob's matches, sorted, pair with its twin's.
        flag: how the error messages name the corpora (the command line's ``--train``).

    Raises:
        FileNotFoundError: a file that does not exist, a glob that matches nothing.
        ValueError: twins whose line counts differ (both files and both counts named), a
            glob whose twin matches another number of files, invalid UTF-8 (the file and the
            line), a corrupt gzip file, weights given to some corpora and not others, or a
            weight that is not positive.

    Example:
        >>> import pathlib, tempfile
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "a.en").write_text("A dog.\\nA cat.\\n", encoding="utf-8")
        >>> _ = (d / "a.de").write_text("Ein Hund.\\nEine Katze.\\n", encoding="utf-8")
        >>> corpus = ParallelCorpus([(d / "a.en", d / "a.de")])
        >>> corpus.num_pairs
        2
        >>> sorted(s.numpy().decode() for s, _ in corpus.lines(shuffle=False))
        ['A cat.', 'A dog.']
    """

    def __init__(self, corpora, flag="--train"):
        self.flag = flag
        self.corpora = [c if isinstance(c, CorpusFiles) else CorpusFiles(*map(_plain, c))
                        for c in corpora]  # fmt: skip
        if not self.corpora:
            raise ValueError(f"{flag}: no corpus given")
        weights = [c.weight for c in self.corpora]
        if any(w is None for w in weights) and any(w is not None for w in weights):
            raise ValueError(f"{flag}: give a weight to every corpus or to none")
        for c in self.corpora:
            if c.weight is not None and not (c.weight > 0 and c.weight < float("inf")):
                raise ValueError(f"{flag} {c.source} {c.target} {c.weight}: a weight must be "
                                 "a positive number")  # fmt: skip
        self.weighted = weights[0] is not None
        self.shards = []  # (corpus index, source record, target record)
        for index, corpus in enumerate(self.corpora):
            sources = matching_files(corpus.source, flag)
            targets = matching_files(corpus.target, flag)
            if len(sources) != len(targets):
                raise ValueError(
                    f"{flag} {corpus.source} {corpus.target}: {len(sources)} files match the "
                    f"source and {len(targets)} the target; each shard needs its twin"
                )
            for source, target in zip(sources, targets):
                pair = scan_file(source), scan_file(target)
                if pair[0].lines != pair[1].lines:
                    raise ValueError(
                        f"{flag}: the files are not line-aligned: {source} has {pair[0].lines} "
                        f"lines but {target} has {pair[1].lines}"
                    )
                self.shards.append((index, *pair))
        self.corpus_pairs = [sum(s.lines for i, s, _ in self.shards if i == index)
                             for index in range(len(self.corpora))]  # fmt: skip
        for corpus, pairs in zip(self.corpora, self.corpus_pairs):
            if not pairs:
                raise ValueError(f"{flag} {corpus.source} {corpus.target}: the files are empty")

    @property
    def num_pairs(self):
        """The lines of every corpus: the pairs of an epoch (empty lines included)."""
        return sum(self.corpus_pairs)

    @property
    def files(self):
        """Every file, source and target of each shard in turn."""
        return [record for _, *pair in self.shards for record in pair]

    def __repr__(self):
        return f"<ParallelCorpus of {len(self.shards)} shard(s), {self.num_pairs} pairs>"

    def __str__(self):
        """How a message names the corpus: its flag and files, and its size."""
        files = "; ".join(f"{c.source} {c.target}" for c in self.corpora)
        return f"{self.flag} {files} ({self.num_pairs} pairs)"

    def fingerprint(self):
        """The files by name, size, SHA-256 and lines, and the weights: JSON, free of paths,
        so that it means the same on another machine (:func:`fingerprint_change`)."""
        return {"corpora": [
            {"weight": corpus.weight,
             "shards": [[s.identity(), t.identity()] for i, s, t in self.shards if i == index]}
            for index, corpus in enumerate(self.corpora)
        ]}  # fmt: skip

    # ------------------------------------------------------------ reading
    def read_pairs(self, limit=None):
        """The pairs in file order, as Python strings (for small corpora: validation)."""
        return list(itertools.islice(self.iter_pairs(), limit))

    def iter_pairs(self):
        """The pairs in file order, as Python strings, streamed."""
        for _, source, target in self.shards:
            yield from zip(_text_lines(source.path), _text_lines(target.path))

    def sample_sentences(self, size, seed=0):
        """A uniform random sample of at most ``size`` sentences, both sides of ``size // 2``
        pairs (every pair when the corpus has no more), drawn in one streaming pass: the
        pairs' indices are drawn first (the line counts are known), then the files read once.
        """
        total = self.num_pairs
        wanted = max(1, size // 2)
        chosen = range(total) if wanted >= total else sorted(
            random.Random(seed).sample(range(total), wanted))  # fmt: skip
        sentences, it = [], iter(chosen)
        target = next(it, None)
        for index, pair in enumerate(self.iter_pairs()):
            if target is None:
                break
            if index == target:
                sentences.extend(pair)
                target = next(it, None)
        return sentences

    def lines(self, seed=0, epoch=None, shuffle=True, shuffle_buffer=SHUFFLE_BUFFER,
              part=None):
        """The ``tf.data`` stream of one epoch's ``(source, target)`` string pairs: with
        ``shuffle``, its :meth:`windows`' pairs one after the other.

        Args:
            seed: with ``epoch``, it fixes each epoch's order.
            epoch: an int64 ``tf.Variable`` (:attr:`zoo.data.DataPosition.epoch`), read as
                each pass begins; None: epoch 0's order every pass.
            shuffle: False reads the files in order (validation, counting).
            shuffle_buffer: the pairs of a shuffle window.
            part: ``(index, count)``: only part ``index`` of ``count`` disjoint parts that
                together are the epoch (a worker's of a cluster; :meth:`part_of`).
        """
        self._check(shuffle_buffer, part)
        if not shuffle:
            return self._read(*self.part_of(list(range(len(self.shards))), part), None,
                              1 << 62, False)  # fmt: skip

        def one_epoch(value):
            return self.windows(seed, value, 0, shuffle_buffer, part).flat_map(
                lambda index, pairs: tf.data.Dataset.from_tensor_slices(pairs))

        if epoch is None:
            return one_epoch(tf.constant(0, tf.int64))
        return per_pass(epoch, one_epoch)

    def windows(self, seed, epoch, start=0, shuffle_buffer=SHUFFLE_BUFFER, part=None):
        """One epoch's pairs in shuffle windows, from window ``start`` on: a ``tf.data``
        stream of ``(index, (sources, targets))``, the pairs of window ``index`` in an order
        drawn from ``seed``, ``epoch`` and ``index`` (int64 scalars) alone.

        Unweighted, the corpus is cut into pieces of ``shuffle_buffer / CYCLE`` lines, put in
        an order drawn from the seed and the epoch; a window is ``CYCLE`` pieces of it (places
        far apart in the corpus), so the windows before ``start`` are skipped without reading
        a line. Weighted corpora are mixed by drawing each pair's corpus by its weight (each
        corpus read over and over, in a new order each time), an epoch as many pairs as the
        corpora hold together (with ``part``, as many as the part's shards hold); a window is
        ``shuffle_buffer`` pairs of the mix, and the mix is read up to ``start``'s.
        """
        self._check(shuffle_buffer, part)
        base = tf.constant(seed or 0, tf.int64)
        start = tf.cast(start, tf.int64)
        epoch = tf.cast(epoch, tf.int64)
        if self.weighted:
            mixed = self._mix(base, epoch, shuffle_buffer, part).batch(shuffle_buffer)
            windows = mixed.enumerate().skip(start)
        else:
            windows = self._windows(*self.part_of(list(range(len(self.shards))), part),
                                    tf.stack([base, epoch]), shuffle_buffer, start)  # fmt: skip
        order = tf.stack([base + 1, epoch])

        def shuffled(index, pairs):
            n = tf.shape(pairs[0], out_type=tf.int64)[0]
            drawn = tf.random.experimental.index_shuffle(
                tf.range(n), tf.random.experimental.stateless_fold_in(order, index),
                max_index=tf.maximum(n - 1, 0))  # fmt: skip
            return index, tf.nest.map_structure(lambda t: tf.gather(t, drawn), pairs)

        return windows.map(shuffled)

    def _check(self, shuffle_buffer, part):
        if not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
            raise ValueError(f"shuffle_buffer must be a positive int, got {shuffle_buffer!r}.")
        if part is not None and not (0 <= part[0] < part[1]):
            raise ValueError(f"part must be (index, count) with 0 <= index < count, got {part}.")

    def part_of(self, shards, part):
        """What part ``(index, count)`` of ``shards`` reads: ``(shards, lines)``. By file when
        there are at least ``count`` shards (every ``count``-th shard from ``index``: each
        file is read by one part alone), else by line (every ``count``-th line of the shards'
        common order: each part reads every line, and tokenizes only its own)."""
        if part is None:
            return shards, None
        index, count = part
        if len(shards) >= count:
            return shards[index::count], None
        return shards, part

    def part_pairs(self, shards, part):
        """The pairs that part ``part`` of ``shards`` holds (:meth:`part_of`)."""
        shards, lines = self.part_of(shards, part)
        total = sum(self.shards[k][1].lines for k in shards)
        return total if lines is None else len(range(lines[0], total, lines[1]))

    def _mix(self, base, value, shuffle_buffer, part=None):
        """Each corpus repeated, a new order each time; pairs drawn by the weights."""
        streams, pairs = [], 0
        for index in range(len(self.corpora)):
            shards = [k for k, (i, _, _) in enumerate(self.shards) if i == index]
            pairs += self.part_pairs(shards, part)

            def repetition(r, read=self.part_of(shards, part), index=index):
                seed = tf.random.experimental.stateless_fold_in(
                    tf.stack([base + 2 + index, value]), r)
                return self._read(*read, seed, shuffle_buffer, True)

            streams.append(tf.data.Dataset.range(1 << 62).flat_map(repetition))
        weights = [c.weight for c in self.corpora]
        logits = tf.math.log(tf.constant([weights], tf.float32) / sum(weights))

        def draw(i):
            seed = tf.random.experimental.stateless_fold_in(tf.stack([base + 1_000, value]), i)
            return tf.cast(tf.random.stateless_categorical(logits, 1, seed)[0, 0], tf.int64)

        choices = tf.data.Dataset.range(pairs).map(draw)
        return tf.data.Dataset.choose_from_datasets(streams, choices)

    def _read(self, shards, lines, seed, piece_lines, shuffled):
        """The lines of ``shards``, cut into pieces of ``piece_lines``; with ``shuffled``, the
        pieces in an order drawn from ``seed`` and read ``CYCLE`` at a time, interleaved.
        With ``lines`` (``(index, count)``), every ``count``-th line of them from ``index``."""
        count, piece_at = self._pieces(shards, piece_lines, seed if shuffled else None)
        cycle = min(CYCLE, count) if shuffled else 1
        stream = tf.data.Dataset.range(count).interleave(
            piece_at, cycle_length=cycle, block_length=1, num_parallel_calls=cycle,
            deterministic=True)  # fmt: skip
        return stream if lines is None else stream.shard(lines[1], lines[0])

    def _windows(self, shards, lines, seed, shuffle_buffer, start):
        """``(index, (sources, targets))`` of each window from ``start`` on: ``CYCLE``
        pieces of ``shuffle_buffer / CYCLE`` lines in an order drawn from ``seed``, read
        side by side (with ``lines``, every ``count``-th line of theirs from ``index``). A
        window with no line of the part is left out."""
        count, piece_at = self._pieces(shards, max(1, -(-shuffle_buffer // CYCLE)), seed)

        def window(index):
            places = tf.data.Dataset.range(index * CYCLE, tf.minimum((index + 1) * CYCLE, count))
            stream = places.interleave(piece_at, cycle_length=CYCLE, block_length=1,
                                       num_parallel_calls=CYCLE, deterministic=True)  # fmt: skip
            if lines is not None:
                stream = stream.shard(lines[1], lines[0])
            return stream.batch(shuffle_buffer + CYCLE).map(lambda s, t: (index, (s, t)))

        return tf.data.Dataset.range(start, -(-count // CYCLE)).flat_map(window)

    def _pieces(self, shards, piece_lines, seed=None):
        """``(count, piece_at)``: ``shards`` cut into ``count`` pieces of ``piece_lines``
        lines; ``piece_at(place)`` is the dataset of the piece at that place of their order,
        drawn from ``seed`` (None: the files' order)."""
        pieces = [(k, start, min(piece_lines, self.shards[k][1].lines - start))
                  for k in shards for start in range(0, self.shards[k][1].lines, piece_lines)]
        starts = tf.constant([start for _, start, _ in pieces], tf.int64)
        counts = tf.constant([count for _, _, count in pieces], tf.int64)
        sources = tf.constant([self.shards[k][1].path for k, _, _ in pieces])
        targets = tf.constant([self.shards[k][2].path for k, _, _ in pieces])
        gzipped = tf.constant([self.shards[k][1].gzipped for k, _, _ in pieces])
        target_gzipped = tf.constant([self.shards[k][2].gzipped for k, _, _ in pieces])
        total = len(pieces)

        def piece_at(place):
            i = place
            if seed is not None and total > 1:
                i = tf.random.experimental.index_shuffle(place, seed, max_index=total - 1)
            return _read_piece(sources[i], targets[i], gzipped[i], target_gzipped[i],
                               starts[i], counts[i])  # fmt: skip

        return total, piece_at


def _plain(value):
    return value if isinstance(value, (int, float)) or value is None else os.fspath(value)


def _text_lines(path):
    """A scanned file's lines as ``str``, streamed, split on ``\\n`` only (as tf.data splits),
    without ``\\r`` endings or a byte-order mark."""
    import gzip

    with open(path, "rb") as raw:
        gzipped = raw.read(2) == GZIP_MAGIC
    with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
        for number, line in enumerate(f):
            if number == 0 and line.startswith(UTF8_BOM):
                line = line[3:]
            yield line.rstrip(b"\n").removesuffix(b"\r").decode("utf-8")


def _read_piece(source, target, source_gzipped, target_gzipped, start, count):
    """Lines ``start .. start + count`` of two twin files, checked to be all there."""

    def lines(path, is_gzipped):
        return tf.data.TextLineDataset(path, compression_type=tf.where(is_gzipped, "GZIP", ""))

    pairs = tf.data.Dataset.zip(lines(source, source_gzipped), lines(target, target_gzipped))
    pairs = pairs.skip(start).take(count).map(lambda s, t: (s, t, False))
    end = tf.data.Dataset.from_tensors((tf.constant(""), tf.constant(""), True))

    def checked(index, element):
        s, t, is_end = element
        complete = tf.logical_or(tf.logical_not(is_end), tf.equal(index, count))
        message = tf.strings.join([
            DATA_ERROR, source, " and ", target, ": lines ", tf.strings.as_string(start + index + 1),
            " on are missing (the files were scanned with more; a gzip file truncated or "
            "replaced since?); fix or restore the files, then rerun the same command to resume",
        ])  # fmt: skip
        with tf.control_dependencies([tf.debugging.Assert(complete, [message])]):
            return tf.identity(s), tf.identity(t), is_end

    stream = pairs.concatenate(end).enumerate().map(checked)
    stream = stream.filter(lambda s, t, is_end: tf.logical_not(is_end))
    return stream.map(lambda s, t, _: (_strip_bom(s), _strip_bom(t)))


def _strip_bom(line):
    return tf.strings.regex_replace(line, "^\ufeff", "")


def data_error(error):
    """The one-line message of a pipeline's :data:`DATA_ERROR` inside a TensorFlow error, or
    None for any other error."""
    text = str(error)
    if DATA_ERROR not in text:
        return None
    message = text.split(DATA_ERROR, 1)[1]
    for end in ("\n", "]", "\t"):
        message = message.split(end, 1)[0]
    return message.strip().strip("'\"")


def fingerprint_change(saved, now, where):
    """What differs between a recorded fingerprint and the data given now, in one line; None
    when they are the same files (at any paths)."""
    if saved == now:
        return None
    given = {"corpora": now["corpora"]}
    if len(saved.get("corpora", ())) != len(given["corpora"]):
        return (f"{where}: the run started on {len(saved.get('corpora', ()))} corpora, and "
                f"{len(given['corpora'])} are given now")  # fmt: skip
    for number, (old, new) in enumerate(zip(saved["corpora"], given["corpora"]), start=1):
        if old.get("weight") != new.get("weight"):
            return (f"{where}: corpus {number}'s weight was {old.get('weight')}, now "
                    f"{new.get('weight')}")  # fmt: skip
        if len(old["shards"]) != len(new["shards"]):
            return (f"{where}: corpus {number} had {len(old['shards'])} shard(s), now "
                    f"{len(new['shards'])}")  # fmt: skip
        for old_pair, new_pair in zip(old["shards"], new["shards"]):
            for was, is_now in zip(old_pair, new_pair):
                if {k: was[k] for k in ("size", "sha256")} != {
                    k: is_now[k] for k in ("size", "sha256")
                }:
                    return (
                        f"{where}: {is_now['name']} is not the file this run started on "
                        f"({was['name']}, {was['size']} bytes, sha256 {was['sha256'][:12]}...; "
                        f"now {is_now['size']} bytes, sha256 {is_now['sha256'][:12]}...): use "
                        "the same files to resume, or a new --workdir"
                    )
    return None
