"""Where beam search's time goes: the shipped translator at 64 sentences and 4 beams (issue 67).

The search runs under XLA as one program, which a Python profiler cannot see into. So each part
of one step is compiled alone, on the shapes of a real step (256 rows; the caches sized, as
translate sizes them, for the batch's padded source), and timed; then the whole searches, per
step, on the same sentences:

- the decoder step (its blocks, and the tied output projection over the vocabulary), and that
  projection alone;
- the choice of beam_search: log-softmax over the vocabulary and the top 2K of K * V per
  sentence; and the top 2K of each beam's V first, then of the 2K * K survivors;
- the reorder of the self-attention caches by parent beam, as every step does;
- greedy search and beam search, whole, and what XLA's CPU runtime spent on each kind of its
  operations there (TensorFlow's profiler traces each one; the kinds are XLA's names: MatMul,
  custom-call for top-k, gather for the caches' reorder, multiply-reduce for attention over the
  cache, ...).

    python benchmarks/studies/beam_profile.py [--repeats 50]
"""

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time

from zoo_cli import quiet_native_logs

quiet_native_logs()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import zoo  # noqa: E402, F401
from zoo.data import load_multi30k  # noqa: E402
from zoo.decoding import beam_search, greedy_search, output_length  # noqa: E402
from zoo.decoding.beam import _top_candidates  # noqa: E402
from zoo.decoding.search_helpers import mask_padding_logits, tile_for_beams  # noqa: E402
from zoo.models.translator import step_and_caches  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEAMS = 4


def timed(function, *args, repeats):
    """Median seconds of ``function(*args)`` (XLA-compiled, run once first)."""
    compiled = tf.function(function, jit_compile=True, autograph=False)
    tf.nest.map_structure(np.asarray, compiled(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.map_structure(np.asarray, compiled(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def xla_kinds(function, *args, runs=3):
    """ms per run of each kind of XLA operation in ``function(*args)`` (compiled already), from
    TensorFlow's profiler trace: XLA's CPU runtime marks each operation it runs."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    folder = tempfile.mkdtemp(prefix="zoo-profile-")
    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3)
    tf.profiler.experimental.start(folder, options=options)
    for _ in range(runs):
        tf.nest.map_structure(np.asarray, function(*args))
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)[-1], "rb") as f:
        space.ParseFromString(f.read())
    kinds = collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            if "Eigen" not in line.name:  # XLA's threads, not TensorFlow's own
                continue
            for event in line.events:
                name = names.get(event.metadata_id, "?")
                if name != "ThunkExecutor::Execute":  # the whole program, not an operation
                    kinds[re.sub(r"\.\d+$", "", name)] += event.duration_ps / 1e9 / runs
    return kinds


def top_2k(log_p, alive_log_p, k):
    """beam_search's choice before the two-stage top-k: log-softmax, then the top 2K of K * V
    per sentence."""
    vocab = ops.shape(log_p)[-1]
    log_p = ops.log_softmax(mask_padding_logits(log_p), axis=-1)
    log_p = ops.reshape(log_p, (-1, k, vocab)) + ops.expand_dims(alive_log_p, 2)
    return ops.top_k(ops.reshape(log_p, (-1, k * vocab)), 2 * k)


def top_2k_in_two(log_p, alive_log_p, k):
    """beam_search's choice now: log-softmax, then the top 2K of each beam's V, then of those."""
    log_p = ops.log_softmax(mask_padding_logits(log_p), axis=-1)
    return _top_candidates(log_p, alive_log_p, 2 * k)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    translator = keras.models.load_model(
        os.path.join(ROOT, "saved_models", "translator-en-de", "model.keras"))
    backbone, tokenizer = translator.backbone, translator.preprocessor.tokenizer
    sentences = sorted(s for s, _ in load_multi30k("test2016"))[: args.sentences]
    ids = tokenizer.tokenize(tf.constant(sentences[:64]))
    source = ids.to_tensor(0)
    length = output_length(source, translator.preprocessor.max_length)
    print(f"64 sentences, source width {source.shape[1]}, caches for {length} steps, "
          f"{BEAMS} beams: {64 * BEAMS} rows", flush=True)

    step, caches = step_and_caches(backbone, source, length)
    caches = tile_for_beams(caches, BEAMS)
    tokens = tf.fill((64 * BEAMS, 1), tokenizer.bos_id)
    index = tf.constant(length // 2)  # the cost does not depend on the step: the caches are full
    logits, _ = step(tokens, caches, index)
    alive = tf.zeros((64, BEAMS))
    rows = tf.random.shuffle(tf.range(64 * BEAMS))
    embedding = backbone.get_layer("embedding").token_embedding.embeddings
    hidden = tf.random.normal((64 * BEAMS, embedding.shape[1]))

    def reorder(caches):
        return tf.nest.map_structure(lambda c: tf.gather(c, rows), caches["blocks"])

    parts = {
        "decoder step (blocks and projection)": timed(step, tokens, caches, index,
                                                     repeats=args.repeats),
        "tied output projection alone": timed(lambda h: ops.matmul(h, ops.transpose(embedding)),
                                              hidden, repeats=args.repeats),
        "log-softmax and top 2K of K*V": timed(lambda lp: top_2k(lp, alive, BEAMS), logits,
                                                repeats=args.repeats),
        "log-softmax and top 2K in two stages": timed(
            lambda lp: top_2k_in_two(lp, alive, BEAMS), logits, repeats=args.repeats),
        "self-attention caches reordered": timed(reorder, caches, repeats=args.repeats),
    }
    step_time = parts["decoder step (blocks and projection)"]
    for name, seconds in parts.items():
        print(f"| {name} | {seconds * 1e3:.2f} ms | {seconds / step_time:.2f} of a step |")

    # The two-stage top-k chooses what the one-stage does (the same values).
    one = top_2k(logits, alive, BEAMS)
    two = top_2k_in_two(logits, alive, BEAMS)
    np.testing.assert_allclose(np.asarray(one[0]), np.asarray(two[0]), rtol=1e-6)

    def search(method):
        def run(source):
            max_length = output_length(source, translator.preprocessor.max_length)
            step, caches = step_and_caches(backbone, source, max_length)
            if method == "greedy":
                return greedy_search(step, caches, max_length, bos_id=tokenizer.bos_id,
                                     eos_id=tokenizer.eos_id)  # fmt: skip
            return beam_search(step, caches, max_length, beam_size=BEAMS,
                               bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)[0]  # fmt: skip
        return run

    for method in ("greedy", "beam"):
        seconds = timed(search(method), source, repeats=max(3, args.repeats // 10))
        print(f"| {method} search of the 64 sentences, whole | {seconds * 1e3:.1f} ms | "
              f"{seconds / length * 1e3:.2f} ms per step of at most {length} |")
        compiled = tf.function(search(method), jit_compile=True, autograph=False)
        kinds = xla_kinds(compiled, source)
        total = sum(kinds.values())
        print(f"{method}: XLA's operations, {total:.0f} ms per search in all (both threads):")
        for kind, ms in kinds.most_common(10):
            print(f"| {kind} | {ms:.1f} ms | {100 * ms / total:.0f}% |")


if __name__ == "__main__":
    sys.exit(main())
