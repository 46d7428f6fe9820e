import os

# Quiet TensorFlow's start-up chatter; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# XLA compiles the decoding loops on the CPU (here and in the subprocesses, which inherit the
# environment): LLVM's optimisation of those programs costs more than it saves at test sizes
# (its expensive passes off: an XLA-heavy test file takes a tenth less time).
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
).strip()

# Under pytest-xdist each worker gets its share of the cores for TensorFlow's thread pools (here
# and in its subprocesses): more threads than cores only spin and preempt the other worker.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1:
    _THREADS = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_name, _THREADS)

# TensorFlow and Keras leave several hundred thousand long-lived objects after import: no
# collection while they are made, and then frozen, as zoo/__init__.py does, so that no later
# collection walks them again (the automatic ones while graphs are traced, and the several that
# pytest runs at exit); it saved about a third of a short training test's time here.
import gc  # noqa: E402

gc.disable()
import keras  # noqa: E402, F401
import tensorflow  # noqa: E402, F401

gc.enable()
gc.freeze()


# pytest-xdist hands out whole files (--dist loadfile) in collection order, each to the next
# idle worker; --no-loadscope-reorder (pyproject.toml) keeps that order, which xdist otherwise
# replaces by the files' test counts. The longest files go first, so that the run does not end
# with one of them running alone; the others keep their order. Ordered by each file's CPU time
# in a full run, its subprocesses' included (its wall time there depends on its neighbour); a
# file missing here only runs later.
LONGEST_FIRST = (
    "tests/test_notebooks.py",
    "tests/training/test_distributed.py",
    "tests/layers/test_layers_on_jax.py",
    "tests/training/test_kill_and_resume.py",
    "tests/test_cli_data.py",
    "tests/models/test_translator_options.py",
    "tests/export/test_translator_serving.py",
    "tests/export/test_translator_options.py",
    "tests/export/test_shipped_serving.py",
    "tests/decoding/test_beam.py",
    "tests/test_cli_treebank.py",
    "tests/tasks/nat/test_serving.py",
    "tests/models/test_tagger_task.py",
    "tests/decoding/test_translate_nat.py",
    "tests/tasks/transliteration/test_task.py",
    "tests/models/test_tagger_serving.py",
    "tests/tasks/nat/test_ctc.py",
    "tests/models/test_translator_task.py",
    "tests/training/test_train_tagger.py",
    "tests/training/test_warm_start.py",
    "tests/tasks/nat/test_task.py",
    "tests/layers/test_blocks.py",
    "tests/benchmarks/test_attention_benchmarks.py",
    "tests/tasks/nat/test_glancing.py",
    "tests/training/test_train.py",
    "tests/decoding/test_sampling.py",
    "tests/decoding/test_translate.py",
    "tests/layers/test_strided_attention.py",
    "tests/export/test_compare.py",
    "tests/models/test_nat_task.py",
    "tests/layers/test_crf.py",
    "tests/data/test_translation_pipeline.py",
    "tests/layers/test_chunked_attention.py",
    "tests/export/test_mixed_precision_export.py",
    "tests/decoding/test_greedy.py",
)


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
