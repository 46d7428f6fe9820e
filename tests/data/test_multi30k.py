import fnmatch
import gzip
import importlib.resources
import pathlib
import re
import tomllib

import pytest

import zoo.data
from zoo.data import MULTI30K_LANGUAGES, MULTI30K_SPLITS, load_multi30k, read_lines, read_parallel
from zoo.data import multi30k as multi30k_module

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BUNDLED = importlib.resources.files("zoo.data") / "multi30k"


# ---------------------------------------------------------------- the bundled corpus
@pytest.mark.parametrize("split, size", [("train", 29000), ("val", 1014), ("test2016", 1000)])
def test_split_sizes_and_types(split, size):
    pairs = load_multi30k(split)
    assert len(pairs) == size
    assert all(isinstance(en, str) and isinstance(de, str) for en, de in pairs)
    # Task 1 has no empty sentence; a misaligned or mis-split file would show up here.
    assert all(en.strip() and de.strip() for en, de in pairs)
    assert not any("\n" in en or "\n" in de for en, de in pairs)


def test_known_first_pairs():
    assert load_multi30k("train")[0] == (
        "Two young, White males are outside near many bushes.",
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    )
    en, de = load_multi30k("test2016")[-1]
    assert en.endswith(".") and de.endswith(".")


def test_direction_can_be_reversed():
    en_de = load_multi30k("val")
    de_en = load_multi30k("val", source="de", target="en")
    assert de_en == [(de, en) for en, de in en_de]


def test_reads_only_the_bundled_copy(monkeypatch):
    package_dir = pathlib.Path(zoo.data.__file__).resolve().parent / "multi30k"
    seen = []
    real = multi30k_module.read_parallel

    def spy(source_path, target_path, **kwargs):
        seen.extend([source_path, target_path])
        return real(source_path, target_path, **kwargs)

    monkeypatch.setattr(multi30k_module, "read_parallel", spy)
    load_multi30k("test2016")
    assert [pathlib.Path(p).resolve() for p in seen] == [
        package_dir / "test_2016_flickr.en.gz",
        package_dir / "test_2016_flickr.de.gz",
    ]


def test_bundled_files_are_gzipped_and_declared_as_package_data():
    names = sorted(r.name for r in BUNDLED.iterdir() if r.name.endswith(".gz"))
    stems = MULTI30K_SPLITS.values()
    expected = sorted(f"{stem}.{lang}.gz" for stem in stems for lang in MULTI30K_LANGUAGES)
    assert names == expected
    for name in names:
        assert (BUNDLED / name).read_bytes()[:2] == b"\x1f\x8b", name
    readme = (BUNDLED / "README.md").read_text(encoding="utf-8")
    assert "github.com/multi30k/dataset" in readme and "Elliott" in readme
    # A non-editable install ships only what package-data names.
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["zoo.data"]
    for name in names + ["README.md"]:
        assert any(fnmatch.fnmatch(f"multi30k/{name}", p) for p in patterns), name


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"split": "test"}, "Unknown Multi30k split 'test'"),
        ({"split": "train", "source": "fr"}, "source language 'fr'"),
        ({"split": "train", "target": "fr"}, "target language 'fr'"),
        ({"split": "train", "source": "de", "target": "de"}, "both 'de'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_multi30k(**kwargs)


# ---------------------------------------------------------------- the generic reader
def _write(path, data, compress=False):
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_read_parallel_plain_and_gzip(tmp_path, compress):
    # The name says .txt even when gzipped: gzip is recognised by its magic bytes.
    src = _write(tmp_path / "a.txt", "A dog.\nA cat.\n\nÄpfel 🍎.".encode(), compress)
    tgt = _write(tmp_path / "b.txt", "Ein Hund.\nEine Katze.\n\nApples 🍎.\n".encode(), compress)
    assert read_parallel(src, tgt) == [
        ("A dog.", "Ein Hund."),
        ("A cat.", "Eine Katze."),
        ("", ""),
        ("Äpfel 🍎.", "Apples 🍎."),
    ]


def test_read_lines_line_endings_bom_and_unicode_separators(tmp_path):
    path = _write(tmp_path / "x.txt", "\ufeffone\r\ntwo\u2028still two\x85\rthree\r\n".encode())
    assert read_lines(path) == ["one", "two\u2028still two\x85\rthree"]
    assert read_lines(_write(tmp_path / "empty.txt", b"")) == []


@pytest.mark.parametrize("compress", [False, True])
def test_line_count_mismatch_names_both_files_and_counts(tmp_path, compress):
    src = _write(tmp_path / "train.en", b"a\nb\nc\n", compress)
    tgt = _write(tmp_path / "train.de", b"x\ny\n", compress)
    with pytest.raises(ValueError) as info:
        read_parallel(src, tgt)
    message = str(info.value)
    assert f"{src} has 3 lines" in message
    assert f"{tgt} has 2 lines" in message


def test_missing_final_newline_still_counts_the_last_line(tmp_path):
    src = _write(tmp_path / "s", b"a\nb")
    tgt = _write(tmp_path / "t", b"x\ny\nz")
    with pytest.raises(ValueError, match=r"has 2 lines .* has 3 lines"):
        read_parallel(src, tgt)


@pytest.mark.parametrize("compress", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, compress):
    src = _write(tmp_path / "s.en", b"fine\nbad \xff byte\n", compress)
    tgt = _write(tmp_path / "t.de", b"gut\nauch gut\n", compress)
    with pytest.raises(ValueError) as info:
        read_parallel(src, tgt)
    message = str(info.value)
    assert str(src) in message and "line 2" in message and "0xff" in message
    replaced = read_parallel(src, tgt, errors="replace")
    assert replaced == [("fine", "gut"), ("bad \ufffd byte", "auch gut")]


def test_corrupt_gzip_names_the_file(tmp_path):
    whole = gzip.compress(b"a\nb\n" * 100)
    path = _write(tmp_path / "broken.gz", whole[: len(whole) - 8])  # cut inside the stream
    with pytest.raises(ValueError, match=re.escape(f"{path}: not a readable gzip file")):
        read_lines(path)


def test_bad_errors_argument(tmp_path):
    with pytest.raises(ValueError, match="errors must be"):
        read_lines(_write(tmp_path / "x", b"a\n"), errors="ignore")
