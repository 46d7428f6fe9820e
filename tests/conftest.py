import os

# Quiet TensorFlow's start-up chatter; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# XLA compiles the decoding loops on the CPU (here and in the subprocesses, which inherit the
# environment): LLVM's optimisation of those programs costs more than it saves at test sizes.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()
