"""A CoNLL-U reader for part-of-speech tagging, and the bundled UD English-EWT treebank.

UD English-EWT r2.16 ships inside the package, in ``zoo/data/ud_english_ewt/`` (gzipped, with its
licence, CC BY-SA 4.0, and its attribution in the README there), so :func:`load_ud_english_ewt`
reads only the installed copy and works offline. :func:`read_conllu` is the generic reader
underneath; it takes any CoNLL-U file, plain or gzipped, and keeps what a tagger needs: the word
forms and their UPOS and XPOS tags.

Format reference: https://universaldependencies.org/format.html
"""

import dataclasses
import importlib.resources
import os
import re

from zoo.data.multi30k import read_lines

__all__ = [
    "UD_ENGLISH_EWT_SIZES",
    "UD_ENGLISH_EWT_SPLITS",
    "UPOS_TAGS",
    "Sentence",
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

    Example:
        >>> s = Sentence(words=("Hi", "!"), upos=("INTJ", "PUNCT"), xpos=("UH", "."), sent_id="1")
        >>> list(zip(s.words, s.upos))
        [('Hi', 'INTJ'), ('!', 'PUNCT')]
    """

    words: tuple[str, ...]
    upos: tuple[str, ...]
    xpos: tuple[str, ...]
    sent_id: str | None = None

    def __post_init__(self):
        if not len(self.words) == len(self.upos) == len(self.xpos):
            raise ValueError(
                f"Sentence {self.sent_id!r}: words, upos and xpos have different lengths "
                f"({len(self.words)}, {len(self.upos)}, {len(self.xpos)})."
            )


def read_conllu(path):
    """Read a CoNLL-U file, plain or gzipped UTF-8, as a list of :class:`Sentence`.

    Gzip is recognised by its magic bytes, not by the file name; a UTF-8 byte-order mark and
    ``"\\r\\n"`` line endings are accepted (see :func:`zoo.data.read_lines`). Sentences are
    separated by blank lines; the last one is kept even when the file does not end with a blank
    line. Comment lines (``#``) are skipped, except that ``# sent_id = ...`` sets
    :attr:`Sentence.sent_id`. Multiword-token lines (ids like ``8-9``) and empty nodes (``8.1``)
    are skipped: neither carries a word-level tag. Of each word line, FORM, UPOS and XPOS are kept.

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
        >>> read_conllu(path)
        [Sentence(words=('do', "n't"), upos=('AUX', 'PART'), xpos=('VBP', 'RB'), sent_id='s1')]
    """
    path = os.fspath(path)
    lines = read_lines(path)  # Raises, naming the file and the line, on invalid UTF-8.
    sentences = []
    words, upos, xpos = [], [], []
    sent_id = None
    first_line = None  # Line number where the current sentence (comments included) starts.

    def fail(number, reason):
        raise ValueError(f"{path}, line {number}: {reason}.")

    def close(number):
        nonlocal words, upos, xpos, sent_id, first_line
        if first_line is None:
            return  # Consecutive blank lines: nothing to close.
        if not words:
            fail(
                first_line,
                f"the sentence starting here has no word lines (no line with an integer id "
                f"before its end at line {number})",
            )
        sentences.append(Sentence(tuple(words), tuple(upos), tuple(xpos), sent_id))
        words, upos, xpos = [], [], []
        sent_id = None
        first_line = None

    for number, line in enumerate(lines, start=1):
        if not line:
            close(number)
            continue
        if first_line is None:
            first_line = number
        if line.startswith("#"):
            match = _SENT_ID.fullmatch(line)
            if match:
                sent_id = match.group(1).strip()
            continue
        if not line.strip():
            fail(number, "a line of only whitespace; a sentence break must be an empty line")
        fields = line.split("\t")
        if len(fields) != _NUM_FIELDS:
            fail(number, f"expected {_NUM_FIELDS} tab-separated fields, found {len(fields)}")
        token_id, form, _, tag, xtag = fields[:5]
        if _WORD_ID.fullmatch(token_id) is None:
            multiword = _MULTIWORD_ID.fullmatch(token_id)
            if multiword is not None:
                start, end = (int(i) for i in multiword.groups())
                if start >= end:
                    fail(number, f"multiword-token range {token_id!r} does not run upwards")
                continue
            if _EMPTY_NODE_ID.fullmatch(token_id) is not None:
                continue
            fail(
                number,
                f"id {token_id!r} is not a positive integer (nor a multiword-token range like "
                "'8-9' nor an empty node like '8.1')",
            )
        expected = len(words) + 1
        if int(token_id) != expected:
            hint = " (is the blank line between two sentences missing?)" if token_id == "1" else ""
            fail(
                number,
                f"word id {token_id} where {expected} was expected; word ids must run 1, 2, ..., n "
                f"within a sentence{hint}",
            )
        if not form.strip():
            fail(number, f"empty FORM for word {token_id}")
        if tag not in _UPOS_SET:
            fail(
                number,
                f"UPOS {tag!r} of word {token_id} is not one of the 17 UD tags "
                f"({', '.join(UPOS_TAGS)})",
            )
        words.append(form)
        upos.append(tag)
        xpos.append(xtag)
    close(len(lines) + 1)
    return sentences


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
