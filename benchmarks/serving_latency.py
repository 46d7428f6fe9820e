"""Served latency from a fresh load: one fixed stream of requests against the shipped translator's
SavedModel, with and without its warm-up file replayed first, through the `_xla` and the plain
signatures.

The stream: 1,000 requests drawn with a seed, each of a batch size from 1 to 64 (log-uniform: as
many requests of 1-2 sentences as of 33-64) and of Multi30k test2016 sentences drawn at random
(every length the set has). Each configuration runs in a process of its own, with XLA's dumps
(``--xla_dump_to``) counting the programs it compiles: it loads the SavedModel with
``tf.saved_model.load``, replays ``assets.extra/tf_serving_warmup_requests`` as TF Serving does
at load (or not), then sends each request twice in a row. The first call is the request's
latency; the second, the same request once its program exists, is its reference. Reported: p50,
p99 and max latency, the compiles during the stream, and the requests slower than 1.5x their
reference plus 20 ms (issue 55's target after warm-up: no compile, no such request).

The `_xla` rows use an export of the shipped model made with ``--warmup-xla`` (written to a
temporary folder first): its file warms every program of both `_xla` signatures.

    python benchmarks/serving_latency.py [--requests 1000] [--no-record]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)

MODEL = os.path.join(ROOT, "saved_models", "translator-en-de")
TITLE = "Served latency: a stream of 1,000 requests from a fresh load (the shipped translator)"
SEED = 55
# (row name, signature, replay the warm-up file, the export: "shipped" or "xla")
CONFIGURATIONS = [
    ("translate_greedy_xla, warm-up", "translate_greedy_xla", True, "xla"),
    ("translate_greedy_xla, no warm-up", "translate_greedy_xla", False, "xla"),
    ("translate_greedy, warm-up", "translate_greedy", True, "shipped"),
    ("translate_greedy, no warm-up", "translate_greedy", False, "shipped"),
]
SLACK = (1.5, 20.0)  # a request within 1.5x its second sending plus 20 ms


def stream(count, seed=SEED):
    """``count`` requests: lists of test2016 sentences, batch sizes 1-64 log-uniform."""
    import numpy as np

    from zoo.data import load_multi30k

    sentences = [source for source, _ in load_multi30k("test2016")]
    rng = np.random.default_rng(seed)
    sizes = np.minimum(np.floor(2 ** rng.uniform(0, 6.0001, count)).astype(int), 64)
    return [[sentences[i] for i in rng.integers(0, len(sentences), size)] for size in sizes]


def run_configuration(folder, signature, warmup, count, dump):
    """In this process: load, warm up or not, send the stream; print a JSON report."""
    import resource
    import time

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops)

    from tests.export.test_warmup import read_warmup_requests

    def compiled():  # XLA dumps each program it compiles as module_NNNN.*
        return len({os.path.basename(p).split(".")[0]
                    for p in glob.glob(os.path.join(dump, "module_*"))})  # fmt: skip

    start = time.monotonic()
    loaded = tf.saved_model.load(folder)
    warm_seconds = 0.0
    if warmup:
        begin = time.monotonic()
        for name, inputs in read_warmup_requests(folder):
            specs = loaded.signatures[name].structured_input_signature[1]
            loaded.signatures[name](
                **{k: tf.constant(v, specs[k].dtype) for k, v in inputs.items()})
        warm_seconds = time.monotonic() - begin
    load_seconds = time.monotonic() - start - warm_seconds
    function = loaded.signatures[signature]
    before = compiled()
    first, again, compiling = [], [], 0
    for batch in stream(count):
        inputs = tf.constant(batch)
        for times in (first, again):
            began = compiled() if times is first else None
            tick = time.perf_counter()
            function(inputs=inputs)["translations"].numpy()
            times.append(1000 * (time.perf_counter() - tick))
            if began is not None and compiled() > began:
                compiling += 1
    print(json.dumps({
        "load_s": load_seconds, "warmup_s": warm_seconds, "first_ms": first, "again_ms": again,
        "compiles": compiled() - before, "compiling_requests": compiling, "warm_programs": before,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }))  # fmt: skip


def percentile(values, q):
    import numpy as np

    return float(np.percentile(values, q))


def row_of(name, report):
    first, again = report["first_ms"], report["again_ms"]
    slow = sum(f > SLACK[0] * a + SLACK[1] for f, a in zip(first, again))
    return [
        name, f"{report['warmup_s']:.1f}" if report["warmup_s"] else "-",
        report["warm_programs"], report["compiles"], report["compiling_requests"],
        f"{percentile(first, 50):.0f}", f"{percentile(first, 99):.0f}", f"{max(first):.0f}",
        f"{percentile(again, 50):.0f}", f"{max(again):.0f}", slow, report["peak_mb"],
    ]  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--only", help="run the configurations whose name contains this")
    parser.add_argument("--configuration", help=argparse.SUPPRESS)  # the child process's
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.configuration:
        _, signature, warmup, _ = next(c for c in CONFIGURATIONS if c[0] == args.configuration)
        return run_configuration(args.folder, signature, warmup, args.requests, args.dump)

    from zoo.artifacts import latest_serving_path

    print(common.machine_description(), flush=True)
    work = tempfile.mkdtemp(prefix="serving_latency_")
    exported = os.path.join(work, "xla")
    subprocess.run([sys.executable, os.path.join(ROOT, "zoo_cli.py"), "export", "translator",
                    "--workdir", MODEL, "--output", exported, "--warmup-xla"],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    folders = {"shipped": latest_serving_path(MODEL), "xla": latest_serving_path(exported)}
    rows = []
    for name, _, _, export in CONFIGURATIONS:
        if args.only and args.only not in name:
            continue
        dump = os.path.join(work, f"dump{len(rows)}")
        env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump}", PYTHONPATH=ROOT)
        result = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--configuration", name,
             "--folder", folders[export], "--dump", dump, "--requests", str(args.requests)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            sys.exit(f"{name} failed:\n{result.stderr[-3000:]}")
        rows.append(row_of(name, json.loads(result.stdout.strip().splitlines()[-1])))
        print(" | ".join(str(cell) for cell in rows[-1]), flush=True)
    header = ["signature, start", "warm-up s", "programs warm", "compiles in stream",
              "requests that compiled", "p50 ms", "p99 ms", "max ms", "again p50 ms",
              "again max ms", f"over {SLACK[0]}x again + {SLACK[1]:.0f} ms", "peak MB"]  # fmt: skip
    print("\n".join(common.markdown_table(header, rows)))
    if not args.no_record and not args.only:
        sizes = [len(batch) for batch in stream(args.requests)]
        notes = [
            f"{args.requests} requests (seed {SEED}), {sum(sizes)} sentences, batch sizes "
            f"{min(sizes)}-{max(sizes)} (median {sorted(sizes)[len(sizes) // 2]}); each sent "
            "twice in a row: 'again' is the second sending",
            "programs warm: the XLA programs compiled by load and warm-up; compiles: those "
            "the stream then met (counted from `--xla_dump_to`)",
            "peak MB: the process's peak resident memory, at the end of the stream",
        ]
        command = "python benchmarks/serving_latency.py" + (
            f" --requests {args.requests}" if args.requests != 1000 else "")
        common.publish_table(TITLE, command, header, rows, notes)


if __name__ == "__main__":
    main()
