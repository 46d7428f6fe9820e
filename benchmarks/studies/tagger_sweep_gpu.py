"""The tagger sweep (tagger_sweep.py) on a GPU: many rows at once, trained on JAX.

Each row is the `small` tagger with a few fields changed, trained for the same number of epochs
and scored on UD English-EWT **dev only** (test is never read: the settings are chosen on dev),
overall and on OOV words. A GPU machine here has JAX but no TensorFlow, which zoo's vocabulary
encoding and tf.data pipeline need, so the run has three steps:

    python benchmarks/studies/tagger_sweep_gpu.py prepare DIR     # vocabularies, encoded train/dev
    KERAS_BACKEND=jax python benchmarks/studies/tagger_sweep_gpu.py run DIR OUT   # on the GPU
        [--rows NAME ...] [--epochs 16] [--parallel 8] [--train-seconds S] [--bucket-width 32]
    python benchmarks/studies/tagger_sweep_gpu.py report DIR OUT [OUT ...]  # table: RESULTS.md

``prepare`` builds each vocabulary the rows need as the tagger task does and keeps the encoded
words, characters and tags of train and dev. ``run`` trains each row in its own process
(``--parallel`` at a time on the one GPU) with zoo's builder, loss, metric and optimizer and
Keras ``fit``, with the EMA weights validated (``SwapEMAWeights``) and the best dev epoch's
kept, as ``zoo train tagger`` does. The batches are built in numpy as zoo's pipeline builds
them under XLA (shuffled sentences, bucketed by length, a word budget per batch, padded to the
bucket's bound, word dropout), except that a bucket's last, partial batch of an epoch is padded
with empty sentences to the bucket's batch size, so that each bucket is one compiled shape (an
empty sentence adds nothing to the CRF's loss, but counts as a row in the batch's mean); and
the buckets are ``--bucket-width`` wide (32 by default, the preset's 8 makes 32 shapes to
compile). The kept weights then tag dev (Viterbi or argmax, ``jax.jit``); ``report`` writes
accuracy overall and on OOV words (no word embedding: unseen in training or seen once).
``run`` never imports TensorFlow: it blocks the import, so a run here proves it.
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
TITLE = "Tagger sweep on a GPU (JAX): dev UPOS accuracy of training settings (small shape)"

_WIDTHS = {"char_kernel_size": (2, 3, 4, 5), "char_filters": 64}  # 4 x 64 = 256 features

# name -> fields of the `small` preset that change (zoo.models.tagger.TaggerConfig). The shipped
# tagger is `small`: CRF, relative attention, 3 layers of d128, dropout 0.3, word dropout 0.25.
ROWS = {
    "small as shipped": {},
    "character widths 2-5": _WIDTHS,
    "character widths 2-5, XPOS head": {**_WIDTHS, "num_xpos_tags": 1},  # the vocabulary sets 49
    "XPOS head": {"num_xpos_tags": 1},
    "word dropout 0.1": {"word_dropout": 0.1},
    "word dropout 0.4": {"word_dropout": 0.4},
    "words seen once keep an embedding (min count 1)": {"min_word_count": 1},
    "dropout 0.2": {"dropout": 0.2},
    "dropout 0.4": {"dropout": 0.4},
    "lr 1e-3": {"learning_rate": 1e-3},
    "lr 4e-3": {"learning_rate": 4e-3},
    "4 layers": {"num_layers": 4},
    "d_model 192, ff 768": {"d_model": 192, "ff_dim": 768, "num_heads": 4},
    "character embedding 64, 384 filters": {"char_embedding_dim": 64, "char_filters": 384},
    "softmax head, label smoothing 0.1": {"use_crf": False, "label_smoothing": 0.1},
    "batch 512 words": {"batch_tokens": 512},
}

VOCABULARY = "vocab-{}"  # DIR's folder of one vocabulary's settings: encoded.npz, sizes.json
VOCABULARY_FIELDS = ("lowercase", "min_word_count", "max_word_length")
HISTORY = gpu_rows.HISTORY  # OUT/<row>/: the row's epochs, timings, settings and dev scores
SPLITS = ("train", "dev")


def _vocabulary_folder(config):
    return VOCABULARY.format("-".join(str(getattr(config, f)) for f in VOCABULARY_FIELDS))


def _row_config(name, epochs):
    from zoo.tasks.tagging.config import get_config

    return get_config("small", epochs=epochs, **ROWS[name])


# ------------------------------------------------------------------------------------ prepare
def prepare(args):
    """Build each vocabulary the rows need; keep train and dev encoded."""
    from zoo.data import bucket_spec
    from zoo.data.tagging_pipeline import _encode_flat, split_long_sentences
    from zoo.models import TaggerPreprocessor
    from zoo.tasks import get_task

    task = get_task("tagger")
    rows = gpu_rows.selected(ROWS, args.rows)
    configs = [_row_config(name, 1) for name in rows]
    sizes = (configs[0].batch_tokens, configs[0].max_length, 8)
    assert gpu_rows.bucket_spec(*sizes) == bucket_spec(*sizes), "the numpy batches drifted"
    os.makedirs(args.dir, exist_ok=True)
    data = {split: task.load_data(split) for split in SPLITS}
    for folder_name in sorted({_vocabulary_folder(c) for c in configs}):
        config = next(c for c in configs if _vocabulary_folder(c) == folder_name)
        folder = os.path.join(args.dir, folder_name)
        os.makedirs(folder, exist_ok=True)
        task.make_vocabulary(config, folder, data["train"])  # the tagger task's recipe
        vocabulary = task.load_vocabulary(folder)
        arrays = {}
        for split in SPLITS:
            sentences = [s for s in split_long_sentences(data[split], config.max_length) if s.words]
            words, chars, labels, lengths, _ = _encode_flat(
                sentences, TaggerPreprocessor(vocabulary), ("upos", "xpos"))
            for key, array in (("words", words), ("chars", chars), ("upos", labels["upos"]),
                               ("xpos", labels["xpos"]), ("lengths", lengths)):
                arrays[f"{split}_{key}"] = array.astype("int32")
        np.savez_compressed(os.path.join(folder, "encoded.npz"), **arrays)
        gpu_rows.write_json(os.path.join(folder, "sizes.json"), {
            **vocabulary.config_overrides(), "num_xpos_tags": vocabulary.num_xpos_tags})
        oov = float(np.mean(arrays["dev_words"] == 1))
        print(f"{folder}: {vocabulary.config_overrides()}, {len(arrays['train_lengths'])} train "
              f"and {len(arrays['dev_lengths'])} dev sentences, {100 * oov:.1f} % of dev words "
              "OOV", flush=True)


def _sentences(folder, split):
    """``[(words, chars, upos, xpos)]`` of a prepared split, one tuple of arrays per sentence."""
    with np.load(os.path.join(folder, "encoded.npz")) as data:
        ends = np.cumsum(data[f"{split}_lengths"])[:-1]
        parts = [np.split(data[f"{split}_{key}"], ends) for key in ("words", "chars", "upos",
                                                                      "xpos")]
    return list(zip(*parts))


# ---------------------------------------------------------------------------------------- run
def run(args):
    """Train and score each row in its own process, ``--parallel`` at a time."""
    gpu_rows.block_absent_modules("tagger_sweep_gpu.py")
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before zoo imports Keras
    rows = gpu_rows.selected(ROWS, args.rows)
    for name in rows:
        folder = os.path.join(args.dir, _vocabulary_folder(_row_config(name, 1)))
        if not os.path.exists(os.path.join(folder, "encoded.npz")):
            sys.exit(f"{folder}: missing; run `prepare` with these rows first")
    forwarded = ["--epochs", str(args.epochs), "--seed", str(args.seed),
                 "--bucket-width", str(args.bucket_width)]
    for option in ("limit_train", "limit_dev", "train_seconds"):
        if getattr(args, option) is not None:
            forwarded += ["--" + option.replace("_", "-"), str(getattr(args, option))]
    codes, wall = gpu_rows.launch(__file__, args.dir, args.out, rows, forwarded, args.parallel)
    gpu_rows.write_json(os.path.join(args.out, gpu_rows.RUN), {
        "rows": rows, "parallel": args.parallel, "epochs": args.epochs,
        "train_seconds": args.train_seconds, "bucket_width": args.bucket_width,
        "wall_seconds": round(wall, 1), "exit_codes": codes})
    print(f"\nwall {wall:.0f} s for {len(rows)} rows")
    for name in rows:
        history = gpu_rows.row_history(args.out, name)
        if history is not None:
            seconds = [e["seconds"] for e in history["epochs"]]
            print(f"{name}: {len(seconds)} epochs, {sum(seconds):.0f} s (first {seconds[0]:.0f} "
                  f"s), dev {history.get('dev', {}).get('accuracy', '-')}", flush=True)
    if any(codes.values()):
        sys.exit(f"rows failed: {[name for name, code in codes.items() if code]}")


def _batches(sentences, config, bucket_width, order, full_rows, word_dropout=0.0, rng=None):
    """The batches of one pass over ``sentences`` in ``order``, as zoo's pipeline makes them
    under XLA: each sentence goes to the first bucket whose bound holds it; a bucket's batch
    goes out when it is full, padded to the bound; the partial batches go out last, padded
    with empty sentences to the full batch size when ``full_rows``. Word dropout replaces real
    word ids by the OOV id (1), the characters kept."""
    upper, sizes = gpu_rows.bucket_spec(config.batch_tokens, config.max_length, bucket_width)
    xpos = bool(config.num_xpos_tags)
    pending, batches = [[] for _ in upper], []

    def batch(indices, bucket, rows):
        width = upper[bucket]
        words = np.zeros((rows, width), "int32")
        chars = np.zeros((rows, width, config.max_word_length), "int32")
        upos = np.zeros((rows, width), "int32")
        xpos_ids = np.zeros((rows, width), "int32")
        for row, index in enumerate(indices):
            w, c, u, x = sentences[index]
            words[row, : len(w)], chars[row, : len(w)] = w, c
            upos[row, : len(w)], xpos_ids[row, : len(w)] = u, x
        if word_dropout:
            drop = (rng.random(words.shape) < word_dropout) & (words != 0)
            words = np.where(drop, 1, words)
        labels = {"upos": upos, "xpos": xpos_ids} if xpos else upos
        return {"words": words, "chars": chars}, labels

    for index in order:
        bucket = bisect.bisect_left(upper, len(sentences[index][0]))
        pending[bucket].append(index)
        if len(pending[bucket]) == sizes[bucket]:
            batches.append(batch(pending[bucket], bucket, sizes[bucket]))
            pending[bucket] = []
    for bucket, indices in enumerate(pending):
        if indices:
            batches.append(batch(indices, bucket, sizes[bucket] if full_rows else len(indices)))
    return batches


def _compile(model, config):
    """As TaggingTask.compile_model (whose module imports TensorFlow through zoo.data)."""
    from zoo.layers import CRFAccuracy, CRFLoss

    losses = gpu_rows.training_module("losses")
    metrics = gpu_rows.training_module("metrics")
    optimizer = gpu_rows.training_module("optimizer")

    def loss_and_metric():
        if config.use_crf:
            return CRFLoss(), CRFAccuracy(name="accuracy")
        loss = losses.MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing, pad_id=-1)
        return loss, metrics.MaskedAccuracy(name="accuracy")

    heads = ["upos", "xpos"] if config.num_xpos_tags else ["upos"]
    pairs = {head: loss_and_metric() for head in heads}
    if len(heads) == 1:
        loss, metric = pairs["upos"][0], [pairs["upos"][1]]
    else:
        loss = {head: pair[0] for head, pair in pairs.items()}
        metric = {head: [pair[1]] for head, pair in pairs.items()}
    model.compile(optimizer=optimizer.make_optimizer(config), loss=loss, metrics=metric,
                  jit_compile=True)


def _tag(model, config, batches):
    """The UPOS ids the model gives every real word of ``batches``, flat, in batch order."""
    import jax

    from zoo.layers import crf_decode

    decode = jax.jit(crf_decode)
    predicted = []
    for features, _ in batches:
        outputs = model.predict_on_batch(features)
        if isinstance(outputs, dict):
            outputs = outputs["upos"]
        mask = features["words"] != 0
        if config.use_crf:
            tags = np.asarray(decode(outputs, mask)[0])
        else:
            tags = np.argmax(outputs, axis=-1)
        predicted.append(tags[mask])
    return np.concatenate(predicted)


def train_row(args):
    """One row, in this process: train, keep the best dev epoch's EMA weights, tag dev."""
    name, tag = gpu_rows.start_row("tagger_sweep_gpu.py", ROWS, args.rows)
    import keras

    from zoo.models.tagger import build_tagger

    config = _row_config(name, args.epochs)
    vocabulary = os.path.join(args.dir, _vocabulary_folder(config))
    with open(os.path.join(vocabulary, "sizes.json")) as f:
        sizes = json.load(f)
    if not config.num_xpos_tags:
        sizes["num_xpos_tags"] = 0
    config = dataclasses.replace(config, **sizes)  # as TaggingTask.resolve_config
    folder = os.path.join(args.out, gpu_rows.slug(name))
    os.makedirs(folder, exist_ok=True)
    device = gpu_rows.device_line()
    print(f"{tag} {device}; {name}: {ROWS[name]}", flush=True)
    train = _sentences(vocabulary, "train")[: args.limit_train]
    dev = _sentences(vocabulary, "dev")[: args.limit_dev]
    keras.utils.set_random_seed(args.seed)
    model = build_tagger(config)
    _compile(model, config)
    rng = np.random.default_rng(args.seed)
    dev_batches = _batches(dev, config, args.bucket_width, range(len(dev)), full_rows=False)
    monitored = "val_upos_accuracy" if config.num_xpos_tags else "val_accuracy"
    history = {"name": name, "overrides": {k: list(v) if isinstance(v, tuple) else v
                                           for k, v in ROWS[name].items()},
               "config": dataclasses.asdict(config), "device": device,
               "epochs_asked": args.epochs, "train_sentences": len(train),
               "dev_sentences": len(dev), "bucket_width": args.bucket_width, "seed": args.seed,
               "parameters": model.count_params(), "epochs": [], "finished": False}

    def epochs():
        """Every epoch's batches, one after another: one fit runs them all (the number of
        batches of an epoch is fixed: every bucket holds the same sentences each epoch)."""
        while True:
            order = rng.permutation(len(train))
            yield from _batches(train, config, args.bucket_width, order, full_rows=True,
                                word_dropout=config.word_dropout, rng=rng)

    steps = len(_batches(train, config, args.bucket_width, range(len(train)), full_rows=True))

    def dev_forever():
        while True:
            yield from dev_batches

    class Keep(keras.callbacks.Callback):
        """After SwapEMAWeights: the model holds the EMA weights here, as they were validated."""

        best, began, trained = None, time.monotonic(), 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self.began = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            seconds = time.monotonic() - self.began
            self.trained += seconds
            record = {k: round(float(v), 5) for k, v in logs.items()}
            history["epochs"].append({"epoch": epoch + 1, **record, "seconds": round(seconds, 2)})
            history["train_seconds"] = round(self.trained, 1)
            if self.best is None or logs[monitored] > self.best[0]:
                self.best = (logs[monitored], epoch + 1, self.model.get_weights())
            gpu_rows.write_json(os.path.join(folder, HISTORY), history)
            print(f"{tag} epoch {epoch + 1}/{config.epochs}: loss {record['loss']:.4f}, "
                  f"{monitored} {logs[monitored]:.4f} ({seconds:.1f} s, {steps} steps)",
                  flush=True)
            if args.train_seconds is not None and self.trained >= args.train_seconds:
                self.model.stop_training = True
                print(f"{tag} stopped after {epoch + 1} epochs: --train-seconds "
                      f"{args.train_seconds}", flush=True)

    keep = Keep()
    swap = [keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if config.ema_momentum else []
    model.fit(epochs(), steps_per_epoch=steps, epochs=config.epochs,
              validation_data=dev_forever(), validation_steps=len(dev_batches),
              callbacks=[*swap, keep], verbose=0)
    _, best_epoch, weights = keep.best
    model.set_weights(weights)
    predicted = _tag(model, config, dev_batches)
    gold, words = [], []
    for features, labels in dev_batches:
        real = features["words"] != 0
        gold.append((labels["upos"] if isinstance(labels, dict) else labels)[real])
        words.append(features["words"][real])
    gold, words = np.concatenate(gold), np.concatenate(words)
    right, oov = predicted == gold, words == 1
    history["dev"] = {"best_epoch": best_epoch, "words": int(right.size),
                      "accuracy": round(100 * float(right.mean()), 2),
                      "oov_words": int(oov.sum()),
                      "oov_accuracy": round(100 * float(right[oov].mean()), 2)}
    history["finished"] = True
    gpu_rows.write_json(os.path.join(folder, HISTORY), history)
    gpu_rows.assert_nothing_absent_imported()
    print(f"{tag} done: {len(history['epochs'])} epochs in {keep.trained:.0f} s; dev "
          f"{history['dev']}", flush=True)


# ------------------------------------------------------------------------------------- report
CURVE = (4, 7, 10, 13, 16)  # the epochs whose dev accuracy the table shows


def report(args):
    """The table of the finished rows of one or more runs (OUT folders), to RESULTS.md."""
    from common import markdown_table, publish_table

    rows, devices, subsets, notes = [], set(), set(), []
    for number, out in enumerate(args.out, 1):
        settings = gpu_rows.run_settings(out)
        stop = (f", stopped after {settings['epochs']} epochs or the epoch that passed "
                f"{settings['train_seconds']:.0f} s of training (the first epoch's compiling "
                "included), whichever came first" if settings.get("train_seconds") else "")
        notes.append(f"run {number}: {settings.get('parallel', '?')} rows at a time on the one "
                     f"GPU{stop}")
        for _, history in gpu_rows.finished_histories(out, ROWS):
            devices.add(history["device"])
            subsets.add((history["train_sentences"], history["dev_sentences"]))
            done, dev = len(history["epochs"]), history["dev"]
            key = "val_upos_accuracy" if history["config"]["num_xpos_tags"] else "val_accuracy"
            curve = [f"{100 * history['epochs'][e - 1][key]:.2f}" if e <= done else "-"
                     for e in CURVE]
            rows.append([
                history["name"], number,
                done if done == history["epochs_asked"] else f"{done} of {history['epochs_asked']}",
                round(history["train_seconds"] / 60, 1), f"{history['parameters']:,}",
                " / ".join(curve), dev["best_epoch"], f"{dev['accuracy']:.2f}",
                f"{dev['oov_accuracy']:.2f}",
            ])
    if not rows:
        sys.exit(f"{args.out}: no finished rows")
    header = ["settings (on `small`)", "run", "epochs", "GPU train minutes", "parameters",
              f"dev accuracy after epochs {', '.join(map(str, CURVE))} (training's metric)",
              "best dev epoch", "dev UPOS accuracy", "dev UPOS accuracy on OOV words"]
    print("\n".join(markdown_table(header, rows)))
    if args.no_record:
        return
    notes = [
        f"trained on {'; '.join(sorted(devices))}; train minutes are wall-clock, validation "
        "and the first epoch's compiling included",
        *notes,
        "zoo's builder, loss, metric and optimizer, Keras fit on word-budget batches built in "
        "numpy as zoo's pipeline builds them under XLA (see the script's docstring); the EMA "
        "weights of the epoch with the best dev accuracy are scored, as zoo train tagger keeps "
        "them",
        "UD English-EWT dev, every word; OOV: no word embedding (unseen in training or seen "
        "once; with min count 1, unseen only); test is not read",
    ]
    if len(subsets) > 1 or next(iter(subsets))[0] < 12000:
        notes.append(f"subsets: (train sentences, dev sentences) {sorted(subsets)}")
    publish_table(TITLE, "python benchmarks/studies/tagger_sweep_gpu.py prepare|run|report "
                         "(see its docstring)", header, rows, notes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "run", "report", "row"),
                        help="row: one row in this process (what run starts for each row)")
    parser.add_argument("dir", help="the vocabularies and encoded data (written by prepare)")
    parser.add_argument("out", nargs="*",
                        help="the histories and scores (written by run; report reads several)")
    parser.add_argument("--rows", nargs="+", metavar="NAME",
                        help="these rows (names or folder names) only; default all")
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--parallel", type=int, default=8, help="rows trained at once")
    parser.add_argument("--train-seconds", type=float,
                        help="stop a row's training after the epoch that passes this (the "
                             "first epoch's compiling counts)")
    parser.add_argument("--limit-train", type=int, help="the first K training sentences only")
    parser.add_argument("--limit-dev", type=int, help="the first K dev sentences only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucket-width", type=int, default=32,
                        help="the width of the length buckets: each is one compiled shape")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    if args.step in ("run", "row"):
        if len(args.out) != 1:
            parser.error(f"{args.step} needs one OUT")
        args.out = args.out[0]
    elif args.step == "report" and not args.out:
        parser.error("report needs OUT")
    if args.step == "row" and len(gpu_rows.selected(ROWS, args.rows)) != 1:
        parser.error("row takes exactly one --rows NAME")
    {"prepare": prepare, "run": run, "report": report, "row": train_row}[args.step](args)


if __name__ == "__main__":
    main()
