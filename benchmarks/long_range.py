"""Long-range retrieval: what each attention variant can learn in the same training time.

The task (key-value retrieval): a sequence of ``--length`` tokens (1024 by default) holds
``PAIRS`` key-value tokens at random positions, one token per pair (token ``(k, v)`` says
"key k has value v", distinct keys out of ``KEYS``), among filler tokens; its first
``QUERIES`` positions are query tokens, each naming the key of one of the pairs. The model
must output, at each query position, the value of the key it names (``VALUES`` classes,
chance ``1 / VALUES``). Several queries per sequence give several labels per example, which
is what lets full attention learn the task in a couple of minutes on two cores.

The model: a token embedding (no position encoding: the task is about content; the sparse
patterns bring their own positions), two pre-LN ``TransformerEncoderBlock`` with
``attention=<variant>`` and the settings of ``attention_scaling.SETTINGS``, and a classifier
on the outputs at the query positions.

Every pair is placed beyond position ``QUERIES - 1 + 2 * window`` (:func:`reach`), where
``window`` is the local setting. With two blocks of local attention, the output at a query
position ``q < QUERIES`` depends only on positions ``<= q + 2 * window``, so **local attention
alone cannot do better than chance**: the answers are out of its reach
(``tests/benchmarks/test_attention_benchmarks.py`` checks that its outputs do not move when
every far token changes). Full attention (one query-key match in one layer), the global
variant (its ``num_global = QUERIES`` global positions are the queries: they see everything),
and in principle the strided (two hops), clustered, Sinkhorn, Linformer, Performer and linear
variants can reach the pairs; whether they learn to within the budget is what this measures.
The synthesizer's weights do not depend on the keys, so it can only read a weighted bag of
the tokens. AFT-simple (``aft``) has no query-key match either: each block pools the whole
sequence into one vector that every query only gates, so all the pairs must fit in it.

Every variant trains for the same wall-clock budget (``--budget`` seconds of training steps,
after a compiling first step) from the same seed and the same stream of fresh random batches,
then is scored on one fixed held-out set. The table (appended to RESULTS.md) gives accuracy,
steps done and time per step; the picture ``benchmarks/long_range.png`` plots accuracy against
time per step and the accuracy on the first held-out examples during training.

    python benchmarks/long_range.py [--quick] [--variants mha local ...] [--budget 120]

``--quick`` is a smoke run (length 128, window 8, 5 s per variant) that records nothing unless
``--record`` / ``--png`` say so.
"""

import argparse
import json
import os
import sys
import time

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from attention_scaling import (  # noqa: E402
    SETTINGS,
    add_run_arguments,
    attention_kwargs,
    code_state,
    line_styles,
    replace_results_section,
    resolve_run,
    variant_of,
)
from common import machine_description, markdown_table  # noqa: E402

KEYS, VALUES, PAIRS, QUERIES, FILLERS = 16, 8, 8, 8, 8
LAYERS, D_MODEL, HEADS, FF = 2, 64, 2, 128
BATCH, LEARNING_RATE = 8, 3e-3
HELD_OUT, CURVE_EXAMPLES, CURVE_POINTS = 512, 128, 5

# Token ids: 0 is unused (no padding), then the fillers, the query keys, the (key, value) pairs.
FILLER0 = 1
QUERY0 = FILLER0 + FILLERS
PAIR0 = QUERY0 + KEYS
VOCAB = PAIR0 + KEYS * VALUES

# --quick: a length of 128, so every size-like setting shrinks.
QUICK_OVERRIDES = {"window": 8, "stride": 8, "chunk_size": 16, "block_size": 16,
                   "projected_length": 16, "num_features": 32}
TITLE_PREFIX = "Long-range retrieval:"


def settings_for(quick):
    """SETTINGS, with the size-like values shrunk for ``--quick``."""
    if not quick:
        return SETTINGS
    return {name: {key: QUICK_OVERRIDES.get(key, value) for key, value in kwargs.items()}
            for name, kwargs in SETTINGS.items()}


def reach(settings):
    """Positions ``<= reach`` can influence the outputs at the query positions of local blocks."""
    return QUERIES - 1 + LAYERS * settings["local"]["window"]


def make_batch(rng, batch, length, far):
    """Sequences and answers of the retrieval task.

    Args:
        rng: a numpy Generator.
        batch: B.
        length: T.
        far: every pair sits at a position > ``far``.

    Returns:
        ``tokens`` (B, T) int32 and ``answers`` (B, QUERIES) int32, the queried keys' values.
    """
    if length - far - 1 < PAIRS:
        raise ValueError(f"length {length} leaves no room for {PAIRS} pairs beyond position {far}")
    tokens = rng.integers(FILLER0, FILLER0 + FILLERS, size=(batch, length))
    answers = np.empty((batch, QUERIES), np.int32)
    for b in range(batch):
        keys = rng.choice(KEYS, size=PAIRS, replace=False)
        values = rng.integers(0, VALUES, size=PAIRS)
        positions = rng.choice(np.arange(far + 1, length), size=PAIRS, replace=False)
        tokens[b, positions] = PAIR0 + keys * VALUES + values
        targets = rng.choice(PAIRS, size=QUERIES, replace=False)
        tokens[b, :QUERIES] = QUERY0 + keys[targets]
        answers[b] = values[targets]
    return tokens.astype(np.int32), answers


def build_model(name, length, settings=None):
    """Embedding, two encoder blocks with ``attention=name``, a classifier at each query."""
    import keras

    from zoo.layers import TokenAndPositionEmbedding, TransformerEncoderBlock

    tokens = keras.Input((length,), dtype="int32", name="tokens")
    x = TokenAndPositionEmbedding(VOCAB, D_MODEL, position=None, name="embedding")(tokens)
    for i in range(LAYERS):
        x = TransformerEncoderBlock(
            HEADS, FF, attention=variant_of(name), attention_kwargs=attention_kwargs(name, length, settings),
            normalize_first=True, name=f"block_{i}",
        )(x)
    x = keras.layers.LayerNormalization(name="final_norm")(x[:, :QUERIES])  # (B, Q, D)
    logits = keras.layers.Dense(VALUES, name="classifier")(x)  # (B, Q, VALUES)
    return keras.Model(tokens, logits, name=f"retrieval_{variant_of(name)}")


def accuracy(model, tokens, answers, batch=32):
    logits = model.predict(tokens, batch_size=batch, verbose=0)
    return float(np.mean(np.argmax(logits, -1) == answers))


def train_variant(name, length, budget, held_out, settings=None, xla=True, seed=0, log=print):
    """Train variant ``name`` for ``budget`` seconds of steps; score it on ``held_out``.

    Args:
        name: a registered attention name.
        length: T.
        budget: seconds of training steps (the first, compiling step is not counted).
        held_out: ``(tokens, answers)``.
        settings: the variants' settings (``SETTINGS`` when None).
        xla: ``model.compile(jit_compile=xla)``.
        seed: the weights' and the training stream's seed (the same for every variant).
        log: called with progress lines.

    Returns:
        dict: ``accuracy`` on the held-out set, ``steps``, ``seconds_per_step`` (median),
        ``train_seconds``, ``compile_seconds``, ``curve`` [(training seconds, accuracy on
        the first held-out examples)], ``parameters``.
    """
    import keras

    settings = SETTINGS if settings is None else settings
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = build_model(name, length, settings)
    model.compile(
        optimizer=keras.optimizers.Adam(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=xla,
    )
    rng = np.random.default_rng(seed)
    far = reach(settings)
    curve_set = (held_out[0][:CURVE_EXAMPLES], held_out[1][:CURVE_EXAMPLES])
    start = time.perf_counter()
    model.train_on_batch(*make_batch(rng, BATCH, length, far))
    compile_seconds = time.perf_counter() - start
    steps, trained, step_times, curve = 1, 0.0, [], [(0.0, accuracy(model, *curve_set))]
    checkpoints = [budget * (i + 1) / CURVE_POINTS for i in range(CURVE_POINTS)]
    while trained < budget:
        data = make_batch(rng, BATCH, length, far)
        begin = time.perf_counter()
        model.train_on_batch(*data)
        step_times.append(time.perf_counter() - begin)
        trained += step_times[-1]
        steps += 1
        if checkpoints and trained >= checkpoints[0]:
            checkpoints.pop(0)
            curve.append((trained, accuracy(model, *curve_set)))
            log(f"  {name}: {trained:5.0f} s, {steps} steps, accuracy on {CURVE_EXAMPLES}: "
                f"{curve[-1][1]:.3f}")
    return {
        "accuracy": accuracy(model, *held_out),
        "steps": steps,
        "seconds_per_step": float(np.median(step_times)),
        "train_seconds": trained,
        "compile_seconds": compile_seconds,
        "curve": curve,
        "parameters": model.count_params(),
    }


def table(results, variants):
    """Accuracy, steps, step time, and the accuracy during training, one row per variant."""
    rows = []
    for name in variants:
        r = results[name]
        if "error" in r:
            rows.append([name, "**error**", "", "", "", "", r["error"]])
            continue
        during = " / ".join(f"{score:.2f}" for _, score in r["curve"][1:])
        rows.append([name, f"{r['accuracy']:.3f}", r["steps"], f"{r['seconds_per_step'] * 1000:.0f}",
                     f"{r['train_seconds']:.0f}", during, f"{r['parameters']:,}"])
    fifths = "/".join(f"{100 * (i + 1) // CURVE_POINTS}" for i in range(CURVE_POINTS))
    return markdown_table(
        ["variant", "held-out accuracy", "steps", "ms/step", "train s",
         f"accuracy at {fifths}% of the time (first {CURVE_EXAMPLES} held-out)", "parameters"],
        rows)


def plot(results, variants, path, chance):
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    styles = line_styles(variants)  # the colours of attention_scaling.png
    for name in variants:
        color = styles[name]["color"]
        r = results[name]
        if "error" in r:
            continue
        left.plot([r["seconds_per_step"] * 1000], [r["accuracy"]], "o", color=color)
        if r["accuracy"] > chance + 0.1:  # the crowd at chance is named by the legend
            left.annotate(name, (r["seconds_per_step"] * 1000, r["accuracy"]), fontsize=8,
                          xytext=(5, 3), textcoords="offset points")
        seconds, scores = zip(*r["curve"])
        right.plot(seconds, scores, marker=".", label=name, **styles[name])
    for ax in (left, right):
        ax.axhline(chance, color="grey", linestyle="--", linewidth=1)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("held-out accuracy")
        ax.grid(True, alpha=0.3)
    left.set_xscale("log")
    left.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2))
    left.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_xlabel("training step time (ms, log scale)")
    left.set_title("Accuracy after the same training time")
    right.set_xlabel("training seconds")
    right.set_title(f"During training (first {CURVE_EXAMPLES} held-out examples)")
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def publish(results, variants, settings, length, budget, xla, png, record, code, chosen=False):
    """Print the table, draw the picture and (``record``) replace the RESULTS.md section: the
    one of every variant, or (``chosen``: a run of named variants) a section of their own, so
    that a run of a few never replaces the table of them all."""
    lines = table(results, variants)
    print("\n".join(lines))
    plot(results, variants, png, 1 / VALUES)
    print(f"picture: {png}")
    if not record:
        return
    far = reach(settings)
    described = "; ".join(f"{n} {attention_kwargs(n, 'T', settings) or '{}'}" for n in variants)
    prefix = f"Long-range retrieval, {' and '.join(variants)}:" if chosen else TITLE_PREFIX
    replace_results_section(
        prefix,
        f"{prefix} key-value retrieval at length {length}, {budget:g} s of training per variant",
        "python benchmarks/long_range.py" + (f" --length {length}" if length != 1024 else "")
        + f" --budget {budget:g}" + (f" --variants {' '.join(variants)}" if chosen else ""),
        lines,
        notes=[
            f"task: {PAIRS} (key, value) tokens with distinct keys (of {KEYS}) at random "
            f"positions > {far}, the rest {FILLERS} kinds of filler; {QUERIES} query tokens at "
            f"positions 0..{QUERIES - 1}, each naming one pair's key; answer at each: its "
            f"value, {VALUES} classes (chance {1 / VALUES:.3f}); accuracy over all queries",
            f"two local blocks (window {settings['local']['window']}) see positions <= {far} "
            "from the queries: local attention cannot reach the answers",
            f"model: embedding (no positions), {LAYERS} pre-LN TransformerEncoderBlock "
            f"(d{D_MODEL}, {HEADS} heads, ff {FF}), classifier at each query; Adam "
            f"{LEARNING_RATE:g}, batch {BATCH}, fresh random batches, seed 0 for every variant",
            f"each variant trains {budget:g} s (steps timed; the first, compiling step and "
            f"the evaluations not counted), XLA {'on' if xla else 'off'}; held-out set: "
            f"{HELD_OUT} fixed sequences ({HELD_OUT * QUERIES} queries)",
            f"settings: {described}",
            "steps depend on the load of this shared 2-core machine; "
            "picture: benchmarks/long_range.png",
            code,
        ],
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, "length 128, window 8, 5 s per variant")
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--budget", type=float, default=120.0, help="training seconds per variant")
    parser.add_argument("--save-json", help="also write the results (and the run's settings) here")
    parser.add_argument("--from-json", help="publish the results of --save-json without training")
    args = parser.parse_args(argv)
    if args.quick:
        args.length, args.budget = 128, 5.0

    variants, record, png, xla = resolve_run(args, "long_range")
    settings = settings_for(args.quick)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        variants = saved["variants"]
        return publish(saved["results"], variants, settings, saved["length"], saved["budget"],
                       saved["xla"], png, record, saved["code"], saved.get("chosen", False))

    code = code_state()
    far = reach(settings)
    held_out = make_batch(np.random.default_rng(12345), HELD_OUT, args.length, far)
    print(machine_description(), flush=True)
    print(f"length {args.length}, pairs beyond position {far}, budget {args.budget:g} s, "
          f"XLA {'on' if xla else 'off'}, variants {variants}", flush=True)
    results = {}
    for name in variants:
        try:
            results[name] = train_variant(name, args.length, args.budget, held_out, settings, xla,
                                          log=lambda line: print(line, flush=True))
        except Exception as error:  # recorded in the table, never fixed here
            results[name] = {"error": f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"}
        print(f"{name}: {results[name]}", flush=True)
    if args.save_json:
        with open(args.save_json, "w") as f:
            json.dump({"variants": variants, "results": results, "length": args.length,
                       "budget": args.budget, "xla": xla, "code": code,
                       "chosen": bool(args.variants)}, f, indent=1)
    publish(results, variants, settings, args.length, args.budget, xla, png, record, code,
            chosen=bool(args.variants))
    return results


if __name__ == "__main__":
    main()
