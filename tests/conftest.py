import os

# Quiet TensorFlow's start-up chatter; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
