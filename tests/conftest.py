import os

# Quiet TensorFlow's start-up chatter; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# XLA compiles the decoding loops on the CPU (here and in the subprocesses, which inherit the
# environment): LLVM's optimisation of those programs costs more than it saves at test sizes.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()

# Under pytest-xdist each worker gets its share of the cores for TensorFlow's thread pools (here
# and in its subprocesses): more threads than cores only spin and preempt the other worker.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1:
    _THREADS = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_name, _THREADS)

# TensorFlow and Keras leave several hundred thousand long-lived objects after import. Freezing
# them keeps every garbage collection (the automatic ones while graphs are traced, and the
# several that pytest runs at exit) from walking them again; it saved about a third of a short
# training test's time here.
import gc  # noqa: E402

import keras  # noqa: E402, F401
import pytest  # noqa: E402
import tensorflow  # noqa: E402, F401

# Grappler, TensorFlow's graph optimizer, rewrites every traced function before its first run;
# at test sizes, where each function runs a few times, that costs more than it saves (11 % of
# the CPU time of the decoding, export and tagger tests here). It is meant to leave results
# unchanged, and the subprocesses that serve exported SavedModels still run it, as users do.
tensorflow.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

gc.freeze()


# pytest-xdist hands out work units in collection order, each to the next idle worker;
# --no-loadscope-reorder (pyproject.toml) keeps that order, which xdist otherwise replaces by
# the units' test counts. A unit is a file (--dist loadgroup with the group below), except that
# the files sharing a package- or session-scoped fixture of a conftest (the exported translator
# of tests/export, the trained copy model of tests/decoding) form one unit, so that one worker
# builds that fixture instead of both. The longest files go first, so that the run does not end
# with one of them running alone; the others keep their order. From the per-file times of a
# full run (longest first); a file missing here only runs later.
LONGEST_FIRST = (
    "tests/test_notebooks.py",
    "tests/layers/test_layers_on_jax.py",
    "tests/models/test_translator_options.py",
    "tests/decoding/test_beam.py",
    "tests/export/test_tagger_serving.py",
    "tests/export/test_translator_serving.py",
    "tests/test_cli.py",
    "tests/training/test_kill_and_resume.py",
    "tests/decoding/test_translate_nat.py",
    "tests/training/test_train_tagger.py",
    "tests/training/test_train.py",
    "tests/export/test_nat_serving.py",
    "tests/training/test_distillation.py",
    "tests/models/test_tagger.py",
    "tests/decoding/test_translate.py",
    "tests/tasks/test_nat_task.py",
    "tests/training/test_distributed.py",
    "tests/export/test_shipped_serving.py",
    "tests/decoding/test_tagging.py",
    "tests/layers/test_blocks.py",
)


def _shared_fixture_folder(item):
    """The conftest folder of a package- or session-scoped fixture the test uses, if any."""
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        fixture = definitions[-1]  # the one the test gets; the others are overridden
        if fixture.scope in ("package", "session") and fixture.baseid not in ("", "tests"):
            return fixture.baseid
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook reads the marks
def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    units = {}  # file -> its work unit: a whole file goes where its shared fixture is built
    for item in items:
        path = item.nodeid.split("::")[0]
        units[path] = units.get(path) or _shared_fixture_folder(item)
    for item in items:
        path = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(units[path] or path))
