"""Replay a SavedModel's TF Serving warm-up file as the server does at load, and time it.

Loads ``<version folder>`` with ``tf.saved_model.load`` (the load time), then calls each request
of its ``assets.extra/tf_serving_warmup_requests`` in order (the warm-up time, per signature),
and reports the process's peak resident memory after it: what a server holds once warm.

    python benchmarks/warmup_replay.py saved_models/translator-en-de/serving/1
    zoo export translator --workdir saved_models/translator-en-de --output /tmp/xla --warmup-xla
    python benchmarks/warmup_replay.py /tmp/xla/serving/1
"""

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the SentencePiece ops)

from tests.export.test_warmup import read_warmup_requests  # noqa: E402


def main():
    folder = sys.argv[1]
    start = time.monotonic()
    loaded = tf.saved_model.load(folder)
    loaded_at = time.monotonic()
    seconds = {}
    for name, inputs in read_warmup_requests(folder):
        specs = loaded.signatures[name].structured_input_signature[1]
        call = time.monotonic()
        loaded.signatures[name](**{k: tf.constant(v, specs[k].dtype) for k, v in inputs.items()})
        seconds.setdefault(name, []).append(time.monotonic() - call)
    done = time.monotonic()
    print(json.dumps({
        "folder": folder,
        "load_seconds": round(loaded_at - start, 1),
        "warmup_seconds": round(done - loaded_at, 1),
        "requests": {name: len(times) for name, times in seconds.items()},
        "seconds_per_signature": {name: round(sum(times), 1) for name, times in seconds.items()},
        "peak_memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }, indent=2))


if __name__ == "__main__":
    main()
