import collections
import doctest
import fnmatch
import gzip
import importlib.resources
import pathlib
import re
import tomllib

import pytest

import zoo.data
from zoo.data import (
    UD_ENGLISH_EWT_SIZES,
    UD_ENGLISH_EWT_SPLITS,
    UPOS_TAGS,
    Sentence,
    load_ud_english_ewt,
    read_conllu,
)
from zoo.data import conllu as conllu_module

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BUNDLED = importlib.resources.files("zoo.data") / "ud_english_ewt"


@pytest.fixture(scope="module")
def ewt():
    """All three splits, each parsed once for the module (train takes well under a second)."""
    return {split: load_ud_english_ewt(split) for split in UD_ENGLISH_EWT_SPLITS}


# ---------------------------------------------------------------- the bundled treebank
@pytest.mark.parametrize(
    "split, sentences, words",
    [("train", 12_544, 204_577), ("dev", 2_001, 25_147), ("test", 2_077, 25_094)],
)
def test_split_sizes(ewt, split, sentences, words):
    data = ewt[split]
    assert len(data) == sentences
    assert sum(len(s.words) for s in data) == words
    assert UD_ENGLISH_EWT_SIZES[split] == (sentences, words)


def test_every_split_uses_all_17_tags_and_has_ids(ewt):
    for split, data in ewt.items():
        counts = collections.Counter(tag for s in data for tag in s.upos)
        assert set(counts) == set(UPOS_TAGS), split
        assert all(s.sent_id for s in data), split
        assert len({s.sent_id for s in data}) == len(data), split
        assert all(len(s.words) == len(s.upos) == len(s.xpos) for s in data), split
    assert len(set(UPOS_TAGS)) == 17 and list(UPOS_TAGS) == sorted(UPOS_TAGS)


def test_known_first_sentences(ewt):
    first = ewt["dev"][0]
    assert first.sent_id == (
        "weblog-blogspot.com_nominations_20041117172713_ENG_20041117_172713-0001"
    )
    assert first.words == ("From", "the", "AP", "comes", "this", "story", ":")
    assert first.upos == ("ADP", "DET", "PROPN", "VERB", "DET", "NOUN", "PUNCT")
    assert first.xpos == ("IN", "DT", "NNP", "VBZ", "DT", "NN", ":")
    assert ewt["train"][0].words[:3] == ("Al", "-", "Zaman")
    assert ewt["test"][0].words[:4] == ("What", "if", "Google", "Morphed")


def test_reads_only_the_bundled_copy(monkeypatch):
    package_dir = pathlib.Path(zoo.data.__file__).resolve().parent / "ud_english_ewt"
    seen = []
    real = conllu_module.read_conllu

    def spy(path):
        seen.append(path)
        return real(path)

    monkeypatch.setattr(conllu_module, "read_conllu", spy)
    load_ud_english_ewt("test")
    assert [pathlib.Path(p).resolve() for p in seen] == [package_dir / "en_ewt-ud-test.conllu.gz"]


def test_counts_are_checked(monkeypatch):
    monkeypatch.setitem(conllu_module.UD_ENGLISH_EWT_SIZES, "test", (2_077, 25_095))
    with pytest.raises(ValueError, match=r"has 2,077 sentences and 25,094 words; .* 25,095"):
        load_ud_english_ewt("test")


def test_bundled_files_are_gzipped_licensed_and_declared_as_package_data():
    names = sorted(r.name for r in BUNDLED.iterdir() if r.name.endswith(".gz"))
    assert names == sorted(UD_ENGLISH_EWT_SPLITS.values())
    for name in names:
        assert (BUNDLED / name).read_bytes()[:2] == b"\x1f\x8b", name
    license_text = (BUNDLED / "LICENSE.txt").read_text(encoding="utf-8")
    assert license_text.startswith("Attribution-ShareAlike 4.0 International")
    readme = (BUNDLED / "README.md").read_text(encoding="utf-8")
    for needle in ("UD_English-EWT", "r2.16", "CC BY-SA 4.0", "Silveira", "LDC2012T13"):
        assert needle in readme, needle
    # A non-editable install ships only what package-data names.
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["zoo.data"]
    for name in names + ["LICENSE.txt", "README.md"]:
        assert any(fnmatch.fnmatch(f"ud_english_ewt/{name}", p) for p in patterns), name


def test_unknown_split():
    with pytest.raises(ValueError, match=re.escape("Unknown UD English-EWT split 'val'")):
        load_ud_english_ewt("val")


# ---------------------------------------------------------------- the generic reader
def _row(token_id, form, upos="NOUN", xpos="NN"):
    return f"{token_id}\t{form}\t{form.lower()}\t{upos}\t{xpos}\t_\t0\troot\t_\t_\n"


SMALL = (
    "# newdoc id = doc1\n"
    "# sent_id = s1\n"
    "# text = I don't know.\n"
    + _row(1, "I", "PRON", "PRP")
    + "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    + _row(2, "do", "AUX", "VBP")
    + _row(3, "n't", "PART", "RB")
    + _row(4, "know", "VERB", "VB")
    + _row(5, ".", "PUNCT", ".")
    + "\n"
    "# sent_id = s2\n"
    "# text = Sue likes coffee and Bill tea\n"
    + _row(1, "Sue", "PROPN", "NNP")
    + _row(2, "likes", "VERB", "VBZ")
    + _row(3, "coffee")
    + _row(4, "and", "CCONJ", "CC")
    + _row(5, "Bill", "PROPN", "NNP")
    + "5.1\tlikes\tlike\tVERB\tVBZ\t_\t_\t_\t0:root\tCopyOf=2\n"
    + _row(6, "tea")
    + "\n"
    # No sent_id, no comments, and no blank line at the end of the file.
    + _row(1, "Hi", "INTJ", "UH").rstrip("\n")
)

SMALL_EXPECTED = [
    Sentence(
        words=("I", "do", "n't", "know", "."),
        upos=("PRON", "AUX", "PART", "VERB", "PUNCT"),
        xpos=("PRP", "VBP", "RB", "VB", "."),
        sent_id="s1",
        lemmas=("i", "do", "n't", "know", "."),
    ),
    Sentence(
        words=("Sue", "likes", "coffee", "and", "Bill", "tea"),
        upos=("PROPN", "VERB", "NOUN", "CCONJ", "PROPN", "NOUN"),
        xpos=("NNP", "VBZ", "NN", "CC", "NNP", "NN"),
        sent_id="s2",
        lemmas=("sue", "likes", "coffee", "and", "bill", "tea"),
    ),
    Sentence(words=("Hi",), upos=("INTJ",), xpos=("UH",), sent_id=None, lemmas=("hi",)),
]


def _write(path, text, compress=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_small_file_comments_multiword_tokens_and_empty_nodes(tmp_path, compress):
    # The name says .conllu even when gzipped: gzip is recognised by its magic bytes.
    path = _write(tmp_path / "small.conllu", SMALL, compress)
    assert read_conllu(path) == SMALL_EXPECTED
    assert read_conllu(str(path)) == SMALL_EXPECTED


def test_final_blank_line_crlf_bom_and_extra_blank_lines(tmp_path):
    with_blank = _write(tmp_path / "a.conllu", SMALL + "\n\n")
    assert read_conllu(with_blank) == SMALL_EXPECTED
    windows = _write(tmp_path / "b.conllu", "\ufeff" + SMALL.replace("\n", "\r\n") + "\r\n\r\n")
    assert read_conllu(windows) == SMALL_EXPECTED
    assert read_conllu(_write(tmp_path / "empty.conllu", "")) == []


def test_sentence_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        Sentence(words=("a", "b"), upos=("X",), xpos=("_", "_"))


# Each case: the file's text, the line the error must name, and a piece of the reason.
MALFORMED = {
    "too few fields": (
        _row(1, "A") + "2\tdog\tdog\tNOUN\tNN\t_\t1\tnsubj\t_\n",
        2,
        "expected 10 tab-separated fields, found 9",
    ),
    "spaces instead of tabs": (
        _row(1, "A") + "2 dog dog NOUN NN _ 1 nsubj _ _\n",
        2,
        "expected 10 tab-separated fields, found 1",
    ),
    "too many fields": (_row(1, "A").rstrip("\n") + "\textra\n", 1, "found 11"),
    "non-integer id": (_row(1, "A") + _row("two", "dog"), 2, "id 'two' is not a positive integer"),
    "zero id": (_row(0, "A"), 1, "id '0' is not a positive integer"),
    "id skips": (_row(1, "A") + _row(3, "dog"), 2, "word id 3 where 2 was expected"),
    "id repeats": (_row(1, "A") + _row(1, "dog"), 2, "word id 1 where 2 was expected"),
    "id does not start at 1": ("# sent_id = x\n" + _row(2, "A"), 2, "word id 2 where 1"),
    "ids restart without a blank line": (
        _row(1, "A") + _row(2, "dog") + _row(1, "Cats"),
        3,
        "is the blank line between two sentences missing?",
    ),
    "backwards range": (_row(1, "A") + "3-2\tx\t_\t_\t_\t_\t_\t_\t_\t_\n", 2, "'3-2'"),
    "empty form": (_row(1, "A") + _row(2, ""), 2, "empty FORM for word 2"),
    "blank form": (_row(1, "A") + _row(2, " "), 2, "empty FORM for word 2"),
    "unknown upos": (_row(1, "A", "DET") + _row(2, "dog", "NN"), 2, "UPOS 'NN' of word 2"),
    "missing upos": (_row(1, "A", "_"), 1, "UPOS '_' of word 1 is not one of the 17 UD tags"),
    "whitespace-only line": (_row(1, "A") + " \n" + _row(1, "B"), 2, "only whitespace"),
    "comments without words": (
        _row(1, "A") + "\n# sent_id = lost\n\n" + _row(1, "B"),
        3,
        "no word lines",
    ),
    "only a multiword token": ("1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n", 1, "no word lines"),
}


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_names_file_line_and_reason(tmp_path, case, compress):
    text, line, reason = MALFORMED[case]
    path = _write(tmp_path / "broken.conllu", text, compress)
    with pytest.raises(ValueError) as info:
        read_conllu(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}: "), message
    assert reason in message, message


@pytest.mark.parametrize("compress", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, compress):
    data = (_row(1, "A") + _row(2, "dog")).encode() + b"3\tbad\xff\tbad\tNOUN\tNN\t_\t0\t_\t_\t_\n"
    path = _write(tmp_path / "latin.conllu", data, compress)
    with pytest.raises(ValueError) as info:
        read_conllu(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 3: invalid UTF-8"), message
    assert "0xff" in message


def test_corrupt_gzip_names_the_file(tmp_path):
    whole = gzip.compress((SMALL + "\n\n").encode() * 50)  # a valid file, then cut
    path = _write(tmp_path / "cut.conllu.gz", whole[: len(whole) - 8])  # cut inside the stream
    with pytest.raises(ValueError, match=re.escape(f"{path}: not a readable gzip file")):
        read_conllu(path)


def test_docstring_examples_run():
    result = doctest.testmod(conllu_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# ---------------------------------------------------------------- lossless streaming
# Every kind of line a UD file has, and the layouts a tool must write back unchanged: a byte
# order mark, blank lines before the first sentence and two between sentences, "\r\n" endings
# on some lines, a multiword token, an empty node, and no final newline.
LOSSLESS = (
    "\ufeff\n"
    "# newdoc id = d1\n"
    "# sent_id = a\n"
    "# text = Don't go.\n"
    "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No\n"
    "1\tDo\tdo\tAUX\tVB\tMood=Imp|VerbForm=Fin\t3\taux\t3:aux\t_\n"
    "2\tn't\tnot\tPART\tRB\tPolarity=Neg\t3\tadvmod\t3:advmod\t_\r\n"
    "3\tgo\tgo\tVERB\tVB\tVerbForm=Inf\t0\troot\t0:root\tSpaceAfter=No\n"
    "3.1\tgo\t_\t_\t_\t_\t_\t_\t3:conj\tCopyOf=3\n"
    "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t3:punct\t_\n"
    "\n"
    "\r\n"
    "# sent_id = b\n"
    "1\tΚαλή\tκαλός\tADJ\t_\tGender=Fem\t2\tamod\t_\t_\n"
    "2\tνύχτα\tνύχτα\tNOUN\t_\tGender=Fem\t0\troot\t_\t_"
)


@pytest.mark.parametrize("compress", [False, True])
def test_a_file_streamed_and_written_back_is_the_same_bytes(tmp_path, compress):
    path = _write(tmp_path / "f.conllu", LOSSLESS, compress)
    sentences = list(conllu_module.iter_conllu(path))
    assert [s.sent_id for s in sentences] == ["a", "b"]
    assert [s.line_number for s in sentences] == [2, 13]
    assert sentences[0].words == ("Do", "n't", "go", ".")
    assert sentences[1].column("LEMMA") == ("καλός", "νύχτα")
    assert "".join(s.text() for s in sentences).encode() == LOSSLESS.encode()
    assert [s.tagged() for s in sentences] == read_conllu(path)


def test_filling_columns_changes_those_columns_of_the_words_alone(tmp_path):
    blank = LOSSLESS.replace("\tAUX\t", "\t_\t").replace("\tADJ\t", "\t_\t")
    path = _write(tmp_path / "f.conllu", blank)
    with pytest.raises(ValueError, match="UPOS '_' of word 1"):
        list(conllu_module.iter_conllu(path))  # gold files need their UPOS
    first, second = conllu_module.iter_conllu(path, require_upos=False)
    filled = first.filled(UPOS=("AUX", "PART", "VERB", "PUNCT"), LEMMA=("x", "y", "z", "w"))
    assert filled.column("UPOS") == ("AUX", "PART", "VERB", "PUNCT")
    assert filled.column("LEMMA") == ("x", "y", "z", "w")
    before, after = first.text().splitlines(True), filled.text().splitlines(True)
    assert len(before) == len(after)
    for old, new in zip(before, after):
        old_fields, new_fields = old.split("\t"), new.split("\t")
        if old_fields[0].lstrip("\ufeff") in ("1", "2", "3", "4"):
            assert [f for i, f in enumerate(old_fields) if i not in (2, 3)] == [
                f for i, f in enumerate(new_fields) if i not in (2, 3)]
        else:  # comments, the multiword token, the empty node, blank lines: untouched
            assert old == new
    assert "\tRB\tPolarity=Neg\t3\tadvmod\t3:advmod\t_\r\n" in filled.text()  # its ending kept
    with pytest.raises(ValueError, match="3 values of UPOS for 4 words"):
        first.filled(UPOS=("AUX", "PART", "VERB"))
    assert second.column("UPOS") == ("_", "NOUN")


def test_a_stream_yields_each_sentence_before_reading_on(tmp_path):
    import io

    later_error = SMALL + "\n" + "1\tbad\n" * 3
    stream = io.BytesIO(gzip.compress(later_error.encode()))
    sentences = conllu_module.iter_conllu(stream)
    assert next(sentences).words  # the first sentence, before the broken lines are parsed
    with pytest.raises(ValueError, match=r"^<stdin>, line 22: expected 10 tab-separated"):
        list(sentences)
