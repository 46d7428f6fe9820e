import os

# Quiet TensorFlow's start-up chatter; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# XLA compiles the decoding loops on the CPU (here and in the subprocesses, which inherit the
# environment): LLVM's optimisation of those programs costs more than it saves at test sizes.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()

# TensorFlow and Keras leave several hundred thousand long-lived objects after import. Freezing
# them keeps every garbage collection (the automatic ones while graphs are traced, and the
# several that pytest runs at exit) from walking them again; it saved about a third of a short
# training test's time here.
import gc  # noqa: E402

import keras  # noqa: E402, F401
import tensorflow  # noqa: E402, F401

gc.freeze()
