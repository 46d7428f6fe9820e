"""A CoNLL-U reader for part-of-speech tagging, and the bundled UD English-EWT treebank.

UD English-EWT r2.16 ships in ``zoo/data/ud_english_ewt/`` (CC BY-SA 4.0; licence and
attribution there), so :func:`load_ud_english_ewt` works offline. :func:`read_conllu` reads any
CoNLL-U file, plain or gzipped (https://universaldependencies.org/format.html).
"""

import dataclasses
import gzip
import importlib.resources
import io
import os
import re
import zlib

from zoo.data.file_scan import GZIP_MAGIC

__all__ = [
    "COLUMNS",
    "ConlluSentence",
    "UD_ENGLISH_EWT_SIZES",
    "UD_ENGLISH_EWT_SPLITS",
    "UPOS_TAGS",
    "Sentence",
    "iter_conllu",
    "load_ud_english_ewt",
    "read_conllu",
]

# The 17 Universal POS tags of UD v2, in alphabetical order; a tag's position is its stable id.
UPOS_TAGS = (
    "ADJ",
    "ADP",
    "ADV",
    "AUX",
    "CCONJ",
    "DET",
    "INTJ",
    "NOUN",
    "NUM",
    "PART",
    "PRON",
    "PROPN",
    "PUNCT",
    "SCONJ",
    "SYM",
    "VERB",
    "X",
)
_UPOS_SET = frozenset(UPOS_TAGS)

# Split name -> its bundled file in ``zoo/data/ud_english_ewt/``.
UD_ENGLISH_EWT_SPLITS = {
    "train": "en_ewt-ud-train.conllu.gz",
    "dev": "en_ewt-ud-dev.conllu.gz",
    "test": "en_ewt-ud-test.conllu.gz",
}
# Split name -> (sentences, words) of the r2.16 release; words exclude multiword-token lines and
# empty nodes. The loader checks the bundled copy against these.
UD_ENGLISH_EWT_SIZES = {
    "train": (12_544, 204_577),
    "dev": (2_001, 25_147),
    "test": (2_077, 25_094),
}

_NUM_FIELDS = 10
_WORD_ID = re.compile(r"[1-9][0-9]*")
_MULTIWORD_ID = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_EMPTY_NODE_ID = re.compile(r"(0|[1-9][0-9]*)\.[1-9][0-9]*")
_SENT_ID = re.compile(r"#\s*sent_id\s*=\s*(.*)")


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One CoNLL-U sentence, reduced to its words and their part-of-speech tags.

    Args:
        words: the FORM of each word (syntactic word, ids ``1..n``), in order. The surface tokens
            of multiword tokens (``don't`` over ``do`` + ``n't``) and empty nodes are not included.
        upos: the Universal POS tag of each word, one of :data:`UPOS_TAGS`.
        xpos: the language-specific tag of each word (the Penn Treebank tag for English), exactly
            as written; ``"_"`` where the file has none.
        sent_id: the value of the sentence's ``# sent_id = ...`` comment, or ``None``.
        lemmas: the LEMMA of each word, as written; ``"_"`` for each word by default.
        feats: the FEATS of each word (``"Number=Sing|Person=3"``), as written; ``"_"`` (no
            features) for each word by default.

    Example:
        >>> s = Sentence(words=("Hi", "!"), upos=("INTJ", "PUNCT"), xpos=("UH", "."), sent_id="1")
        >>> list(zip(s.words, s.upos))
        [('Hi', 'INTJ'), ('!', 'PUNCT')]
    """

    words: tuple[str, ...]
    upos: tuple[str, ...]
    xpos: tuple[str, ...]
    sent_id: str | None = None
    lemmas: tuple[str, ...] | None = None
    feats: tuple[str, ...] | None = None

    def __post_init__(self):
        for name in ("lemmas", "feats"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, ("_",) * len(self.words))
        lengths = [len(getattr(self, name)) for name in ("words", "upos", "xpos", "lemmas", "feats")]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"Sentence {self.sent_id!r}: words, upos, xpos, lemmas and feats have different "
                f"lengths {tuple(lengths)}."
            )


# The ten columns of a word line, in order.
COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")


@dataclasses.dataclass(frozen=True)
class ConlluSentence:
    """One sentence of a CoNLL-U file exactly as it was written, for a tool that fills some
    columns and writes the rest back byte for byte (:func:`iter_conllu`).

    Args:
        lines: every line of the sentence, comments, multiword tokens and empty nodes
            included, each with its own line ending (``"\\n"``, ``"\\r\\n"``, or none at the
            end of a file without a final newline); a UTF-8 byte-order mark stays on the
            file's first line.
        after: the blank lines that follow the sentence, as written (usually ``"\\n"``).
        before: the blank lines before it (only the first sentence of a file can have them).
        word_lines: the positions in ``lines`` of the word lines (integer ids ``1..n``).
        line_number: the line of the file where the sentence starts.
        sent_id: the value of its ``# sent_id = ...`` comment, or None.
    """

    lines: tuple[str, ...]
    after: str
    word_lines: tuple[int, ...]
    line_number: int
    sent_id: str | None = None
    before: str = ""

    def column(self, name):
        """The values of column ``name`` (one of :data:`COLUMNS`) of the words, in order."""
        index = COLUMNS.index(name)
        return tuple(_fields(self.lines[i])[index] for i in self.word_lines)

    @property
    def words(self):
        return self.column("FORM")

    def filled(self, **columns):
        """This sentence with the given columns of its word lines replaced (``UPOS=(...)``,
        one value per word); every other byte stays as it was."""
        indexes = {COLUMNS.index(name): values for name, values in columns.items()}
        for name, values in columns.items():
            if len(values) != len(self.word_lines):
                raise ValueError(f"{len(values)} values of {name} for {len(self.word_lines)} "
                                 "words")  # fmt: skip
        lines = list(self.lines)
        for word, i in enumerate(self.word_lines):
            line = lines[i]
            ending = line[len(line.rstrip("\r\n")):]
            fields = line[: len(line) - len(ending)].split("\t")
            for index, values in indexes.items():
                fields[index] = values[word]
            lines[i] = "\t".join(fields) + ending
        return dataclasses.replace(self, lines=tuple(lines))

    def text(self):
        """The sentence as written: its lines and the blank lines after it."""
        return self.before + "".join(self.lines) + self.after

    def tagged(self):
        """The :class:`Sentence` of its forms and tags."""
        return Sentence(self.words, self.column("UPOS"), self.column("XPOS"), self.sent_id,
                        lemmas=self.column("LEMMA"), feats=self.column("FEATS"))


def _fields(line):
    return line.rstrip("\r\n").removeprefix("\ufeff").split("\t")


def _decoded_lines(stream, name):
    """``(number, line)`` of a buffered binary stream, plain or gzipped, each line decoded with its
    ending; invalid UTF-8 and a corrupt gzip are named."""
    if stream.peek(2)[:2] == GZIP_MAGIC:
        stream = gzip.GzipFile(fileobj=stream)
    try:
        for number, raw in enumerate(stream, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{name}, line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at byte "
                    f"column {e.start + 1}: {e.reason})"
                ) from e
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{name}: not a readable gzip file ({e}).") from e


def iter_conllu(source, name=None, require_upos=True):
    """Stream the sentences of a CoNLL-U file, plain or gzipped UTF-8, as
    :class:`ConlluSentence`: bounded memory, every byte kept.

    Args:
        source: a path, or a binary file object (``sys.stdin.buffer``).
        name: what the messages call the file (default: the path, or ``"<stdin>"``).
        require_upos: False admits a UPOS of ``_`` (a file to be tagged).

    Raises:
        ValueError: a malformed file, as :func:`read_conllu` says.
    """
    if isinstance(source, (str, os.PathLike)):
        name = name or os.fspath(source)
        with open(source, "rb") as stream:
            yield from iter_conllu(stream, name, require_upos)
        return
    name = name or "<stdin>"
    if not hasattr(source, "peek"):
        source = io.BufferedReader(source)
    parser = _Parser(name, require_upos)
    for number, line in _decoded_lines(source, name):
        yield from parser.feed(number, line)
    yield from parser.finish(parser.number + 1)


class _Parser:
    """The sentences of a file's lines, checked as they come (see :func:`read_conllu`)."""

    def __init__(self, name, require_upos):
        self.name, self.require_upos, self.number = name, require_upos, 0
        self.lines, self.word_lines, self.after = [], [], ""
        self.sent_id, self.first_line, self.leading, self.end_line = None, None, "", None

    def fail(self, number, reason):
        raise ValueError(f"{self.name}, line {number}: {reason}.")

    def feed(self, number, line):
        self.number = number
        content = line.rstrip("\r\n")
        if number == 1:
            content = content.removeprefix("\ufeff")
        if not content:  # a blank line: it ends the sentence, and follows it as written
            if self.first_line is None:
                self.leading += line
            else:
                self.end_line = self.end_line or number
                self.after += line
            return
        if self.after:
            yield self._close(number)
        if self.first_line is None:
            self.first_line = number
        self._check(number, content)
        self.lines.append(line)

    def finish(self, number):
        if self.first_line is not None:
            yield self._close(number)

    def _close(self, number):
        end = self.end_line or number  # its first blank line, or the end of the file
        if not self.word_lines:
            self.fail(self.first_line, "the sentence starting here has no word lines (no line "
                      f"with an integer id before its end at line {end})")  # fmt: skip
        sentence = ConlluSentence(tuple(self.lines), self.after, tuple(self.word_lines),
                                  self.first_line, self.sent_id, self.leading)  # fmt: skip
        self.lines, self.word_lines, self.after, self.leading = [], [], "", ""
        self.sent_id, self.first_line, self.end_line = None, None, None
        return sentence

    def _check(self, number, line):
        if line.startswith("#"):
            match = _SENT_ID.fullmatch(line)
            if match:
                self.sent_id = match.group(1).strip()
            return
        if not line.strip():
            self.fail(number, "a line of only whitespace; a sentence break must be an empty line")
        fields = line.split("\t")
        if len(fields) != _NUM_FIELDS:
            self.fail(number, f"expected {_NUM_FIELDS} tab-separated fields, found {len(fields)}")
        token_id, form, _, tag = fields[:4]
        if _WORD_ID.fullmatch(token_id) is None:
            multiword = _MULTIWORD_ID.fullmatch(token_id)
            if multiword is not None:
                start, end = (int(i) for i in multiword.groups())
                if start >= end:
                    self.fail(number, f"multiword-token range {token_id!r} does not run upwards")
                return
            if _EMPTY_NODE_ID.fullmatch(token_id) is not None:
                return
            self.fail(number, f"id {token_id!r} is not a positive integer (nor a multiword-token "
                      "range like '8-9' nor an empty node like '8.1')")  # fmt: skip
        expected = len(self.word_lines) + 1
        if int(token_id) != expected:
            hint = " (is the blank line between two sentences missing?)" if token_id == "1" else ""
            self.fail(number, f"word id {token_id} where {expected} was expected; word ids must "
                      f"run 1, 2, ..., n within a sentence{hint}")  # fmt: skip
        if not form.strip():
            self.fail(number, f"empty FORM for word {token_id}")
        if tag not in _UPOS_SET and (self.require_upos or tag != "_"):
            self.fail(number, f"UPOS {tag!r} of word {token_id} is not one of the 17 UD tags "
                      f"({', '.join(UPOS_TAGS)})")  # fmt: skip
        self.word_lines.append(len(self.lines))


def read_conllu(path):
    """Read a CoNLL-U file, plain or gzipped UTF-8, as a list of :class:`Sentence`.

    Gzip is recognised by its magic bytes; a UTF-8 byte-order mark and ``"\\r\\n"`` endings are
    accepted. Sentences are separated by blank lines (the last kept without one). Comments are
    skipped but ``# sent_id = ...`` (:attr:`Sentence.sent_id`); multiword-token (``8-9``) and
    empty-node (``8.1``) lines carry no word-level tag and are skipped. FORM, UPOS, XPOS, LEMMA
    and FEATS are kept. :func:`iter_conllu` streams the same sentences with every byte of them.

    Args:
        path: path of the file (``str`` or ``os.PathLike``).

    Returns:
        A list of :class:`Sentence`, in file order.

    Raises:
        ValueError: a malformed file. The message names the file, the line number and the reason:
            a line without 10 tab-separated fields, an id that is not a positive integer (nor a
            range ``8-9`` nor a decimal ``8.1``), word ids not running ``1, 2, ..., n`` within a
            sentence, an empty FORM, a UPOS outside :data:`UPOS_TAGS`, a sentence with no word
            line, invalid UTF-8, or a corrupt gzip stream.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.conllu"
        >>> _ = path.write_text(
        ...     "# sent_id = s1\\n"
        ...     "1-2\\tdon't\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\n"
        ...     "1\\tdo\\tdo\\tAUX\\tVBP\\t_\\t0\\troot\\t_\\t_\\n"
        ...     "2\\tn't\\tnot\\tPART\\tRB\\t_\\t1\\tadvmod\\t_\\t_\\n",
        ...     encoding="utf-8",
        ... )
        >>> sentence = read_conllu(path)[0]
        >>> sentence.words, sentence.upos, sentence.lemmas, sentence.sent_id
        (('do', "n't"), ('AUX', 'PART'), ('do', 'not'), 's1')
    """
    return [sentence.tagged() for sentence in iter_conllu(path)]


def load_ud_english_ewt(split):
    """Load a split of the bundled UD English-EWT r2.16 treebank as tagged sentences.

    The data is read from the copy inside the installed ``zoo`` package, never from the network,
    and checked against the release's sentence and word counts (:data:`UD_ENGLISH_EWT_SIZES`).

    Args:
        split: ``"train"`` (12,544 sentences, 204,577 words), ``"dev"`` (2,001 / 25,147) or
            ``"test"`` (2,077 / 25,094).

    Returns:
        A list of :class:`Sentence`, in corpus order.

    Raises:
        ValueError: unknown split, or the bundled file is malformed or has other counts than the
            r2.16 release.
        FileNotFoundError: the data file is missing from the installation.

    Example:
        >>> dev = load_ud_english_ewt("dev")
        >>> len(dev)
        2001
        >>> dev[0].words[:3], dev[0].upos[:3]
        (('From', 'the', 'AP'), ('ADP', 'DET', 'PROPN'))
    """
    if split not in UD_ENGLISH_EWT_SPLITS:
        raise ValueError(
            f"Unknown UD English-EWT split {split!r}; expected one of "
            f"{sorted(UD_ENGLISH_EWT_SPLITS)}."
        )
    folder = importlib.resources.files("zoo.data") / "ud_english_ewt"
    resource = folder / UD_ENGLISH_EWT_SPLITS[split]
    if not resource.is_file():
        raise FileNotFoundError(
            f"The bundled UD English-EWT file {resource} is missing; the zoo package was installed "
            "without its data files (see [tool.setuptools.package-data] in pyproject.toml)."
        )
    with importlib.resources.as_file(resource) as path:
        sentences = read_conllu(path)
    found = (len(sentences), sum(len(s.words) for s in sentences))
    if found != UD_ENGLISH_EWT_SIZES[split]:
        raise ValueError(
            f"The bundled UD English-EWT {split} file {resource} has {found[0]:,} sentences and "
            f"{found[1]:,} words; the r2.16 release has {UD_ENGLISH_EWT_SIZES[split][0]:,} and "
            f"{UD_ENGLISH_EWT_SIZES[split][1]:,}. The file is damaged or from another release."
        )
    return sentences
