"""Attention scaling: forward+backward time and peak memory of every attention variant, N = 256..16384.

One self-attention layer alone (batch 1, d_model 256, 4 heads of 64, the fused QKV projection
the blocks use), ``y = layer(x, training=True)`` and the gradients of ``sum(y * g)`` (``g`` a
fixed random tensor) with respect to ``x`` and every trainable weight, inside one
``tf.function`` (XLA on by default, ``--no-xla`` turns it off). Full attention is ``"mha"``;
every registered variant runs with the settings of :data:`SETTINGS` below.

Each (variant, N) is measured in a fresh subprocess, so its memory figure is its own:

- time: the median of ``--repeats`` timed calls after one warm-up (compiling) call;
- planned memory (with XLA): the compiled step's own buffer plan, "Total bytes used" of the
  memory-usage report that XLA writes when the child runs with ``--xla_dump_to`` (inputs,
  weights, gradients, every temporary at its peak liveness, constants). It is what the
  program itself needs, the same on every run, and free of what the resident set adds around
  it (the allocator's retained free memory, the runtime);
- peak resident memory: the child builds the layer and runs the compiled step once at N = 64 (every
  library, thread pool and code path is then loaded), resets the kernel's resident-set
  high-water mark (``echo 5 > /proc/self/clear_refs``) and reads its resident set
  (``VmRSS``); after the measurement at N it reads the high-water mark (``VmHWM``). The
  figure is the difference: the resident memory that size N added at its peak (inputs,
  activations, gradients, the XLA program and its buffers). TensorFlow allocates CPU tensors
  with the C allocator, so tracemalloc cannot see them; the resident set can. Where
  ``clear_refs`` is not writable, ``ru_maxrss`` minus the same baseline is used (stated in
  the output).

The sizes are swept in order, all variants at one N before the next N (so that the variants
compared at one N are measured close together in time on this shared machine), and the whole
sweep runs ``--rounds`` times (3); each figure is the median over the rounds. A variant
stops at the first N where it runs out of memory (``--memory-cap-gib``: the parent kills a
child whose resident set passes it; or TensorFlow's ResourceExhaustedError; or the kernel's
OOM killer), out of time (``--time-cap`` seconds for the measurement after start-up), or
fails; the table records where (``stopped: OOM at N=16384``) and larger N are not run.

The figures at N = 4096 against full attention (speedup = full time / variant time, memory
fraction = variant memory / full memory, both the planned and the resident figure) are checked
against the targets of issue 5 for the linear-time variants: at least 5x faster and at most
1/10 of the memory. The verdict uses the planned memory; the resident fraction is printed
beside it.

    python benchmarks/attention_scaling.py [--quick] [--variants mha local ...] [--no-xla]

``--quick`` is a smoke run (N = 256..1024, one repeat): it neither records to RESULTS.md
nor writes the committed picture unless ``--record`` / ``--png`` say so.
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import RESULTS, append_results, machine_description, markdown_table  # noqa: E402

D_MODEL, HEADS, BATCH = 256, 4, 1
LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_LENGTHS = (256, 512, 1024)
REFERENCE_LENGTH = 4096  # where the targets are checked
TARGET_SPEEDUP, TARGET_MEMORY_FRACTION = 5.0, 0.1
# Exact attention in chunks (issue 15): at most this fraction of mha's memory, at most this
# factor of its time.
EXACT = ("chunked",)
EXACT_MEMORY_FRACTION, EXACT_SLOWDOWN = 0.25, 1.3
WARMUP_LENGTH = 64  # the baseline call of every child
FULL = "mha"

# Where a setting says SEQUENCE_LENGTH, the measured length N goes (the variants with one
# weight row per position: Linformer's E and F, the dense synthesizer's output layer).
SEQUENCE_LENGTH = "N"

# The settings of every variant, for N = 256..16384 (key_dim 64). An entry "<variant>:<label>"
# is one more row: the registered variant at other settings (the trade-off of one knob).
SETTINGS = {
    "mha": {},
    "chunked": {"chunk_size": 256},  # exact; 16 key chunks at N=4096
    "local": {"window": 128},  # 2w + 1 = 257 keys per query
    "strided": {"stride": 128, "pattern": "sparse"},  # the Sparse Transformer's merged head
    "global": {"window": 128, "num_global": 8},
    "clustered": {"num_clusters": 8, "chunk_size": 128},
    "sinkhorn": {"block_size": 128},
    "linformer": {"projected_length": 256, "max_length": SEQUENCE_LENGTH},
    "linformer:k=128": {"projected_length": 128, "max_length": SEQUENCE_LENGTH},
    "performer": {"num_features": 256},  # about its default, round(64 ln 64) = 266
    "performer:m=128": {"num_features": 128},
    "performer:m=64": {"num_features": 64},
    "linear": {},
    "synthesizer": {"mode": "dense", "max_length": SEQUENCE_LENGTH},
    "aft": {},  # AFT-simple; chunk_size only matters with the causal mask
}

# How time and memory grow with N at the settings above (w, l, k, m fixed).
COMPLEXITY = {
    "mha": "O(N^2)",
    "chunked": "O(N^2) time, O(N C) memory",
    "local": "O(N w)",
    "strided": "O(N (l + N/l))",
    "global": "O(N (w + G))",
    "clustered": "O(N w)",
    "sinkhorn": "O(N b)",
    "linformer": "O(N k)",
    "performer": "O(N m)",
    "linear": "O(N)",
    "synthesizer": "O(N^2)",
    "aft": "O(N d)",
}
LINEAR_TIME = (
    "local", "global", "clustered", "sinkhorn", "linformer", "performer", "linear", "aft"
)

STOPPED = ("OOM", "time", "error")


def variant_of(entry):
    """The registered attention name of a SETTINGS entry: ``"performer:m=64"`` -> ``"performer"``."""
    return entry.split(":")[0]


def attention_kwargs(name, length, settings=None):
    """The constructor arguments of variant ``name`` at sequence length ``length``."""
    settings = SETTINGS if settings is None else settings
    return {
        key: length if value == SEQUENCE_LENGTH else value
        for key, value in settings.get(name, {}).items()
    }


# ---------------------------------------------------------------------- memory probes
def _status_kib(pid, field):
    """A ``VmRSS``/``VmHWM`` line of /proc/<pid>/status, in KiB; None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _reset_peak():
    """Reset this process's resident high-water mark; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return _status_kib("self", "VmHWM") is not None


def _peak_kib(reset_worked):
    if reset_worked:
        return _status_kib("self", "VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def xla_planned_bytes(dump_folder):
    """The largest "Total bytes used" among XLA's memory-usage reports in ``dump_folder``.

    XLA writes one ``*memory-usage-report.txt`` per compiled program when run with
    ``--xla_dump_to``; a child compiles its step at N = 64 and at N, and the larger plan is
    N's. None when there is no report (XLA off, or the dump failed).
    """
    totals = []
    if os.path.isdir(dump_folder):
        for entry in os.listdir(dump_folder):
            if entry.endswith("memory-usage-report.txt"):
                with open(os.path.join(dump_folder, entry)) as f:
                    match = re.match(r"Total bytes used: (\d+)", f.readline())
                if match:
                    totals.append(int(match.group(1)))
    return max(totals) if totals else None


# ---------------------------------------------------------------------- one measurement
def build_layer(name, length, settings=None):
    """The attention layer ``name`` of the benchmark's sizes at sequence length ``length``."""
    from zoo.layers import get_attention

    return get_attention(variant_of(name))(
        num_heads=HEADS, key_dim=D_MODEL // HEADS, fused_qkv=True, name=variant_of(name),
        **attention_kwargs(name, length, settings),
    )


def measure_in_process(name, length, repeats=5, xla=True, time_cap=None, report=print):
    """Time and peak memory of one forward+backward call of variant ``name`` at N=``length``.

    Meant for a fresh process (see :func:`measure`): the memory figure is the growth of
    this process's resident set over its state after the warm-up at N = 64.

    Args:
        name: a registered attention name.
        length: N.
        repeats: timed calls after the warm-up call; fewer when the warm-up call says
            that they would not fit in ``time_cap`` seconds (at least one).
        xla: ``tf.function(jit_compile=xla)``.
        time_cap: seconds the measurement may take (used to cut the repeats).
        report: called with a dict when the warm-up is done (``{"event": "ready"}``).

    Returns:
        dict with ``status`` ("ok"), ``seconds`` (median), ``times``, ``peak_bytes``,
        ``memory_probe``, ``compile_seconds``.
    """
    import keras
    import tensorflow as tf

    import zoo  # noqa: F401  (registers every variant)

    keras.utils.set_random_seed(0)
    layer = build_layer(name, length)
    rng = np.random.default_rng(0)

    def inputs(n):
        x = tf.constant(rng.normal(size=(BATCH, n, D_MODEL)).astype("float32"))
        g = tf.constant(rng.normal(size=(BATCH, n, D_MODEL)).astype("float32"))
        return x, g

    @tf.function(jit_compile=xla)
    def step(x, g):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)  # (B, N, D)
            loss = tf.reduce_sum(y * g)
        grads = tape.gradient(loss, [x] + layer.trainable_variables)
        return loss, grads

    small = inputs(WARMUP_LENGTH)
    layer(small[0])  # builds the weights eagerly
    float(step(*small)[0])
    reset_worked = _reset_peak()
    baseline = _status_kib("self", "VmRSS") if reset_worked else _peak_kib(False)
    report({"event": "ready"})

    start = time.perf_counter()
    x, g = inputs(length)
    float(step(x, g)[0])  # warm-up: traces and compiles at this shape
    compile_seconds = time.perf_counter() - start
    if time_cap is not None:
        repeats = max(1, min(repeats, int((time_cap - compile_seconds) / max(compile_seconds, 1e-3))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        loss, grads = step(x, g)
        float(loss)
        times.append(time.perf_counter() - start)
    if not all(np.isfinite(float(tf.reduce_sum(gr))) for gr in grads if gr is not None):
        raise FloatingPointError("non-finite gradients")
    peak = _peak_kib(reset_worked)
    return {
        "status": "ok",
        "seconds": statistics.median(times),
        "times": times,
        "compile_seconds": compile_seconds,
        "peak_bytes": max(0, peak - baseline) * 1024,
        "memory_probe": "VmHWM - VmRSS after reset" if reset_worked else "ru_maxrss - baseline",
    }


def _child(args):
    """The subprocess side of :func:`measure`: JSON lines into ``args.child_output``."""

    def report(record):
        with open(args.child_output, "a") as f:
            f.write(json.dumps(record) + "\n")

    try:
        result = measure_in_process(
            args.child_name, args.child_length, args.repeats, not args.no_xla, args.time_cap, report
        )
    except Exception as error:  # recorded in the table, never fixed here
        kind = type(error).__name__
        status = "OOM" if kind in ("ResourceExhaustedError", "MemoryError") else "error"
        message = " ".join(str(error).split())[:300]
        result = {"status": status, "error": f"{kind}: {message}"}
    report({"event": "result", **result})


def measure(name, length, repeats=5, xla=True, time_cap=120.0, memory_cap_bytes=8 * 2**30,
            startup_cap=600.0, poll=0.05):
    """Run :func:`measure_in_process` in a fresh subprocess, under a time and a memory cap.

    Returns:
        The child's result dict, with ``planned_bytes`` (:func:`xla_planned_bytes`; None
        without XLA); or ``{"status": "OOM" | "time" | "error", "error": ...}`` when the
        parent killed it (resident set over ``memory_cap_bytes``, or more than ``time_cap``
        seconds after its warm-up) or it died.
    """
    with tempfile.TemporaryDirectory(prefix="attention-scaling-") as folder:
        output = os.path.join(folder, "result.jsonl")
        errors_path = os.path.join(folder, "stderr.txt")
        command = [sys.executable, os.path.abspath(__file__), "--child-name", name,
                   "--child-length", str(length), "--child-output", output,
                   "--repeats", str(repeats), "--time-cap", str(time_cap)]
        if not xla:
            command.append("--no-xla")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(HERE)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        dump = os.path.join(folder, "xla")
        if xla:
            env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
        with open(errors_path, "w") as errors:
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, env=env)
            started, ready, verdict, peak_rss = time.monotonic(), None, None, 0
            while child.poll() is None:
                rss = (_status_kib(child.pid, "VmRSS") or 0) * 1024
                peak_rss = max(peak_rss, rss)
                if ready is None and _events(output, "ready"):
                    ready = time.monotonic()
                if rss > memory_cap_bytes:
                    verdict = {"status": "OOM", "error": f"resident set over the "
                               f"{memory_cap_bytes / 2**30:.0f} GiB cap"}
                elif ready is not None and time.monotonic() - ready > time_cap:
                    verdict = {"status": "time", "error": f"over the {time_cap:.0f} s cap"}
                elif ready is None and time.monotonic() - started > startup_cap:
                    verdict = {"status": "error", "error": "start-up took too long"}
                if verdict:
                    child.kill()
                    child.wait()
                    return verdict
                time.sleep(poll)
        results = _events(output, "result")
        if results:
            result = results[-1]
            result.pop("event")
            if result["status"] == "ok":
                result["planned_bytes"] = xla_planned_bytes(dump)
            return result
        if child.returncode == -9:
            return {"status": "OOM", "error": "killed (SIGKILL: the kernel's OOM killer?)"}
        with open(errors_path) as f:
            tail = " ".join(f.read().split()[-40:])
        return {"status": "error", "error": f"exit {child.returncode}: {tail}"}


def _events(path, event):
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError):
        return []
    return [r for r in records if r.get("event") == event]


# ---------------------------------------------------------------------- the sweep
def sweep(variants, lengths, measure_one, rounds=1, log=print):
    """Measure every variant at every length, in order of length, until it stops; ``rounds`` times.

    One round measures all variants at one N before the next N; the rounds repeat the whole
    sweep, so that a burst of load from other jobs on the machine hits one round, not every
    measurement of a variant. A variant that stops (OOM, time, error) in any round is not run
    at that N or beyond again.

    Args:
        variants: names.
        lengths: increasing N.
        measure_one: ``(name, length) -> result dict`` (see :func:`measure`).
        rounds: how many times to sweep.
        log: called with one line per measurement.

    Returns:
        ``(results, stops)``: ``{(name, N): result}`` for what was run (``seconds`` and
        ``peak_bytes`` the medians over the rounds, ``round_seconds`` and ``round_peaks`` each
        round's), and ``{name: (status, N)}`` for the variants that stopped.
    """
    runs, stops = {}, {}
    for round_index in range(rounds):
        for length in lengths:
            for name in variants:
                if name in stops and stops[name][1] <= length:
                    continue
                result = measure_one(name, length)
                if result["status"] == "ok":
                    runs.setdefault((name, length), []).append(result)
                    planned = result.get("planned_bytes")
                    log(f"round {round_index + 1}  {name:16s} N={length:6d}  "
                        f"{result['seconds'] * 1000:10.1f} ms  {result['peak_bytes'] / 2**20:9.1f} MiB"
                        + ("" if planned is None else f"  plan {planned / 2**20:9.1f} MiB"))
                else:
                    stops[name] = (result["status"], length)
                    runs[(name, length)] = [result]
                    for n in [n for (m, n) in runs if m == name and n > length]:
                        del runs[(name, n)]
                    log(f"round {round_index + 1}  {name:16s} N={length:6d}  stopped: "
                        f"{result['status']} ({result.get('error', '')})")
    results = {}
    for key, measured in runs.items():
        if measured[0]["status"] != "ok":
            results[key] = measured[0]
            continue
        seconds = [r["seconds"] for r in measured]
        peaks = [r["peak_bytes"] for r in measured]
        plans = [r["planned_bytes"] for r in measured if r.get("planned_bytes") is not None]
        results[key] = dict(measured[0], seconds=statistics.median(seconds),
                            peak_bytes=statistics.median(peaks), round_seconds=seconds,
                            round_peaks=peaks,
                            planned_bytes=statistics.median(plans) if plans else None)
    return results, stops


def _ratio(numerator, denominator, field, per_round):
    """``numerator[field] / denominator[field]``; with figures from several rounds, the median
    of the per-round ratios, so that a burst of load in one round (which hits every variant at
    that N in that round) cancels instead of pairing one round's figure with another's."""
    tops, bottoms = numerator.get(per_round), denominator.get(per_round)
    if tops and bottoms and len(tops) == len(bottoms):
        return statistics.median(a / max(b, 1e-12) for a, b in zip(tops, bottoms))
    return numerator[field] / max(denominator[field], 1e-12)


def summary_at(results, variants, length=REFERENCE_LENGTH):
    """Per variant at N=``length``: time, memory, speedup and memory fractions against mha.

    Speedup and resident fraction are medians of the per-round ratios (see :func:`_ratio`).

    Returns:
        ``{name: dict(seconds, peak_bytes, planned_bytes, speedup, memory_fraction,
        planned_fraction, meets)}``; missing figures are None. ``memory_fraction`` is the
        resident one, ``planned_fraction`` the XLA plan's. ``meets`` is True/False for the
        linear-time variants when the figures exist, else None: speedup >= 5 and the
        planned fraction <= 0.1 (the resident fraction where there is no plan, XLA off).
    """
    full = results.get((FULL, length), {})
    full_ok = full.get("status") == "ok"
    rows = {}
    for name in variants:
        result = results.get((name, length), {})
        row = dict.fromkeys(["seconds", "peak_bytes", "planned_bytes", "speedup",
                             "memory_fraction", "planned_fraction", "meets"])
        if result.get("status") == "ok":
            row["seconds"], row["peak_bytes"] = result["seconds"], result["peak_bytes"]
            row["planned_bytes"] = result.get("planned_bytes")
            if full_ok:
                row["speedup"] = _ratio(full, result, "seconds", "round_seconds")
                row["memory_fraction"] = _ratio(result, full, "peak_bytes", "round_peaks")
                if row["planned_bytes"] is not None and full.get("planned_bytes"):
                    row["planned_fraction"] = row["planned_bytes"] / full["planned_bytes"]
                memory = row["planned_fraction"]
                memory = row["memory_fraction"] if memory is None else memory
                if variant_of(name) in LINEAR_TIME:
                    row["meets"] = (row["speedup"] >= TARGET_SPEEDUP
                                    and memory <= TARGET_MEMORY_FRACTION)
                elif variant_of(name) in EXACT:
                    row["meets"] = (row["speedup"] >= 1 / EXACT_SLOWDOWN
                                    and memory <= EXACT_MEMORY_FRACTION)
        rows[name] = row
    return rows


# ---------------------------------------------------------------------- the report
def _cell(results, stops, name, length, field):
    result = results.get((name, length))
    if result is None:
        return "" if name not in stops else "–"
    if result["status"] != "ok":
        return f"**{result['status']}**"
    if field == "seconds":
        return f"{result['seconds'] * 1000:.1f}"
    value = result.get(field)
    return "n/a" if value is None else f"{value / 2**20:.1f}"


def tables(results, stops, variants, lengths):
    """The markdown lines: the time and memory tables, the N=4096 summary."""
    header = ["variant"] + [f"N={n}" for n in lengths] + ["stopped"]

    def stop_text(name):
        if name not in stops:
            return ""
        status, length = stops[name]
        return f"stopped: {status} at N={length}"

    lines = []
    for title, field in (("Forward+backward time (ms, median):", "seconds"),
                         ("Memory planned by XLA for the compiled step (MiB):", "planned_bytes"),
                         ("Peak resident memory added by the call (MiB):", "peak_bytes")):
        lines += [title, ""] + markdown_table(header, [
            [name] + [_cell(results, stops, name, n, field) for n in lengths] + [stop_text(name)]
            for name in variants]) + [""]
    if REFERENCE_LENGTH in lengths:
        summary = summary_at(results, variants)
        lines += [f"At N={REFERENCE_LENGTH} against full attention (mha); targets for the "
                  f"linear-time variants: speedup >= {TARGET_SPEEDUP:g}x and memory <= "
                  f"{TARGET_MEMORY_FRACTION:g} of mha's (the planned memory; the resident "
                  f"fraction beside it); for exact attention in chunks: at most "
                  f"{EXACT_SLOWDOWN:g}x mha's time and {EXACT_MEMORY_FRACTION:g} of its "
                  "memory:", ""]
        rows = []
        for name in variants:
            row = summary[name]

            def figure(value, fmt, scale=1.0):
                return "n/a" if value is None else fmt.format(value * scale)

            meets = {True: "yes", False: "**no**", None: "n/a"}[row["meets"]]
            if name == FULL:
                meets = "(reference)"
            elif variant_of(name) not in LINEAR_TIME + EXACT:
                meets = "n/a (not linear-time)"
            rows.append([
                name, COMPLEXITY.get(variant_of(name), "?"), figure(row["seconds"], "{:.1f}", 1000),
                figure(row["speedup"], "{:.1f}x"),
                figure(row["planned_bytes"], "{:.1f}", 2**-20),
                figure(row["planned_fraction"], "{:.3f}"),
                figure(row["peak_bytes"], "{:.1f}", 2**-20),
                figure(row["memory_fraction"], "{:.3f}"), meets,
            ])
        lines += markdown_table(
            ["variant", "cost", "ms", "speedup vs mha", "planned MiB", "planned / mha",
             "resident MiB", "resident / mha", "targets met"], rows)
    return lines


def line_styles(variants):
    """``{name: matplotlib line style}``, the same in every picture: full attention black and
    thick, each registered variant its own colour in order (C0, C1 ...), and an extra row
    ("performer:m=64") its variant's colour, dashed, dotted, then dash-dotted."""
    styles, colours, extra = {}, {}, {}
    for name in variants:
        base = variant_of(name)
        if name == FULL:
            styles[name] = dict(linewidth=2.5, color="black")
            continue
        colours.setdefault(base, f"C{len(colours) % 10}")
        styles[name] = dict(linewidth=1.3, color=colours[base])
        if name != base:
            extra[base] = extra.get(base, -1) + 1
            styles[name]["linestyle"] = ("--", ":", "-.")[extra[base] % 3]
    return styles


def plot(results, stops, variants, lengths, path):
    """Log-log time and memory against N, one line per variant; a cross where it stopped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("seconds", 1000, "forward+backward time (ms)", "Time: one self-attention layer, "
               "batch 1, d256, 4 heads"),
              ("planned_bytes", 2**-20, "memory planned by XLA (MiB)", "Planned memory (x at "
               "the top: where a variant stopped)"),
              ("peak_bytes", 2**-20, "peak resident memory added (MiB)", "Peak resident memory")]
    if not any(r.get("planned_bytes") for r in results.values() if r.get("status") == "ok"):
        panels.pop(1)  # XLA off: no plan
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5))
    stop_rows = {ax: 0 for ax in axes}
    styles = line_styles(variants)
    for name in variants:
        ok = [n for n in lengths if results.get((name, n), {}).get("status") == "ok"]
        style = styles[name]
        for ax, (field, scale, _, _) in zip(axes, panels):
            ok_here = [n for n in ok if results[(name, n)].get(field) is not None]
            values = [max(results[(name, n)][field] * scale, 1e-3) for n in ok_here]
            (line,) = ax.plot(ok_here, values, marker="o", markersize=4, label=name, **style)
            if name in stops:
                status, at = stops[name]
                # the stop: a cross at the top of the panel, above the N where it stopped
                ax.plot([at], [0.97], marker="x", markersize=9, color=line.get_color(),
                        transform=ax.get_xaxis_transform(), clip_on=False)
                ax.annotate(f"{name}: {status}", (at, 0.97), xycoords=ax.get_xaxis_transform(),
                            textcoords="offset points", xytext=(-6, -12 - 9 * stop_rows[ax]),
                            ha="right", fontsize=8, color=line.get_color())
                stop_rows[ax] += 1
    for ax, (_, _, label, title) in zip(axes, panels):
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].legend(fontsize=8, ncol=2, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replace_results_section(title_prefix, title, command, table_lines, notes=()):
    """Drop the RESULTS.md sections whose heading starts with ``title_prefix``; append anew."""
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            text = f.read()
        sections = re.split(r"(?m)^(?=## )", text)
        kept = [s for s in sections if not s.startswith(f"## {title_prefix}")]
        with open(RESULTS, "w") as f:
            f.write("".join(kept))
    append_results(title, command, table_lines, notes)


TITLE_PREFIX = "Attention scaling:"


def code_state():
    """The commit measured, and the attention files that differ from it (a shared checkout)."""
    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=HERE, capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "code: not a git checkout"
    changed = git("status", "--porcelain", "--", os.path.join(os.path.dirname(HERE), "zoo"))
    changed = [line[3:] for line in changed.splitlines()]
    return f"code: commit {commit}" + (f", with uncommitted changes to {', '.join(changed)}"
                                       if changed else "")


def add_run_arguments(parser, quick_help):
    """The arguments both attention benchmarks take: variants, XLA, quick, recording, picture."""
    parser.add_argument("--variants", nargs="+", help="names (default: mha and every registered "
                                                      "one in SETTINGS)")
    parser.add_argument("--no-xla", action="store_true")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--record", action="store_true", help="write RESULTS.md even with --quick")
    parser.add_argument("--png", help="the picture (default benchmarks/<script>.png; a temporary "
                                      "file with --quick)")


def resolve_run(args, script):
    """``(variants, record, png, xla)`` from the arguments of :func:`add_run_arguments`."""
    import zoo  # noqa: F401  (registers every variant)
    from zoo.layers import available_attention

    registered = available_attention()
    variants = args.variants or [FULL] + [
        n for n in SETTINGS if n != FULL and variant_of(n) in registered]
    unknown = [n for n in variants if variant_of(n) not in registered]
    if unknown:
        raise SystemExit(f"not registered: {unknown}; registered: {registered}")
    missing = [n for n in registered if n not in map(variant_of, SETTINGS)]
    if missing and not args.variants:
        print(f"registered but without settings here (not run unless named): {missing}")
    record = args.record or not (args.quick or args.no_record)
    # The committed picture shows every variant: a quick run or a chosen few draw elsewhere.
    png = args.png or (os.path.join(tempfile.mkdtemp(), f"{script}.png")
                       if args.quick or args.variants else os.path.join(HERE, f"{script}.png"))
    return variants, record, png, not args.no_xla


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, "N = 256..1024, 1 repeat")
    parser.add_argument("--lengths", type=int, nargs="+", help=f"N (default {LENGTHS})")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="sweeps; the figures are medians")
    parser.add_argument("--time-cap", type=float, default=120.0,
                        help="seconds per measurement after start-up")
    parser.add_argument("--memory-cap-gib", type=float, default=8.0)
    parser.add_argument("--child-name", help=argparse.SUPPRESS)
    parser.add_argument("--child-length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_name:
        return _child(args)

    variants, record, png, xla = resolve_run(args, "attention_scaling")
    lengths = tuple(args.lengths or (QUICK_LENGTHS if args.quick else LENGTHS))
    repeats, rounds = (1, 1) if args.quick else (args.repeats, args.rounds)

    print(machine_description())
    print(f"XLA {'on' if xla else 'off'}; variants {variants}; N {lengths}; {rounds} rounds of "
          f"{repeats} repeats; "
          f"caps {args.time_cap:.0f} s, {args.memory_cap_gib:g} GiB", flush=True)
    start = time.perf_counter()
    results, stops = sweep(variants, lengths, lambda name, n: measure(
        name, n, repeats, xla, args.time_cap, args.memory_cap_gib * 2**30),
        rounds=rounds, log=lambda line: print(line, flush=True))
    lines = tables(results, stops, variants, lengths)
    print("\n".join(lines))
    plot(results, stops, variants, lengths, png)
    print(f"picture: {png}; {time.perf_counter() - start:.0f} s in all")
    probes = {r.get("memory_probe") for r in results.values() if r["status"] == "ok"}
    failures = [f"{name} at N={n}: {r['status']}: {r.get('error', '')}"
                for (name, n), r in results.items() if r["status"] == "error"]
    if record:
        settings = "; ".join(f"{n} {attention_kwargs(n, 'N') or '{}'}" for n in variants)
        notes = [
            f"one self-attention layer alone: batch {BATCH}, d_model {D_MODEL}, {HEADS} heads of "
            f"{D_MODEL // HEADS}, fused QKV; forward + backward (gradients of sum(y * g) for x "
            f"and every weight), training=True, float32, tf.function(jit_compile={xla}) "
            f"(XLA {'on' if xla else 'off'})",
            f"settings: {settings}",
            f"each (variant, N) in a fresh subprocess, {rounds} rounds (each round sweeps every N, "
            f"all variants at one N before the next); time: the median over the rounds of the "
            f"median of {repeats} calls after a compiling warm-up call; planned memory: \"Total "
            "bytes used\" of the memory-usage report XLA writes for the compiled step "
            "(--xla_dump_to): inputs, weights, gradients and every temporary at its peak "
            "liveness, the same on every run; resident memory (median over the "
            "rounds): peak resident set added over the state after a "
            f"compiled warm-up call at N={WARMUP_LENGTH} ({', '.join(sorted(probes)) or 'n/a'}: "
            "the kernel's high-water mark, reset by /proc/self/clear_refs), which adds what the "
            "allocator keeps and the runtime uses around the program",
            f"a variant stops at the first N where it runs out of memory (a {args.memory_cap_gib:g} "
            f"GiB resident-set cap, or ResourceExhaustedError), out of time ({args.time_cap:.0f} s "
            "per measurement) or fails; larger N are not run",
            "absolute times on this shared machine are noisy (other jobs share the 2 cores); "
            "the ratios are the figure; those at N=4096 are the medians of the per-round ratios "
            "(full attention's and the variant's figures of the same round)",
            "picture: " + ("not drawn (a chosen few variants)" if args.variants
                           else "benchmarks/attention_scaling.png"),
            code_state(),
        ] + [f"failure: {f}" for f in failures]
        # A run of a chosen few variants gets a section of its own, so that it never replaces
        # the table of them all.
        prefix = f"Attention scaling, {' and '.join(variants)}:" if args.variants else TITLE_PREFIX
        command = "python benchmarks/attention_scaling.py" + (" --no-xla" if not xla else "")
        if args.variants:
            command += (f" --variants {' '.join(variants)} --lengths {' '.join(map(str, lengths))}"
                        f" --rounds {args.rounds} --repeats {args.repeats}")
        replace_results_section(
            prefix,
            f"{prefix} forward+backward time and peak memory, N = {lengths[0]}..{lengths[-1]} "
            f"(batch {BATCH}, d{D_MODEL}, {HEADS} heads)",
            command, lines, notes)
    return results, stops


if __name__ == "__main__":
    main()
