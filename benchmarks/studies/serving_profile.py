"""What one decoding step of the shipped translator's plain signatures runs: the ops of the
search's while-loop body, per kind, counted two ways.

- graph: the nodes of the body function in the SavedModel's function library, as exported
  (Const, NoOp and Identity left out of the total);
- run: the ops that TensorFlow's executor ran per step, after Grappler and the lowering of the
  loop, read from a profiler trace of one sentence at batch 1, with their time per step (the
  profiler's own overhead included: compare kinds with each other, not with other tables).

``translate_greedy`` is the greedy search, ``serving_default`` beam search with 4 beams.

    python benchmarks/studies/serving_profile.py [--before FOLDER] [--no-record] [--top 20]

``--before`` profiles another model folder too (an earlier export, e.g. from ``git show``) and
notes its totals under the table.
"""

import argparse
import collections
import glob
import os
import re
import sys
import tempfile

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402  (benchmarks/common.py)

from zoo.artifacts import latest_serving_path  # noqa: E402
from zoo.data import load_multi30k  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "saved_models", "translator-en-de")
TITLE = "Serving profile: the ops of one decoding step of the translator's plain signatures"
SIGNATURES = {"greedy": "translate_greedy", "beam 4": "serving_default"}
SENTENCE = "A dog is running in the snow."
BOOKKEEPING = ("Const", "NoOp", "Identity")
LOOP_NODE = re.compile(r"/while(_\d+)?/body/")  # a node of a while loop's body, in a trace


def loop_body(function):
    """The FunctionDef of the search's while-loop body in a signature: the largest innermost
    loop (an outer one goes over the parts of a batch, ``zoo.decoding.bucketed``; exports
    before it had a small loop for the batch's bucket)."""
    graph = function.graph.as_graph_def()
    library = {f.signature.name: f for f in graph.library.function}
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    loops = ("While", "StatelessWhile")
    bodies = {n.attr["body"].func.name for n in nodes if n.op in loops}
    innermost = [name for name in bodies
                 if not any(n.op in loops for n in library[name].node_def)]  # fmt: skip
    if not innermost:
        raise ValueError("Expected a while loop, found none.")
    return max((library[name] for name in innermost), key=lambda body: len(body.node_def))


def graph_counts(function):
    """op kind -> nodes of the loop body as exported."""
    return collections.Counter(node.op for node in loop_body(function).node_def)


def run_counts(function, inputs):
    """(op kind -> ops run per step, op kind -> microseconds per step, steps) of one call."""
    function(inputs=inputs)  # warm
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    function(inputs=inputs)
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    runs, picoseconds, per_node = collections.Counter(), collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name  # "node/path:OpKind"
                if not LOOP_NODE.search(name) or ":" not in name:
                    continue
                node, kind = name.rsplit(":", 1)
                runs[kind] += 1
                picoseconds[kind] += event.duration_ps
                per_node[node] += 1
    steps = max(per_node.values())  # every node of the body runs once per step
    return (
        {kind: count / steps for kind, count in runs.items()},
        {kind: ps / 1e6 / steps for kind, ps in picoseconds.items()},
        steps,
    )


def sentences(batch):
    """What one request holds: :data:`SENTENCE` alone, or the first ``batch`` sentences of
    Multi30k test2016."""
    if batch == 1:
        return [SENTENCE]
    return [source for source, _ in load_multi30k("test2016")[:batch]]


def profile(path, batch=1):
    """name -> (graph counts, run counts per step, microseconds per step, steps)."""
    served = tf.saved_model.load(path)
    inputs = tf.constant(sentences(batch))
    results = {}
    for name, signature in SIGNATURES.items():
        function = served.signatures[signature]
        results[name] = (graph_counts(function),) + run_counts(function, inputs)
    return results


def totals(results):
    """One line of totals per signature: real graph nodes, ops run and microseconds per step."""
    parts = []
    for name, (graph, runs, micros, _) in results.items():
        real = sum(n for k, n in graph.items() if k not in BOOKKEEPING)
        parts.append(
            f"{name}: {real} graph ops ({sum(graph.values())} nodes), {sum(runs.values()):.0f} "
            f"run per step, {sum(micros.values()):.0f} µs per step"
        )
    return "; ".join(parts)


def table(results, top):
    """Rows per op kind (the ``top`` most run, then the rest summed), and the totals."""
    names = list(results)
    run_total = collections.Counter()
    for _, runs, _, _ in results.values():
        run_total.update(runs)
    kinds = sorted(run_total, key=lambda k: -sum(results[n][2].get(k, 0) for n in names))
    shown = kinds[:top]

    def cells(kinds_in_row):
        row = []
        for name in names:
            graph, runs, micros, _ = results[name]
            row += [
                str(sum(graph.get(k, 0) for k in kinds_in_row)),
                f"{sum(runs.get(k, 0) for k in kinds_in_row):.0f}",
                f"{sum(micros.get(k, 0) for k in kinds_in_row):.0f}",
            ]
        return row

    rows = [[kind] + cells([kind]) for kind in shown]
    rest = kinds[top:]
    rows.append([f"the other {len(rest)} kinds run"] + cells(rest))
    totals = ["all (graph: without Const, NoOp, Identity)"]
    for name in names:
        graph, runs, micros, _ = results[name]
        real = sum(n for k, n in graph.items() if k not in BOOKKEEPING)
        totals += [f"{real} of {sum(graph.values())}", f"{sum(runs.values()):.0f}",
                   f"{sum(micros.values()):.0f}"]  # fmt: skip
    rows.append(totals)
    header = ["op kind"]
    for name in names:
        header += [f"{name}: graph", f"{name}: run per step", f"{name}: µs per step"]
    return header, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL, help="a model folder with serving/<version>")
    parser.add_argument("--before", help="another model folder, profiled for comparison")
    parser.add_argument("--top", type=int, default=20, help="op kinds shown one by one")
    parser.add_argument("--batch", type=int, default=1,
                        help="sentences per request (above 1: the first of Multi30k test2016)")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    print(common.machine_description(), flush=True)
    path = latest_serving_path(args.model)
    results = profile(path, args.batch)
    header, rows = table(results, args.top)
    print("\n".join(common.markdown_table(header, rows)))
    steps = ", ".join(f"{name} {results[name][3]}" for name in results)
    print(f"steps: {steps}")
    before = None
    if args.before:
        before_path = latest_serving_path(args.before)
        before = f"before (`{before_path}`): {totals(profile(before_path, args.batch))}"
        print(before)
    if not args.no_record:
        notes = [
            f"model: `{os.path.relpath(path, ROOT)}`; one request of "
            + (f"{SENTENCE!r}" if args.batch == 1 else f"the first {args.batch} sentences of "
               "Multi30k test2016") + f" ({steps} steps)",
            "graph: nodes of the while-loop body in the SavedModel's function library; run: ops "
            "the executor ran per step (after Grappler and the loop's lowering), from a profiler "
            "trace, with their time (the profiler's overhead included)",
        ]
        if before:
            notes.append(before)
        command = "python benchmarks/studies/serving_profile.py"
        if args.batch != 1:
            command += f" --batch {args.batch}"
        if args.before:
            command += " --before FOLDER"
        common.publish_table(f"{TITLE} (batch {args.batch})", command, header, rows, notes)


if __name__ == "__main__":
    main()
