"""The translator sweep (translator_sweep.py) on a GPU: the rows trained and decoded on JAX.

Each row is the `small` translator with a few fields changed, trained for the same number of
epochs and scored on Multi30k **val only** (test2016 is never read: the settings are chosen on
val). A GPU machine here has JAX but no TensorFlow or tf-text, which zoo's tokenizer and data
loading need, so the run has three steps:

    python benchmarks/studies/translator_sweep_gpu.py prepare DIR  # vocabularies, tokenized train/val
    KERAS_BACKEND=jax python benchmarks/studies/translator_sweep_gpu.py run DIR OUT   # on the GPU
        [--rows NAME ...] [--epochs 60] [--parallel 4] [--train-seconds S] [--bucket-width 32]
    python benchmarks/studies/translator_sweep_gpu.py report DIR OUT  # BLEU, table: RESULTS.md

``prepare`` learns each vocabulary the rows need as the translator task does, and keeps the
ids of train and val. ``run`` trains each row in its own process (``--parallel`` at a time on
the one GPU) with zoo's builder, loss and optimizer and Keras ``fit``, on token-budget batches
built in numpy as zoo's tf.data pipeline builds them under XLA (shuffled, bucketed by length,
padded to the bucket's bound). A bucket's last, partial batch of an epoch is padded with empty
rows to the bucket's batch size, so that each bucket is one compiled shape; they add nothing to
the loss or its gradient, but Keras weighs a batch's loss by its rows in the epoch's mean train
loss, so they count there (val batches keep their rows: one shape each, as val is not shuffled).
A GPU run waits mostly on compiling: each bucket is one compiled shape for the train step and
one for val, and the preset's bucket width of 8 makes 16 of each per row. On an H100 with 16
cores, nine rows at width 8 had not finished their first epoch after 510 s; at
``--bucket-width 32`` (4 shapes), three rows compiled in about 90 s and then trained at 2 s an
epoch, and seven rows at once compiled in 180-205 s and then trained at 6 s an epoch each (so
``--train-seconds``, which counts the first epoch's compiling, must leave room for it). Wider
buckets pad more, so an epoch has more, smaller batches (232 steps instead of 147): every row
is trained the same way, but not exactly as ``zoo train`` batches on a CPU.
Under JAX the train step's accuracy counts padding (the loss's mask does not reach the metric);
val accuracy does not.
After training, val is decoded (beam 5 and greedy, ``translator_search`` under ``jax.jit``)
with the last epoch's weights and with the mean of the last 5 epochs' (as ``zoo average``
does). ``run`` never imports TensorFlow: it blocks the import, so a run here proves it.
"""

import argparse
import bisect
import dataclasses
import json
import os
import sys
import time

import numpy as np

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# benchmarks/studies/: gpu_rows.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_rows  # noqa: E402  (benchmarks/studies/gpu_rows.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TITLE = "Translator sweep on a GPU (JAX): val BLEU of training settings (small shape)"

_DROPOUT_03 = {"dropout": 0.3, "attention_dropout": 0.1, "activation_dropout": 0.1}
_LR_2E3 = {**_DROPOUT_03, "learning_rate": 2e-3, "warmup_steps": 2000}

# name -> fields of the `small` preset that change (zoo.models.translator.TranslatorConfig).
ROWS = {
    "small as shipped (dropout 0.1)": {},
    "dropout 0.3": _DROPOUT_03,
    "dropout 0.3, lr 2e-3, warm-up 2000": _LR_2E3,
    "dropout 0.3, lr 5e-3, warm-up 2000": {**_DROPOUT_03, "learning_rate": 5e-3,
                                           "warmup_steps": 2000},
    "dropout 0.3, lr 2e-3, warm-up 2000, batch 8192": {**_LR_2E3, "batch_tokens": 8192},
    "dropout 0.3, lr 2e-3, warm-up 2000, 10k vocabulary": {**_LR_2E3, "vocab_size": 10000},
    "dropout 0.3, lr 2e-3, warm-up 2000, label smoothing 0.2": {**_LR_2E3,
                                                                "label_smoothing": 0.2},
    "dropout 0.3, lr 2e-3, warm-up 4000": {**_LR_2E3, "warmup_steps": 4000},
    "dropout 0.3, lr 2e-3, warm-up 2000, 6k vocabulary": {**_LR_2E3, "vocab_size": 6000},
}

AVERAGE_LAST = 5  # the epochs whose weights are averaged, as `zoo average --last 5`
DECODE_BATCH = 128
BUCKET = 8  # decoded sources are padded to a multiple of this, as translate() pads them
SEARCHES = {"beam5": {"method": "beam", "beam_size": 5}, "greedy": {"method": "greedy"}}
WEIGHTS = ("last", "avg")
VOCABULARY = "vocab-{}"  # DIR's folder of one vocabulary size: sentencepiece.model, ids.npz
REFERENCES = "val.references.json"
HISTORY = gpu_rows.HISTORY  # OUT/<row>/: the row's epochs, timings and settings
TRANSLATIONS = "translations.npz"  # OUT/<row>/: "last.beam5", ... ids, cut after EOS, val order


# ------------------------------------------------------------------------------------ prepare
def prepare(args):
    """Learn each vocabulary the rows need; keep the train and val ids and the val references."""
    from zoo.data import bucket_spec, load_multi30k
    from zoo.tasks.translation.config import get_config
    from zoo.tasks import get_task

    task = get_task("translator")
    rows = gpu_rows.selected(ROWS, args.rows)
    configs = [get_config("small", **ROWS[name]) for name in rows]
    for config in configs:
        sizes = (config.batch_tokens, config.max_length, config.bucket_width)
        assert gpu_rows.bucket_spec(*sizes) == bucket_spec(*sizes), "the numpy batches drifted"
    os.makedirs(args.dir, exist_ok=True)
    train = load_multi30k("train")  # the rows train on the bundled Multi30k
    val = load_multi30k("val")
    shipped = os.path.join(ROOT, "saved_models", "translator-en-de", task.vocabulary_file)
    for vocab_size in sorted({c.vocab_size for c in configs}):
        assert vocab_size <= 2**16, "ids are kept as uint16"
        config = next(c for c in configs if c.vocab_size == vocab_size)
        folder = os.path.join(args.dir, VOCABULARY.format(vocab_size))
        os.makedirs(folder, exist_ok=True)
        began = time.monotonic()
        task.make_vocabulary(config, folder, train)  # the translator task's recipe
        seconds = time.monotonic() - began
        tokenizer = task.load_vocabulary(folder)
        arrays = {}
        for split, pairs in (("train", train), ("val", val)):
            for side in (0, 1):
                ids = tokenizer.tokenize([pair[side] for pair in pairs])  # (N, None) ragged
                key = f"{split}_{('source', 'target')[side]}"
                arrays[key + "_ids"] = ids.flat_values.numpy().astype("uint16")
                arrays[key + "_lengths"] = ids.row_lengths().numpy().astype("int32")
        np.savez_compressed(os.path.join(folder, "ids.npz"), **arrays)
        note = ""
        if vocab_size == task.load_vocabulary(os.path.dirname(shipped)).vocab_size:
            ids = task.load_vocabulary(os.path.dirname(shipped)).tokenize([p[1] for p in train])
            same = np.array_equal(ids.flat_values.numpy(), arrays["train_target_ids"])
            note = f"; its ids {'are' if same else 'differ from'} the shipped translator's"
        print(f"{vocab_size}-piece vocabulary learned in {seconds:.0f} s{note}", flush=True)
    with open(os.path.join(args.dir, REFERENCES), "w", encoding="utf-8") as f:
        json.dump([target for _, target in val], f, ensure_ascii=False)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(args.dir)
               for n in names)
    print(f"{len(train)} train and {len(val)} val pairs in {args.dir}: {size / 2**20:.1f} MiB")


def _split(folder, split):
    """``[(source ids, target ids)]`` of a prepared split, as int32 arrays."""
    with np.load(os.path.join(folder, "ids.npz")) as data:
        sides = []
        for side in ("source", "target"):
            ids = data[f"{split}_{side}_ids"].astype("int32")
            ends = np.cumsum(data[f"{split}_{side}_lengths"])
            sides.append(np.split(ids, ends[:-1]))
    return list(zip(*sides))


# ---------------------------------------------------------------------------------------- run
def run(args):
    """Train and decode each row in its own process, ``--parallel`` at a time."""
    gpu_rows.block_absent_modules("translator_sweep_gpu.py")
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before zoo imports Keras
    rows = gpu_rows.selected(ROWS, args.rows)
    for name in rows:
        folder = os.path.join(args.dir, VOCABULARY.format(_row_config(name, 1).vocab_size))
        if not os.path.exists(os.path.join(folder, "ids.npz")):
            sys.exit(f"{folder}: missing; run `prepare` with these rows first")
    forwarded = ["--epochs", str(args.epochs), "--seed", str(args.seed)]
    for option in ("limit_train", "limit_val", "train_seconds", "bucket_width"):
        if getattr(args, option) is not None:
            forwarded += ["--" + option.replace("_", "-"), str(getattr(args, option))]
    if args.save_weights:
        forwarded.append("--save-weights")
    codes, wall = gpu_rows.launch(__file__, args.dir, args.out, rows, forwarded, args.parallel)
    gpu_rows.write_json(os.path.join(args.out, gpu_rows.RUN), {
        "rows": rows, "parallel": args.parallel, "epochs": args.epochs,
        "train_seconds": args.train_seconds, "wall_seconds": round(wall, 1),
        "exit_codes": codes})
    _print_timings(args.out, rows, wall)
    if any(codes.values()):
        sys.exit(f"rows failed: {[name for name, code in codes.items() if code]}")


def _print_timings(out, rows, wall):
    print(f"\nwall {wall:.0f} s for {len(rows)} rows")
    print("row | epochs | train s | first epoch s | s/epoch after | decode s")
    for name in rows:
        history = gpu_rows.row_history(out, name)
        if history is None:
            print(f"{name} | no history")
            continue
        seconds = [e["seconds"] for e in history["epochs"]]
        after = f"{np.median(seconds[1:]):.1f}" if len(seconds) > 1 else "-"
        decode = sum(history.get("decode_seconds", {}).values())
        print(f"{name} | {len(seconds)} | {sum(seconds):.0f} | {seconds[0]:.1f} | {after} | "
              f"{decode:.0f}", flush=True)


def _row_config(name, epochs, bucket_width=None):
    from zoo.tasks.translation.config import get_config

    config = get_config("small", epochs=epochs, **ROWS[name])
    if bucket_width is None:
        return config
    return dataclasses.replace(config, bucket_width=bucket_width)


def _batches(examples, config, order, full_rows):
    """The batches of one pass over ``examples`` in ``order``, as zoo's pipeline makes them
    under XLA: each example goes to the first bucket whose bound holds
    ``max(len(source), len(target) + 1)``; a bucket's batch goes out when it is full, padded to
    the bound; the partial batches go out last, padded with empty rows to the full batch size
    when ``full_rows``."""
    from zoo.special_ids import BOS_ID, EOS_ID

    upper, sizes = gpu_rows.bucket_spec(config.batch_tokens, config.max_length, config.bucket_width)
    pending, batches = [[] for _ in upper], []

    def batch(indices, bucket, rows):
        width = upper[bucket]
        source = np.zeros((rows, width), "int32")
        target_in = np.zeros((rows, width), "int32")
        target_out = np.zeros((rows, width), "int32")
        for row, index in enumerate(indices):
            src, tgt = examples[index]
            source[row, : len(src)] = src
            target_in[row, 0] = BOS_ID
            target_in[row, 1 : len(tgt) + 1] = tgt
            target_out[row, : len(tgt)] = tgt
            target_out[row, len(tgt)] = EOS_ID
        return {"source": source, "target_in": target_in}, target_out

    for index in order:
        src, tgt = examples[index]
        bucket = bisect.bisect_left(upper, max(len(src), len(tgt) + 1))
        pending[bucket].append(index)
        if len(pending[bucket]) == sizes[bucket]:
            batches.append(batch(pending[bucket], bucket, sizes[bucket]))
            pending[bucket] = []
    for bucket, indices in enumerate(pending):
        if indices:
            batches.append(batch(indices, bucket, sizes[bucket] if full_rows else len(indices)))
    return batches


def train_row(args):
    """One row, in this process: train, keep the last epochs' weights, decode val."""
    name, tag = gpu_rows.start_row("translator_sweep_gpu.py", ROWS, args.rows)
    import keras


    config = _row_config(name, args.epochs, args.bucket_width)
    losses, optimizers = gpu_rows.training_module("losses"), gpu_rows.training_module("optimizer")
    from zoo.models.translator import build_translator

    folder = os.path.join(args.out, gpu_rows.slug(name))
    os.makedirs(folder, exist_ok=True)
    device = gpu_rows.device_line()
    print(f"{tag} {device}; {name}: {ROWS[name]}", flush=True)
    vocabulary = os.path.join(args.dir, VOCABULARY.format(config.vocab_size))

    def examples(split, limit):
        pairs = _split(vocabulary, split)[:limit]
        return [(s[: config.max_length], t[: config.max_length - 1]) for s, t in pairs]

    train, val = examples("train", args.limit_train), examples("val", args.limit_val)
    keras.utils.set_random_seed(args.seed)
    model = build_translator(config)
    model.compile(  # as TranslationTask.compile_model
        optimizer=optimizers.make_optimizer(config),
        loss=losses.MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=True,
    )
    val_batches = _batches(val, config, range(len(val)), full_rows=False)
    rng = np.random.default_rng(args.seed)
    history = {"name": name, "overrides": ROWS[name], "config": dataclasses.asdict(config),
               "device": device, "epochs_asked": args.epochs, "train_pairs": len(train),
               "val_sentences": len(val), "limit_train": args.limit_train,
               "limit_val": args.limit_val, "seed": args.seed, "epochs": [], "finished": False}
    kept, trained = [], 0.0
    for epoch in range(config.epochs):
        began = time.monotonic()
        batches = _batches(train, config, rng.permutation(len(train)), full_rows=True)
        logs = model.fit(
            (b for b in batches), steps_per_epoch=len(batches), initial_epoch=epoch,
            epochs=epoch + 1, validation_data=(b for b in val_batches),
            validation_steps=len(val_batches), shuffle=False, verbose=0,
        ).history
        kept = (kept + [model.get_weights()])[-AVERAGE_LAST:]
        seconds = time.monotonic() - began
        trained += seconds
        record = {k: round(float(v[-1]), 5) for k, v in logs.items()}
        history["epochs"].append({"epoch": epoch + 1, **record, "seconds": round(seconds, 2),
                                  "steps": len(batches)})
        history["train_seconds"] = round(trained, 1)
        gpu_rows.write_json(os.path.join(folder, HISTORY), history)
        last = epoch + 1 == config.epochs
        out_of_time = args.train_seconds is not None and trained >= args.train_seconds
        if epoch < 2 or (epoch + 1) % 10 == 0 or last or out_of_time:
            print(f"{tag} epoch {epoch + 1}/{config.epochs}: loss {record['loss']:.4f}, "
                  f"val_loss {record['val_loss']:.4f} ({seconds:.1f} s, {len(batches)} steps)",
                  flush=True)
        if out_of_time and not last:
            print(f"{tag} stopped after {epoch + 1} epochs: --train-seconds {args.train_seconds}",
                  flush=True)
            break

    weights = {"last": kept[-1], "avg": gpu_rows.average(kept)}
    history["averaged_epochs"] = len(kept)
    model.set_weights(weights["avg"])
    history["val_loss_avg"] = round(float(model.evaluate(
        (b for b in val_batches), steps=len(val_batches), verbose=0, return_dict=True,
    )["loss"]), 5)  # fmt: skip
    model.set_weights(weights["last"])
    if args.save_weights:
        for key, values in weights.items():
            np.savez(os.path.join(folder, f"weights-{key}.npz"), *values)
    sources = [s for s, _ in _split(vocabulary, "val")[: args.limit_val]]
    history["decode_seconds"], translations = {}, {}
    for search_name, settings in SEARCHES.items():
        for key, values in _decode(model, weights, sources, settings).items():
            ids, seconds = values
            translations[f"{key}.{search_name}"] = ids
            history["decode_seconds"][f"{key}.{search_name}"] = round(seconds, 1)
            print(f"{tag} decoded val, {key} weights, {search_name}: {seconds:.1f} s", flush=True)
    np.savez_compressed(os.path.join(folder, TRANSLATIONS), **translations)
    history["finished"] = True
    gpu_rows.write_json(os.path.join(folder, HISTORY), history)
    gpu_rows.assert_nothing_absent_imported()
    print(f"{tag} done: {len(history['epochs'])} epochs in {trained:.0f} s, best val_loss "
          f"{min(e['val_loss'] for e in history['epochs']):.4f}, averaged "
          f"{history['val_loss_avg']:.4f}", flush=True)


def _decode(model, weights, sources, settings):
    """Decode ``sources`` with each set of ``weights`` (name -> list of arrays, in
    ``model.weights`` order) by ``translator_search``, compiled once for all the sets: the
    weights are arguments of the compiled search, not constants in it. Batches of
    ``DECODE_BATCH`` sources sorted by length, padded to one width (the longest source rounded
    up to 8 tokens: padding never changes a translation). Returns name -> (ids cut after EOS,
    in the order of ``sources``; seconds, the compilation included)."""
    import jax
    import keras

    from zoo.models.translator import translator_search
    from zoo.models.translator import translator_layers
    from zoo.special_ids import EOS_ID

    layers = translator_layers(model)
    limit = layers.max_source_length or 10**9
    sources = [s[:limit] for s in sources]
    longest = max(len(s) for s in sources)
    width = max(min(-(-longest // BUCKET) * BUCKET, limit), longest, BUCKET)
    search = translator_search(model, max_length=layers.max_length, **settings)

    def stateless(values, source_ids):
        with keras.StatelessScope(state_mapping=list(zip(model.weights, values))):
            return search(source_ids)

    compiled = jax.jit(stateless)
    order = np.argsort([len(s) for s in sources], kind="stable")
    results = {}
    for name, values in weights.items():
        began = time.monotonic()
        values = [jax.numpy.asarray(v) for v in values]
        outputs = [None] * len(sources)
        for start in range(0, len(sources), DECODE_BATCH):
            rows = order[start : start + DECODE_BATCH]
            batch = np.zeros((DECODE_BATCH, width), "int32")
            for i, index in enumerate(rows):
                batch[i, : len(sources[index])] = sources[index]
            ids = np.asarray(compiled(values, batch))
            for index, row in zip(rows, ids):
                outputs[index] = row
        ids = np.stack(outputs)
        ids = np.where(np.cumsum(ids == EOS_ID, axis=1) > 0, 0, ids)  # cut after the first EOS
        used = max(1, int((ids != 0).any(axis=0).nonzero()[0].max(initial=0)) + 1)
        results[name] = (ids[:, :used].astype("int32"), time.monotonic() - began)
    return results


# ------------------------------------------------------------------------------------- report
def report(args):
    """Detokenize each row's ids, score them on val, write the table."""
    from common import markdown_table, publish_table

    from zoo.data import EOS_ID, SentencePieceTokenizer
    from zoo.evaluation import corpus_bleu

    with open(os.path.join(args.dir, REFERENCES), encoding="utf-8") as f:
        references = json.load(f)
    run_settings = gpu_rows.run_settings(args.out)
    parallel = run_settings.get("parallel")
    histories = [history for _, history in gpu_rows.finished_histories(args.out, ROWS)]
    if not histories:
        sys.exit(f"{args.out}: no finished rows")
    # Rows stopped by --train-seconds finish different numbers of epochs; the val loss at the
    # fewest epochs any row finished compares them at equal training (within one vocabulary and
    # label smoothing: the loss is per piece and smoothed).
    common = min(len(history["epochs"]) for history in histories)
    rows, devices, limits = [], set(), set()
    for history in histories:
        devices.add(history["device"])
        limits.add((history["train_pairs"], history["val_sentences"]))
        refs = references[: history["val_sentences"]]
        vocab = VOCABULARY.format(history["config"]["vocab_size"])
        tokenizer = SentencePieceTokenizer(os.path.join(args.dir, vocab, "sentencepiece.model"))
        scores = {}
        with np.load(os.path.join(args.out, gpu_rows.slug(history["name"]), TRANSLATIONS)) as data:
            for key in data.files:
                ids = data[key]
                ids = np.where(np.cumsum(ids == EOS_ID, axis=1) > 0, 0, ids)
                texts = [t.decode("utf-8", errors="replace")
                         for t in tokenizer.detokenize(ids).numpy()]
                scores[key] = corpus_bleu(texts, refs)
        epochs = history["epochs"]
        best = min(epochs, key=lambda e: e["val_loss"])
        done = len(epochs)
        rows.append([
            history["name"],
            done if done == history["epochs_asked"] else f"{done} of {history['epochs_asked']}",
            round(history["train_seconds"] / 60, 1),
            f"{best['val_loss']:.3f} ({best['epoch']})",
            f"{epochs[common - 1]['val_loss']:.3f}",
            f"{history['val_loss_avg']:.3f}",
            *(f"{scores[k]['bleu_lowercase']:.2f}"
              for k in ("last.beam5", "avg.beam5", "last.greedy", "avg.greedy")),
            f"{scores['avg.beam5']['bleu']:.2f}",
        ])
    header = ["settings (on `small`)", "epochs", "GPU train minutes", "best val loss (epoch)",
              f"val loss at epoch {common}",
              f"val loss, last {AVERAGE_LAST} averaged", "BLEU beam 5, last epoch",
              f"BLEU beam 5, last {AVERAGE_LAST} averaged", "BLEU greedy, last epoch",
              "BLEU greedy, averaged", "beam 5 averaged, cased"]
    print("\n".join(markdown_table(header, rows)))
    if args.no_record:
        return
    notes = [
        f"trained and decoded on {'; '.join(sorted(devices))}, {parallel or '?'} rows at a "
        "time on the one GPU (train minutes are wall-clock, validation included, on a shared "
        "GPU; the report's machine line is where BLEU was scored)",
        "zoo's builder, loss and optimizer, Keras fit on token-budget batches built in numpy "
        "as zoo's pipeline builds them under XLA; val loss is teacher-forced, label-smoothed",
        "sacreBLEU 13a lowercased on Multi30k val (the last column cased), alpha 0.6; the "
        "averaged weights are the mean of the last 5 epochs'; test2016 is not read",
    ]
    if run_settings.get("train_seconds"):
        notes.append(f"each row stopped after {run_settings['epochs']} epochs or the epoch that "
                     f"passed {run_settings['train_seconds']:.0f} s of training, whichever came "
                     "first, the first epoch's compiling included; bucket width "
                     f"{sorted({h['config']['bucket_width'] for h in histories})}")
    if limits != {(29000, 1014)}:
        notes.append(f"subsets: (train pairs, val sentences) {sorted(limits)}")
    publish_table(TITLE, "python benchmarks/studies/translator_sweep_gpu.py prepare|run|report "
                         "(see its docstring)", header, rows, notes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "run", "report", "row"),
                        help="row: one row in this process (what run starts for each row)")
    parser.add_argument("dir", help="the vocabularies and ids (written by prepare)")
    parser.add_argument("out", nargs="?", help="the histories and translations (written by run)")
    parser.add_argument("--rows", nargs="+", metavar="NAME",
                        help="these rows (names or folder names) only; default all")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--parallel", type=int, default=4, help="rows trained at once")
    parser.add_argument("--train-seconds", type=float,
                        help="stop a row's training after the epoch that passes this (the "
                             "first epoch's compiling counts: minutes with many rows at once)")
    parser.add_argument("--limit-train", type=int, help="the first K training pairs only")
    parser.add_argument("--limit-val", type=int, help="the first K val pairs only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucket-width", type=int,
                        help="every row's bucket width (default the preset's 8): each bucket is "
                             "one compiled shape, and compiling is what a GPU run waits on")
    parser.add_argument("--save-weights", action="store_true",
                        help="keep OUT/<row>/weights-{last,avg}.npz (model.get_weights order)")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    if args.step != "prepare" and not args.out:
        parser.error(f"{args.step} needs OUT")
    if args.step == "row" and len(gpu_rows.selected(ROWS, args.rows)) != 1:
        parser.error("row takes exactly one --rows NAME")
    {"prepare": prepare, "run": run, "report": report, "row": train_row}[args.step](args)


if __name__ == "__main__":
    main()
