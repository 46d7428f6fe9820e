"""Treebank: CoNLL-U files named by path or glob, read and checked once, recorded without paths."""

import gzip
import os
import shutil

import pytest

from zoo.data import Treebank, fingerprint_change

WORD = "{}\t{}\t_\tNOUN\tNN\t_\t0\troot\t_\t_\n"


def write(path, sentences, gzipped=False):
    text = "".join("".join(WORD.format(i, w) for i, w in enumerate(s, 1)) + "\n"
                   for s in sentences)  # fmt: skip
    data = gzip.compress(text.encode(), mtime=0) if gzipped else text.encode()
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_files_and_globs_in_order_plain_and_gzipped(tmp_path):
    write(tmp_path / "b.conllu", [["c"]])
    write(tmp_path / "a.conllu.gz", [["a", "b"]], gzipped=True)
    treebank = Treebank([str(tmp_path / "*.conllu*")])
    assert [s.words for s in treebank] == [("a", "b"), ("c",)]
    assert len(treebank) == 2 and treebank.num_words == 3 and treebank[1].upos == ("NOUN",)


def test_the_fingerprint_is_the_same_at_another_path_and_names_a_changed_file(tmp_path):
    first = write(tmp_path / "x_y-ud-train.conllu", [["a"], ["b"]])
    os.makedirs(tmp_path / "elsewhere")
    moved = shutil.copy(first, tmp_path / "elsewhere")
    assert Treebank([first]).fingerprint() == Treebank([moved]).fingerprint()
    assert str(tmp_path) not in repr(Treebank([first]).fingerprint())
    saved = Treebank([first]).fingerprint()
    write(moved, [["a"], ["c"]])
    change = fingerprint_change(saved, Treebank([moved]).fingerprint(), "data.json")
    assert "x_y-ud-train.conllu is not the file this run started on" in change


def test_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="--train .*none.*: no file matches"):
        Treebank([str(tmp_path / "none*.conllu")])
    with pytest.raises(FileNotFoundError, match="missing.conllu: no such file"):
        Treebank([str(tmp_path / "missing.conllu")])
    empty = tmp_path / "empty.conllu"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="--valid .*empty.conllu: no sentence in it"):
        Treebank([str(empty)], flag="--valid")
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tx\t_\tNOPE\t_\t_\t0\troot\t_\t_\n")
    with pytest.raises(ValueError, match="bad.conllu, line 1: UPOS 'NOPE'"):
        Treebank([str(bad)])
