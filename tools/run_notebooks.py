"""Run the notebooks top to bottom, and keep their Colab links on the project's address.

    python tools/run_notebooks.py                 # each notebook at tiny size, nothing written
    python tools/run_notebooks.py --full --write  # at full size, outputs written back
    python tools/run_notebooks.py --address       # only the badges and install cells updated

The project's public address is one setting, ``[project.urls] Source`` in pyproject.toml: each
notebook's Colab badge opens that repository's copy of the notebook, and its install cell clones
it (``ZOO_SOURCE``). Writing a notebook brings both up to date; the suite checks them.
"""

import argparse
import contextlib
import glob
import os
import re
import sys
import time
import tomllib

import nbformat
from jupyter_core.utils import run_sync

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "notebooks")
NOTEBOOKS = sorted(glob.glob(os.path.join(HERE, "*.ipynb")))
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
_BADGE_LINK = re.compile(r"\[!\[Open In Colab\]\(" + re.escape(BADGE) + r"\)\]\([^)]*\)")
_SOURCE_DEFAULT = re.compile(r'os\.environ\.get\("ZOO_SOURCE", "[^"]*"\)')


def project_address():
    """The repository's public address, ``https://github.com/OWNER/NAME``."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Source"].rstrip("/")


def with_address(notebook, name, address=None):
    """``notebook`` with its badge opening ``name`` at ``address`` on Colab and its install cell
    cloning ``address`` (both in place; the notebook is returned)."""
    address = address or project_address()
    colab = address.replace("https://github.com/", "https://colab.research.google.com/github/")
    badge = f"[![Open In Colab]({BADGE})]({colab}/blob/main/notebooks/{name})"
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = _BADGE_LINK.sub(lambda _: badge, cell.source)
        elif cell.cell_type == "code":
            cell.source = _SOURCE_DEFAULT.sub(
                lambda _: f'os.environ.get("ZOO_SOURCE", "{address}.git")', cell.source)
    return notebook


# Run in a shared kernel before each notebook, so that none leans on the one before it: Keras's
# global state (clear_session keeps floatx), matplotlib's figures, settings and backend (05
# switches to inline), then every name, as %reset -f does, with the execution count back at 1.
_RESET = """
import sys
if "keras" in sys.modules:
    sys.modules["keras"].backend.clear_session()
    sys.modules["keras"].config.set_floatx("float32")
if "matplotlib.pyplot" in sys.modules:
    get_ipython().run_line_magic("matplotlib", "agg")
    sys.modules["matplotlib.pyplot"].close("all")
    sys.modules["matplotlib"].rc_file_defaults()
get_ipython().reset()
"""


@contextlib.contextmanager
def tiny_kernel():
    """A kernel manager for tiny runs to share, ``execute(path, km=km)`` each: the first run starts
    the kernel; it is shut down on leaving."""
    from jupyter_client import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="python3")
    try:
        yield km
    finally:
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)


def _reset(km):
    client = km.blocking_client()
    client.start_channels()
    try:
        client.execute(_RESET, store_history=False)
        reply = client.get_shell_msg(timeout=60)["content"]
    finally:
        client.stop_channels()
    if reply["status"] != "ok":
        raise RuntimeError(f"resetting the kernel: {reply.get('ename')}: {reply.get('evalue')}")


def execute(path, full=False, km=None):
    """Run the notebook at ``path``, tiny unless ``full``; return it with its outputs. It runs in a
    fresh kernel, or, tiny only, in ``km`` from tiny_kernel(), reset first. Raises nbclient's
    CellExecutionError, naming the cell, on any failure."""
    from nbclient import NotebookClient

    if full and km is not None:  # a committed run owes its reader a fresh kernel
        raise ValueError("a full run gets a kernel of its own: pass no km")
    env = dict(os.environ, ZOO_NOTEBOOK_TINY="0" if full else "1", TF_CPP_MIN_LOG_LEVEL="3")
    if full:  # the kernel's inline backend: the pictures go into the outputs
        env.pop("MPLBACKEND", None)
    else:  # pictures drawn and dropped
        env.setdefault("MPLBACKEND", "Agg")
    if "ZOO_SOURCE" not in env:  # else the first cell installs zoo from there, as on Colab
        env["PYTHONPATH"] = ROOT
    notebook = nbformat.read(path, as_version=4)
    if km is not None and km.has_kernel:
        _reset(km)
    client = NotebookClient(notebook, km=km, timeout=None if full else 600, kernel_name="python3",
                            resources={"metadata": {"path": HERE}})  # fmt: skip
    try:
        client.execute(env=env)  # starts km's kernel with env if it has none
    except BaseException:
        if km is not None:  # it may be dead or still busy with the cell: a new one for the next
            run_sync(km.restart_kernel)(now=True)
        raise
    finally:
        if km is not None and client.kc is not None:  # nbclient leaves open what it does not own
            client.kc.stop_channels()
    return notebook


# TensorFlow's C++ start-up lines (absl logging, before any Python setting can silence them).
_TF_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl|[IWE]\d{4} \d\d:|To enable the following instr).*\n?",
    re.M)


def without_tf_log_lines(notebook):
    """The notebook without TensorFlow's C++ log lines in its stderr outputs."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            for output in cell.outputs:
                if output.output_type == "stream" and output.name == "stderr":
                    output.text = _TF_LOG_LINE.sub("", output.text)
            cell.outputs = [o for o in cell.outputs
                            if not (o.output_type == "stream" and not o.text)]  # fmt: skip
    return notebook


def with_run_time(notebook, seconds):
    """The first cell's run-time line, from this run (the notebook's time on 2 CPU cores)."""
    line = (f"**Run time:** about {max(1, round(seconds / 60))} min on a CPU runtime "
            "(measured on 2 cores with `make notebooks-full`).")
    first = notebook.cells[0]
    first.source = re.sub(r"^\*\*Run time:\*\*.*$", line, first.source, flags=re.M)
    return notebook


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebook)")
    parser.add_argument("--full", action="store_true", help="at full size (default: tiny)")
    parser.add_argument("--write", action="store_true", help="write the outputs back")
    parser.add_argument("--address", action="store_true",
                        help="only bring the badges and install cells up to date")
    args = parser.parse_args(argv)
    if args.write and not args.full:  # a reader is owed the full run's numbers and pictures
        parser.error("--write writes a full run's outputs: add --full")
    for path in args.notebooks or NOTEBOOKS:
        name = os.path.basename(path)
        if args.address:
            notebook = nbformat.read(path, as_version=4)
        else:
            start = time.monotonic()
            notebook = execute(path, full=args.full)
            seconds = time.monotonic() - start
            print(f"{name}: ran in {seconds:.0f} s", flush=True)
            if args.full:
                with_run_time(notebook, seconds)
            without_tf_log_lines(notebook)
        if args.write or args.address:
            nbformat.write(with_address(notebook, name), path)


if __name__ == "__main__":
    sys.exit(main())
