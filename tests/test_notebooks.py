"""The notebooks: each runs top to bottom at tiny size (tools/run_notebooks.py), and each is
committed as one full run shows it, its Colab links on the project's address."""

import copy
import importlib.util
import os

import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("runner", f"{ROOT}/tools/run_notebooks.py")
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)
NOTEBOOKS = runner.NOTEBOOKS


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6, NOTEBOOKS


@pytest.fixture(scope="module")
def kernel():
    """One kernel for the tiny runs, reset before each: its start and the imports cost more than
    most tiny runs."""
    with runner.tiny_kernel() as km:
        yield km


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, kernel):
    runner.execute(path, km=kernel)  # raises CellExecutionError, naming the cell, on any failure


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_the_committed_notebook_is_one_run_with_every_output(path):
    """A reader on GitHub sees what one top-to-bottom run printed and drew: every code cell has
    an output, none an error, and the execution counts go 1, 2, 3, ..."""
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code, 1):
        where = f"{os.path.basename(path)}, code cell {number}: {cell.source[:60]!r}"
        assert cell.outputs, f"{where} has no output (make notebooks-full writes them)"
        assert not [o for o in cell.outputs if o.output_type == "error"], f"{where} failed"
        assert cell.execution_count == number, f"{where} ran as [{cell.execution_count}]"
    assert notebook.cells[0].source.count("**Run time:** about "), "no run time in the first cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_the_badge_and_install_cell_use_the_projects_address(path):
    notebook = nbformat.read(path, as_version=4)
    name = os.path.basename(path)
    address = runner.project_address()
    assert runner.with_address(copy.deepcopy(notebook), name) == notebook, (
        f"{name}: run `python tools/run_notebooks.py --address` to point it at {address}")
    colab = address.replace("github.com", "colab.research.google.com/github")
    assert f"({colab}/blob/main/notebooks/{name})" in notebook.cells[0].source
    assert f'"ZOO_SOURCE", "{address}.git"' in notebook.cells[1].source
