"""``python -m zoo.export.compare``: side-by-side translations, missing folders reported."""

import os
import subprocess
import sys

import pytest

from zoo.tasks import translate
from zoo.export import compare
from zoo.export.compare import DEFAULT_SENTENCES, format_table, main, printable

SENTENCES = ["A dog runs.", "Two men are talking in the street."]
WIDTH = 400  # wide enough that no cell wraps, so each row is one line


def _rows(table):
    """The cells of a table printed by ``compare``, whitespace-normalised, header first."""
    rows = []
    for line in table.split("\n"):  # not splitlines(): it also splits at \x1c, \x85 ...
        if line and not set(line) <= set("-+"):
            rows.append([" ".join(cell.split()) for cell in line.split(" | ")])
    return rows


def _cells(texts):
    return [" ".join(printable(text).split()) for text in texts]


@pytest.fixture(scope="module")
def greedy(model, tokenizer):
    """The greedy translations of DEFAULT_SENTENCES and SENTENCES, by one translate call."""
    texts = translate(model, tokenizer, list(DEFAULT_SENTENCES) + SENTENCES, method="greedy")
    return {"default": texts[: len(DEFAULT_SENTENCES)], "given": texts[len(DEFAULT_SENTENCES) :]}


def test_main_prints_every_model_and_reports_a_missing_folder(
    greedy, export_dir, tmp_path, capsys
):
    missing = str(tmp_path / "no_such_model")
    empty = tmp_path / "not_exported"
    empty.mkdir()
    status = main([missing, export_dir, str(empty), "--greedy", "--width", str(WIDTH)])
    out, err = capsys.readouterr()
    assert status == 0
    assert f"{missing}: no such folder" in err
    assert f"{empty}: no SavedModel" in err and "zoo export" in err
    assert "Traceback" not in out + err
    rows = _rows(out)
    assert rows[0] == ["source", export_dir]
    expected = _cells(greedy["default"])
    assert rows[1:] == [list(row) for row in zip(_cells(DEFAULT_SENTENCES), expected)]


def test_main_fails_when_no_model_loads(tmp_path, capsys):
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--", "A dog runs."]) == 1
    err = capsys.readouterr().err
    assert "no such folder" in err and "no model could be loaded" in err


def test_the_script_runs_without_zoo(greedy, export_dir, tmp_path):
    """As a plain script in a process where zoo cannot be imported; two columns of one model."""
    script = os.path.abspath(compare.__file__)
    argv = [script, export_dir, str(tmp_path / "missing"), export_dir, "--greedy"]
    argv += ["--width", str(WIDTH), "--", *SENTENCES]
    code = (
        "import runpy, sys\n"
        "sys.modules['zoo'] = None\n"  # any import of zoo raises ImportError
        f"sys.argv = {argv!r}\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env=dict(env, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "missing: no such folder" in result.stderr
    assert "Traceback" not in result.stderr
    rows = _rows(result.stdout)
    assert rows[0] == ["source", export_dir, export_dir]
    expected = _cells(greedy["given"])
    assert rows[1:] == [[s, e, e] for s, e in zip(_cells(SENTENCES), expected)]


def test_format_table_wraps_to_the_width():
    table = format_table(["source", "model"], [["word " * 30, "kurz\x1b[31m"]], width=40)
    lines = table.split("\n")
    assert all(len(line) <= 40 for line in lines)
    assert len(lines) > 4  # the long cell wrapped onto several lines
    assert "\x1b" not in table and "kurz\ufffd[31m" in table
