"""A treebank named by its CoNLL-U files: what ``zoo train tagger --train F --valid F`` reads.

:class:`Treebank` scans each file once and reads it through the one CoNLL-U reader, so that a
malformed file is named with its line before training starts, and records the files without
their paths (:meth:`Treebank.fingerprint`), so that a workdir resumes on the same files anywhere.
"""

import os

from zoo.data.conllu import iter_conllu
from zoo.data.file_scan import matching_files, scan_file

__all__ = ["Treebank"]

class Treebank:
    """The tagged sentences of CoNLL-U files (plain or gzipped), read and checked once.

    A treebank is small next to a parallel corpus (UD's largest has about 3.4M words, a few
    hundred MB of Python objects), so its sentences are held as
    :class:`zoo.data.Sentence` objects; the tagging pipeline encodes them once.

    Args:
        patterns: paths or globs of CoNLL-U files, in order (a glob's matches sorted).
        flag: what the messages call them (``"--train"``).

    Raises:
        FileNotFoundError: a missing file, a glob that matches nothing.
        ValueError: a malformed file (the file, the line and the reason), or no sentence in
            any of them (an empty treebank).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "xx_tiny-ud-train.conllu"
        >>> _ = path.write_text("1\\tHi\\thi\\tINTJ\\tUH\\t_\\t0\\troot\\t_\\t_\\n")
        >>> treebank = Treebank([str(path)])
        >>> len(treebank), treebank[0].upos
        (1, ('INTJ',))
    """

    def __init__(self, patterns, flag="--train"):
        if isinstance(patterns, (str, os.PathLike)):
            patterns = [patterns]
        self.flag = flag
        self.paths = [path for pattern in patterns for path in matching_files(pattern, flag)]
        if not self.paths:
            raise ValueError(f"{flag}: no file given")
        self.records = [scan_file(path) for path in self.paths]
        self.sentences = [s.tagged() for path in self.paths for s in iter_conllu(path)]
        if not self.sentences:
            raise ValueError(f"{flag} {' '.join(self.paths)}: no sentence in it (an empty "
                             "treebank)")  # fmt: skip

    def __len__(self):
        return len(self.sentences)

    def __getitem__(self, index):
        return self.sentences[index]

    def __iter__(self):
        return iter(self.sentences)

    @property
    def num_words(self):
        return sum(len(s.words) for s in self.sentences)

    def fingerprint(self):
        """The files by name, size, SHA-256 and lines: JSON, free of paths, in the form of
        :meth:`zoo.data.ParallelCorpus.fingerprint` (:func:`zoo.data.fingerprint_change`
        compares two)."""
        return {"corpora": [{"weight": None,
                             "shards": [[record.identity()] for record in self.records]}]}

    def __repr__(self):
        return f"<Treebank {' '.join(self.paths)}: {len(self)} sentences>"
