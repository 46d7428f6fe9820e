"""What the GPU sweeps share (translator_sweep_gpu.py, tagger_sweep_gpu.py): rows by name, each
trained in its own process, on a machine with JAX but no TensorFlow.

A sweep's ``run`` step starts one process per row (``launch``), ``--parallel`` at a time on the
one GPU; each row's process blocks the modules the GPU machine lacks (``block_absent_modules``),
so that a run here proves it needs none of them.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

# What a GPU machine lacks (TensorFlow, tf-text), and what a run has no use for; a run refuses to
# import them.
ABSENT = ("tensorflow", "tensorflow_text", "sentencepiece", "sacrebleu", "pandas", "h5py")


HISTORY = "history.json"  # OUT/<row>/: the row's epochs, timings, settings (and scores)
RUN = "run.json"  # OUT/: the run step's settings, wall time and exit codes


def slug(name):
    """A folder name for a row name (as benchmarks/common.slug, which imports TensorFlow)."""
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").replace("--", "-")


def selected(rows, names):
    """The rows named (by name or folder name), in ``rows`` order; all of them by default."""
    if not names:
        return list(rows)
    by_slug = {slug(name): name for name in rows}
    unknown = [n for n in names if n not in rows and n not in by_slug]
    if unknown:
        sys.exit(f"Unknown rows {unknown}; the rows are: {list(rows)} (or their folder names "
                 f"{list(by_slug)}).")
    chosen = {by_slug.get(n, n) for n in names}
    return [name for name in rows if name in chosen]


def block_absent_modules(script):
    """Make importing what a GPU machine lacks fail, as if it were not installed."""
    loaded = sorted(m for m in sys.modules if m.partition(".")[0] in ABSENT)
    if loaded:
        raise RuntimeError(f"already imported, so the run could not prove it needs none: {loaded}")

    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ABSENT:
                raise ModuleNotFoundError(f"No module named {name!r} ({script} blocks it: the "
                                          "GPU machine has none)", name=name)

    sys.meta_path.insert(0, Absent())


def assert_nothing_absent_imported():
    leaked = sorted(m for m in sys.modules if m.partition(".")[0] in ABSENT)
    assert not leaked, f"the run imported {leaked}"


def launch(script, folder, out, rows, forwarded, parallel):
    """Run ``script row FOLDER OUT --rows NAME *forwarded`` for each row, ``parallel`` at a
    time; return ``({name: exit code}, wall seconds)``."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    began = time.monotonic()
    waiting, running, codes = list(rows), {}, {}
    while waiting or running:
        while waiting and len(running) < parallel:
            name = waiting.pop(0)
            command = [sys.executable, os.path.abspath(script), "row", folder, out,
                       "--rows", name, *forwarded]
            running[name] = subprocess.Popen(command, env=env)
            print(f"started {name!r} at {time.monotonic() - began:.0f} s", flush=True)
        time.sleep(1)
        for name, process in list(running.items()):
            if process.poll() is not None:
                codes[name] = process.returncode
                del running[name]
                print(f"finished {name!r} (exit {process.returncode}) at "
                      f"{time.monotonic() - began:.0f} s", flush=True)
    return codes, time.monotonic() - began


def start_row(script, rows, names):
    """In a row's process: block the absent modules, load Keras on JAX and zoo's layers; return
    the row's name and its tag for log lines."""
    block_absent_modules(script)
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before zoo imports Keras
    import keras

    import zoo  # noqa: F401  (registers the layers)

    assert keras.backend.backend() == "jax", "run needs KERAS_BACKEND=jax"
    (name,) = selected(rows, names)
    return name, f"[{slug(name)}]"


def bucket_spec(batch_tokens, max_length, bucket_width):
    """zoo.data.bucket_spec (whose module imports TensorFlow): bounds and batch sizes."""
    upper = list(range(bucket_width, max_length, bucket_width)) + [max_length]
    return upper, [batch_tokens // u for u in upper]


def training_module(name):
    """``zoo.training.<name>`` without running ``zoo/training/__init__.py``: that imports
    ``train()`` and ``distill()``, whose modules import TensorFlow (strategy.py, and
    distillation.py through zoo.data); the losses, metrics, optimizer and schedule do not."""
    import importlib
    import importlib.util

    if "zoo.training" not in sys.modules:  # the package, its __path__ only
        spec = importlib.util.find_spec("zoo.training")
        sys.modules["zoo.training"] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"zoo.training.{name}")


def average(weight_sets):
    """The mean of each weight over the sets, in float64 (zoo.training.average_weights, which
    reads .h5 files); a weight that is not floating point takes the last set's value."""
    mean = []
    for values in zip(*weight_sets):
        if np.issubdtype(values[-1].dtype, np.floating):
            total = sum(np.asarray(v, np.float64) for v in values)
            mean.append((total / len(values)).astype(values[-1].dtype))
        else:
            mean.append(values[-1])
    return mean


def write_json(path, value):
    """Write atomically: a row killed mid-write leaves the last whole file."""
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)


def row_history(out, name):
    """The history that row ``name`` wrote in OUT, or None if it wrote none."""
    path = os.path.join(out, slug(name), HISTORY)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def finished_histories(out, rows):
    """``[(name, history)]`` of the rows of ``rows`` that finished in OUT, in that order; a row
    that began but did not finish is named on stdout and left out."""
    finished = []
    for name in rows:
        history = row_history(out, name)
        if history is None:
            continue
        if not history["finished"]:
            print(f"{out}: {name}: not finished ({len(history['epochs'])} epochs); left out")
            continue
        finished.append((name, history))
    return finished


def run_settings(out):
    """What the run step wrote to OUT/run.json; {} if it wrote none."""
    path = os.path.join(out, RUN)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def device_line():
    """The GPU (or CPU) JAX runs on, with the JAX and Keras versions."""
    import jax
    import keras

    gpu = jax.devices()[0]
    return f"{gpu.device_kind} ({gpu.platform}), JAX {jax.__version__}, Keras {keras.__version__}"
