"""Execute every notebook in notebooks/ at tiny size (ZOO_NOTEBOOK_TINY=1)."""

import glob
import os

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("ZOO_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if "ZOO_SOURCE" not in os.environ:  # else the first cell installs zoo from there, as on Colab
        monkeypatch.setenv("PYTHONPATH", ROOT)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any failure
