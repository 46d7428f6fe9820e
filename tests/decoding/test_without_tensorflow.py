"""The searches are keras.ops only: zoo.decoding imports, and decodes, where TensorFlow is not
installed (a GPU machine with JAX alone). Only translate() and its frame need TensorFlow."""

import subprocess
import sys

from tests.harness import REPO_ROOT

SCRIPT = r"""
import sys

class NoTensorFlow:  # as if TensorFlow and tf-text were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError(f"No module named {name!r}")

sys.meta_path.insert(0, NoTensorFlow())

import numpy as np
from keras import ops

from zoo.decoding import greedy_search, nat_search
from zoo.special_ids import EOS_ID

def step(tokens, caches, index):  # token 5, then EOS at the third step
    ids = ops.where(index >= 2, EOS_ID, 5) * ops.ones((ops.shape(tokens)[0],), "int32")
    return ops.one_hot(ids, 8), caches

print(np.asarray(greedy_search(step, {"x": ops.zeros((1, 1))}, max_length=5)).tolist())
decode = lambda target_in: ops.one_hot(ops.full_like(target_in, 4), 6) * 5.0
tokens, _ = nat_search(decode, max_length=4, lengths=[3], iterations=2)
print(np.asarray(tokens).tolist())
print("tensorflow" in sys.modules)
"""


def test_the_searches_run_without_tensorflow():
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": REPO_ROOT,
           "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:3] == ["[[5, 5, 3, 0, 0]]", "[[4, 4, 4, 0]]", "False"]
