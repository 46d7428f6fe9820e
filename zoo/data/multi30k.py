"""Parallel-corpus readers and the bundled Multi30k task 1 (English–German) corpus.

Multi30k ships in ``zoo/data/multi30k/`` (provenance and citation in the README there), so
:func:`load_multi30k` works offline; :func:`read_parallel` reads any pair of aligned files,
plain or gzipped.
"""

import contextlib
import gzip
import importlib.resources
import itertools
import os
import zlib

from zoo.data.file_scan import GZIP_MAGIC, UTF8_BOM

__all__ = ["MULTI30K_LANGUAGES", "MULTI30K_SPLITS", "batched", "load_multi30k", "multi30k_files",
           "one_line", "read_lines", "read_parallel"]

# Split name -> the stem of its files, ``{stem}.{lang}.gz``.
MULTI30K_SPLITS = {"train": "train", "val": "val", "test2016": "test_2016_flickr"}
MULTI30K_LANGUAGES = ("en", "de")

# A tab would break a file's columns, a line break any file's lines (these are the breaks of
# str.splitlines, so that every reader sees one line).
_BREAKS = str.maketrans(dict.fromkeys("\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def one_line(text):
    """``text`` with every tab and line break a space: one line, however a reader splits lines.

    The writers of line-aligned text use it: distilled files, hypothesis files, the output of
    ``zoo translate``. A model that emits a line break through byte fallback cannot shift the
    lines after it.

    Example:
        >>> one_line("Ein Hund\\tläuft\\n")
        'Ein Hund läuft '
    """
    return text.translate(_BREAKS)


def batched(items, size):
    """Lists of ``size`` consecutive items (the last may be shorter), streamed: the windows in
    which long inputs are read (Python 3.12's ``itertools.batched``, which 3.11 lacks).

    Example:
        >>> list(batched(range(5), 2))
        [[0, 1], [2, 3], [4]]
    """
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def read_lines(path, errors="strict"):
    """Read a UTF-8 text file, plain or gzipped, as a list of lines.

    Gzip is recognised by its magic bytes. Lines are split on ``"\\n"`` only, so a Unicode line
    separator or a stray ``"\\r"`` cannot break a parallel corpus's alignment; a ``"\\r\\n"``
    ending and a leading byte-order mark are removed, no other whitespace is touched. A final
    newline makes no extra empty line; other empty lines are kept.

    Args:
        path: path of the file (``str`` or ``os.PathLike``).
        errors: ``"strict"`` (default) raises on invalid UTF-8; ``"replace"`` substitutes
            U+FFFD for each invalid byte sequence and reads on.

    Returns:
        A list of ``str``, one per line, without line terminators.

    Raises:
        ValueError: the file has invalid UTF-8 (the message names the file, the line and the
            column), or is a corrupt gzip file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = path.write_bytes(b"one\\r\\ntwo\\n")
        >>> read_lines(path)
        ['one', 'two']
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}.")
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: not a readable gzip file ({e}).") from e
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    if not data:
        return []
    raw_lines = data.split(b"\n")
    if data.endswith(b"\n"):
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            lines.append(raw.decode("utf-8", errors=errors))
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{path}, line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at byte column "
                f"{e.start + 1}: {e.reason}). Fix the file, or pass errors='replace' to substitute "
                "U+FFFD."
            ) from e
    return lines


def read_parallel(source_path, target_path, errors="strict"):
    """Read two line-aligned files (plain or gzipped UTF-8) as ``(source, target)`` pairs.

    Each file is read with :func:`read_lines`; line ``i`` of one file is the translation of line
    ``i`` of the other.

    Args:
        source_path: path of the source-language file.
        target_path: path of the target-language file.
        errors: ``"strict"`` (default) raises on invalid UTF-8, naming the file and the line;
            ``"replace"`` substitutes U+FFFD.

    Returns:
        A list of ``(source, target)`` string tuples, in file order.

    Raises:
        ValueError: the files have different numbers of lines (the message names both files and
            both counts), or one has invalid UTF-8 under ``errors="strict"``.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "x.en").write_text("A dog.\\nA cat.\\n", encoding="utf-8")
        >>> _ = (d / "x.de").write_text("Ein Hund.\\nEine Katze.\\n", encoding="utf-8")
        >>> read_parallel(d / "x.en", d / "x.de")
        [('A dog.', 'Ein Hund.'), ('A cat.', 'Eine Katze.')]
    """
    sources = read_lines(source_path, errors=errors)
    targets = read_lines(target_path, errors=errors)
    if len(sources) != len(targets):
        raise ValueError(
            "Parallel files are not aligned: "
            f"{os.fspath(source_path)} has {len(sources)} lines but "
            f"{os.fspath(target_path)} has {len(targets)} lines."
        )
    return list(zip(sources, targets))


def load_multi30k(split, source="en", target="de"):
    """Load a split of the bundled Multi30k task 1 corpus as translation pairs.

    The data is read from the copy inside the installed ``zoo`` package, never from the network.
    Sentences are untokenised and cased, exactly as released.

    Args:
        split: ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test2016"`` (1,000, the
            2016 Flickr test set).
        source: language of the first element of each pair, ``"en"`` or ``"de"``.
        target: language of the second element, ``"de"`` or ``"en"``.

    Returns:
        A list of ``(source_sentence, target_sentence)`` string tuples, in corpus order.

    Raises:
        ValueError: unknown split or language, or the bundled files are not aligned.
        FileNotFoundError: the data files are missing from the installation.

    Example:
        >>> pairs = load_multi30k("val")
        >>> len(pairs)
        1014
        >>> pairs[0][0][:22]
        'A group of men are loa'
    """
    with contextlib.ExitStack() as stack:
        source_path, target_path = (
            stack.enter_context(importlib.resources.as_file(r))
            for r in _resources(split, source, target)
        )
        return read_parallel(source_path, target_path)


def multi30k_files(split, source="en", target="de"):
    """The paths of a bundled Multi30k split's two gzipped files, to read as any user's files
    (:class:`zoo.data.ParallelCorpus`). The package must be installed as files (a wheel or
    an editable install; not a zip).

    Example:
        >>> [os.path.basename(p) for p in multi30k_files("val")]
        ['val.en.gz', 'val.de.gz']
    """
    return tuple(os.fspath(r) for r in _resources(split, source, target))


def _resources(split, source, target):
    if split not in MULTI30K_SPLITS:
        raise ValueError(
            f"Unknown Multi30k split {split!r}; expected one of {sorted(MULTI30K_SPLITS)}."
        )
    for field, lang in (("source", source), ("target", target)):
        if lang not in MULTI30K_LANGUAGES:
            raise ValueError(f"Unknown Multi30k {field} language {lang!r}; expected 'en' or 'de'.")
    if source == target:
        raise ValueError(f"source and target are both {source!r}; Multi30k pairs 'en' with 'de'.")
    folder = importlib.resources.files("zoo.data") / "multi30k"
    stem = MULTI30K_SPLITS[split]
    resources = [folder / f"{stem}.{lang}.gz" for lang in (source, target)]
    for resource in resources:
        if not resource.is_file():
            raise FileNotFoundError(
                f"The bundled Multi30k file {resource} is missing; the zoo package was installed "
                "without its data files (see [tool.setuptools.package-data] in pyproject.toml)."
            )
    return resources
