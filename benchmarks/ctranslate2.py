"""zoo against CTranslate2 on the same weights: the speed of the searches a user runs.

CTranslate2 is the inference engine that OpenNMT and fairseq users convert their models to. This
script converts a zoo translator's weights to a CTranslate2 model (:func:`ctranslate2_spec`),
checks that both give the same greedy translations (a conversion that differs is a failed
benchmark, not a slower peer), then times the same sentences, strings in and strings out, on:

- zoo in process: ``Translator.generate`` (its search compiled by XLA);
- zoo served: the SavedModel's ``_xla`` signatures (``translate_greedy_xla``, ``translate_xla``)
  and its plain ones (``translate_greedy``, ``serving_default``), which a stock TF Serving runs;
- zoo in process quantized to int8 (``quantize("int8")``; the shipped model only);
- CTranslate2 float32 at 1 and 2 threads, and int8 at 1 thread, each in a process of its own
  (two models in one process ran 10x slower here).

Each row (greedy and beam 4, at batch 1 and batch 64) runs every system in turn, round after
round; a figure is the median of the rounds (sentences per second) with its spread (lowest to
highest). The ratio is zoo's time over CTranslate2 float32's at its better thread setting (zoo
int8's: over CTranslate2 int8's).

    python benchmarks/ctranslate2.py                  # the shipped translator and a base-sized one
    python benchmarks/ctranslate2.py --sizes shipped --rounds 5 --no-record
"""

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Python puts this folder first on the path, where this file would stand for the package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
import ctranslate2  # noqa: E402
import numpy as np  # noqa: E402

SHIPPED = os.path.join(ROOT, "saved_models", "translator-en-de")
TITLE = "CTranslate2 on the same weights (sentences per second)"
# The rows of each size: (search, beam size, batch size, sentences of test2016), as few as keep
# `make bench` within its 30 minutes on 2 cores with both sizes (the plain signatures take half
# of a shipped round; the base model is about 20 times slower than the shipped one).
SIZES = {
    "shipped": [("greedy", 1, 1, 50), ("beam 4", 4, 1, 50), ("greedy", 1, 64, 192),
                ("beam 4", 4, 64, 192)],
    "base": [("greedy", 1, 1, 5), ("beam 4", 4, 1, 5), ("greedy", 1, 64, 64),
             ("beam 4", 4, 64, 64)],
}
INT8 = "zoo int8 in process (XLA)"  # its ratio is to CTranslate2 int8's time
CT2_SYSTEMS = {"CT2 float32, 1 thread": ("float32", 1), "CT2 float32, 2 threads": ("float32", 2),
               "CT2 int8, 1 thread": ("int8", 1)}  # fmt: skip
# The base Transformer (Vaswani et al. 2017) with random weights: its searches run to this many
# tokens (EOS cannot win, see base_translator): the 90th percentile of test2016's references
# (benchmarks/decode.py), 32 until make bench outgrew its 30 minutes.
BASE_OUTPUT_LENGTH = 24


# ---------------------------------------------------------------- conversion
def ctranslate2_spec(translator):
    """A CTranslate2 ``TransformerSpec`` holding ``translator``'s weights.

    What zoo's translator is, in CTranslate2's terms: pre-LN or post-LN blocks, ReLU, layer
    normalization (epsilon 1e-5, which CTranslate2 uses too), token embeddings scaled by
    sqrt(d) and shared by encoder, decoder and the output projection, and zoo's own sinusoidal
    table (sines on even features, cosines on odd ones, from position 0). Keras kernels are
    (in, out) where CTranslate2's are (out, in); self-attention's fused QKV keeps its layout, and
    cross attention's key and value projections become one.
    """
    from ctranslate2.specs import common_spec, transformer_spec

    from zoo.layers import sinusoidal_encoding

    backbone = translator.backbone
    config = backbone.architecture
    if not (config.position == "sinusoidal" and config.attention == "mha"
            and config.activation == "relu" and config.share_embeddings
            and config.cross_attention_score == "scaled_dot" and not config.copy_mechanism):
        raise ValueError("Only the plain Transformer converts (sinusoidal positions, MHA, ReLU, "
                         "shared embeddings, no copy mechanism).")  # fmt: skip
    weights = {w.path: keras_to_numpy(w) for w in backbone.weights}
    spec = transformer_spec.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers), config.num_heads,
        pre_norm=config.normalize_first, activation=common_spec.Activation.RELU)  # fmt: skip
    embeddings = weights["embedding/token_embedding/embeddings"]
    positions = keras_to_numpy(sinusoidal_encoding(config.max_length, config.d_model))
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embeddings
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings  # tied: logits = h E^T
    spec.decoder.projection.bias = np.zeros(len(embeddings), "float32")

    def linear(target, prefix, *names):  # one CTranslate2 linear from Keras Dense layers
        target.weight = np.concatenate([weights[f"{prefix}/{n}/kernel"].T for n in names])
        target.bias = np.concatenate([weights[f"{prefix}/{n}/bias"] for n in names])

    def norm(target, name):
        target.gamma, target.beta = weights[f"{name}/gamma"], weights[f"{name}/beta"]

    def feed_forward(target, block):
        norm(target.layer_norm, f"{block}/feed_forward_norm")
        linear(target.linear_0, f"{block}/feed_forward", "inner")
        linear(target.linear_1, f"{block}/feed_forward", "output")

    for i, layer in enumerate(spec.encoder.layer):
        block = f"encoder_block_{i}"
        norm(layer.self_attention.layer_norm, f"{block}/self_attention_norm")
        linear(layer.self_attention.linear[0], f"{block}/self_attention", "qkv")
        linear(layer.self_attention.linear[1], f"{block}/self_attention", "output")
        feed_forward(layer.ffn, block)
    for i, layer in enumerate(spec.decoder.layer):
        block = f"decoder_block_{i}"
        norm(layer.self_attention.layer_norm, f"{block}/self_attention_norm")
        linear(layer.self_attention.linear[0], f"{block}/self_attention", "qkv")
        linear(layer.self_attention.linear[1], f"{block}/self_attention", "output")
        norm(layer.attention.layer_norm, f"{block}/cross_attention_norm")
        linear(layer.attention.linear[0], f"{block}/cross_attention", "query")
        linear(layer.attention.linear[1], f"{block}/cross_attention", "key", "value")
        linear(layer.attention.linear[2], f"{block}/cross_attention", "output")
        feed_forward(layer.ffn, block)
    if config.normalize_first:
        norm(spec.encoder.layer_norm, "encoder_norm")
        norm(spec.decoder.layer_norm, "decoder_norm")

    tokenizer = translator.preprocessor.tokenizer
    pieces = [p.decode() for p in tokenizer.id_to_piece(np.arange(tokenizer.vocab_size))
              .numpy()]  # fmt: skip
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = (
        pieces[tokenizer.unk_id], pieces[tokenizer.bos_id], pieces[tokenizer.eos_id])
    spec.config.decoder_start_token = pieces[tokenizer.bos_id]
    return spec


def keras_to_numpy(x):
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x), "float32")


def convert(translator, folder, sentencepiece_model):
    """Write the CTranslate2 model of ``translator`` (float32; int8 is chosen when loading) and
    its SentencePiece model into ``folder``."""
    import shutil

    spec = ctranslate2_spec(translator)
    spec.validate()
    spec.optimize(quantization=None)
    spec.save(folder)
    shutil.copy(sentencepiece_model, os.path.join(folder, "sentencepiece.model"))
    return folder


# ---------------------------------------------------------------- a CTranslate2 process
def ct2_worker(folder, compute_type, threads):
    """Serve one CTranslate2 model over stdin/stdout, one JSON request per line: ``{"sentences",
    "beam", "batch", "max_length", "positions"}`` -> ``{"seconds", "outputs"}``, strings in and
    out; the seconds count tokenizing, the search and detokenizing."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(folder, "sentencepiece.model"))
    translator = ctranslate2.Translator(folder, device="cpu", compute_type=compute_type,
                                        inter_threads=1, intra_threads=threads)  # fmt: skip
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sentences, batch = request["sentences"], request["batch"]
        fixed = request.get("max_length")  # a fixed output length (random weights)
        start = time.perf_counter()
        outputs, capped = [], []
        for i in range(0, len(sentences), batch):
            tokens = sp.encode(sentences[i : i + batch], out_type=str)
            # zoo's room for a batch's translations (zoo.decoding.output_length), within the
            # model's positions.
            width = max(map(len, tokens))
            limit = fixed or min(width + width // 5 + 10, request["positions"] - 1)
            results = translator.translate_batch(
                tokens, beam_size=request["beam"], max_batch_size=batch,
                max_decoding_length=limit, min_decoding_length=fixed or 0)  # fmt: skip
            outputs += sp.decode([r.hypotheses[0] for r in results])
            capped += [len(r.hypotheses[0]) >= limit for r in results]  # stopped by the limit
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "outputs": outputs, "capped": capped}), flush=True)


class CT2Process:
    """A :func:`ct2_worker` in a process of its own."""

    def __init__(self, folder, compute_type, threads, positions):
        self.positions = positions
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--ct2-worker", folder, compute_type,
             str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        self._read()  # loaded

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the CTranslate2 process stopped")
        return json.loads(line)

    def translate(self, sentences, beam, batch, max_length=None):
        request = {"sentences": sentences, "beam": beam, "batch": batch, "max_length": max_length,
                   "positions": self.positions}  # fmt: skip
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self._read()
        self.capped = reply["capped"]
        return reply["seconds"], reply["outputs"]

    def close(self):
        self.process.stdin.close()
        self.process.wait()


# ---------------------------------------------------------------- zoo's systems
def in_process(translator, max_length=None):
    """``run(sentences, beam, batch)`` -> ``(seconds, outputs)`` of ``translator.generate``."""

    def run(sentences, beam, batch):
        method = {"method": "greedy"} if beam == 1 else {"method": "beam", "beam_size": beam}
        start = time.perf_counter()
        outputs = translator.generate(sentences, batch_size=batch, max_length=max_length,
                                      **method)  # fmt: skip
        return time.perf_counter() - start, outputs

    return run


def zoo_systems(translator, serving_folder, max_length=None):
    """name -> ``run(sentences, beam, batch)`` -> ``(seconds, outputs)``: zoo in process, and,
    when ``serving_folder`` is given (the shipped model), zoo in process quantized to int8 and
    its SavedModel's ``_xla`` and plain signatures."""
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    systems = {"zoo in process (XLA)": in_process(translator, max_length)}
    if serving_folder is None:
        return systems
    int8 = keras.models.load_model(os.path.join(SHIPPED, "model.keras"))
    int8.quantize("int8")
    systems[INT8] = in_process(int8, max_length)
    loaded = tf.saved_model.load(serving_folder)

    def served(greedy_name, beam_name):
        def run(sentences, beam, batch):
            signature = loaded.signatures[greedy_name if beam == 1 else beam_name]
            start = time.perf_counter()
            outputs = []
            for i in range(0, len(sentences), batch):
                texts = signature(inputs=tf.constant(sentences[i : i + batch]))["translations"]
                outputs += [t.decode("utf-8") for t in texts.numpy()]
            return time.perf_counter() - start, outputs

        return run

    systems["zoo served, _xla signatures"] = served("translate_greedy_xla", "translate_xla")
    systems["zoo served, plain signatures"] = served("translate_greedy", "serving_default")
    return systems


# ---------------------------------------------------------------- the two sizes
def shipped_translator():
    import keras

    import zoo  # noqa: F401  (registers zoo's classes)
    from zoo.artifacts import latest_serving_path

    translator = keras.models.load_model(os.path.join(SHIPPED, "model.keras"))
    serving = latest_serving_path(SHIPPED)
    if serving is None:
        raise SystemExit(f"{SHIPPED} has no SavedModel under serving/.")
    return translator, os.path.join(SHIPPED, "sentencepiece.model"), serving


def base_translator():
    """The base Transformer (6 + 6 blocks, d 512, 8 heads, FF 2048; pre-LN, as zoo's presets) with
    random weights and the shipped vocabulary. EOS's embedding row is zero, so its logit is 0
    while thousands of random rows score above it: every search runs BASE_OUTPUT_LENGTH steps."""
    import keras

    from zoo.models import Translator, TranslatorPreprocessor
    from zoo.models.translator import TranslatorBackbone
    from zoo.tasks.translation.config import get_config

    shipped, sentencepiece_model, _ = shipped_translator()
    config = get_config("base", vocab_size=shipped.preprocessor.tokenizer.vocab_size)
    keras.utils.set_random_seed(0)
    backbone = TranslatorBackbone.from_architecture(config)
    table = backbone.get_layer("embedding").token_embedding.embeddings
    rows = keras.ops.convert_to_numpy(table)
    rows[shipped.preprocessor.tokenizer.eos_id] = 0.0
    table.assign(rows)
    preprocessor = TranslatorPreprocessor(shipped.preprocessor.tokenizer,
                                          max_length=config.max_length)  # fmt: skip
    return Translator(backbone=backbone, preprocessor=preprocessor), sentencepiece_model, None


# ---------------------------------------------------------------- the measurement
def same_greedy(zoo_outputs, ct2_outputs, ct2_capped):
    """Raise unless CTranslate2's greedy translations are zoo's, naming the first that differs;
    return how many are equal up to CTranslate2's length limit only. A batch's room for its
    translations follows its widest source, which zoo pads to a bucket first: where a
    translation runs on to CTranslate2's limit, zoo's may go on a few tokens more."""
    cut = 0
    for i, (ours, theirs) in enumerate(zip(zoo_outputs, ct2_outputs, strict=True)):
        if ours != theirs and not (ct2_capped[i] and ours.startswith(theirs)):
            raise SystemExit(f"The conversion differs: greedy translation {i} is {ours!r} in zoo "
                             f"and {theirs!r} in CTranslate2; no timing is meaningful.")
        cut += ours != theirs
    return cut


def measure(size, rounds, rows, fixed_length=None):
    """``{(search, batch): {system: [sentences per second, one per round]}}`` for one model."""
    from zoo.data import load_multi30k

    translator, sentencepiece_model, serving_folder = (
        shipped_translator() if size == "shipped" else base_translator())
    sentences = [source for source, _ in load_multi30k("test2016")]
    folder = convert(translator, tempfile.mkdtemp(prefix="zoo-ct2-"), sentencepiece_model)
    systems = zoo_systems(translator, serving_folder, max_length=fixed_length)
    positions = translator.preprocessor.max_length
    processes = {name: CT2Process(folder, *setting, positions)
                 for name, setting in CT2_SYSTEMS.items()}  # fmt: skip
    for name, process in processes.items():
        systems[name] = functools.partial(process.translate, max_length=fixed_length)
    try:
        # The check, on 100 sentences, before any timing.
        _, reference = systems["zoo in process (XLA)"](sentences[:100], 1, 64)
        for name, process in processes.items():
            if "float32" in name:
                cut = same_greedy(reference, process.translate(sentences[:100], 1, 64,
                                                               fixed_length)[1], process.capped)
        print(f"{size}: CTranslate2 float32's greedy translations are zoo's: {100 - cut} of 100 "
              f"equal, {cut} equal up to CTranslate2's length limit", flush=True)
        figures = {(search, batch): {name: [] for name in systems} for search, _, batch, _ in rows}
        start = time.perf_counter()
        for number in range(rounds + 1):  # round 0 warms up: XLA compiles each padded shape
            for search, beam, batch, count in rows:
                for name, run in systems.items():
                    # Only XLA compiles a program per shape: the others warm up on one batch.
                    warm_up_all = "XLA" in name or "_xla" in name
                    taken = count if number or warm_up_all else min(count, batch)
                    seconds, _ = run(sentences[:taken], beam, batch)
                    if number:
                        figures[(search, batch)][name].append(count / seconds)
            print(f"{size}: round {number} of {rounds} done "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        return figures
    finally:
        for process in processes.values():
            process.close()


def table_rows(size, figures):
    rows = []
    for (search, batch), by_system in figures.items():
        ct2 = max(statistics.median(by_system[n]) for n in CT2_SYSTEMS if "float32" in n)
        ct2_int8 = statistics.median(by_system["CT2 int8, 1 thread"])
        for name, speeds in by_system.items():
            median = statistics.median(speeds)
            ratio = "" if name.startswith("CT2") else f"{ct2 / median:.2f}x"
            if name == INT8:
                ratio = f"{ct2_int8 / median:.2f}x of CT2 int8"
            rows.append([size, search, batch, name, f"{median:.1f}",
                         f"{min(speeds):.1f}-{max(speeds):.1f}", ratio])  # fmt: skip
    return rows


def main(argv=None):
    if argv is None and sys.argv[1:2] == ["--ct2-worker"]:
        return ct2_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=["shipped", "base"],
                        default=["shipped", "base"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args(argv)
    from zoo_cli import quiet_native_logs

    quiet_native_logs()
    sys.path.insert(0, HERE)
    import common

    rows = []
    for size in args.sizes:
        fixed = None if size == "shipped" else BASE_OUTPUT_LENGTH
        rows += table_rows(size, measure(size, args.rounds, SIZES[size], fixed))
    header = ["model", "search", "batch", "system", "sentences/s (median)", "spread",
              "zoo's time / CT2 float32's (best threads)"]  # fmt: skip
    for line in common.markdown_table(header, rows):
        print(line)
    if not args.no_record:
        command = "python benchmarks/ctranslate2.py " + " ".join(argv or sys.argv[1:])
        common.publish_table(TITLE, command.strip(), header, rows, notes=[
            f"medians of {args.rounds} alternating rounds after a warm-up, CTranslate2 "
            f"{ctranslate2.__version__}, each of its models in a process of its own",
            f"the shipped translator: {SIZES['shipped'][0][3]} sentences of test2016 at batch 1 "
            f"and {SIZES['shipped'][2][3]} at batch 64; base: random weights, every search "
            f"{BASE_OUTPUT_LENGTH} tokens long, {SIZES['base'][0][3]} sentences at batch 1 and "
            f"{SIZES['base'][2][3]} at batch 64",
        ])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
