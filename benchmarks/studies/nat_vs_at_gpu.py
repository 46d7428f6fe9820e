"""The speed half of nat_vs_at.py on a GPU: the same rows, on Keras's JAX backend.

A GPU machine here has JAX but no TensorFlow, and tf-text tokenizes, so the run has three
steps. The searches are the ones ``translate()`` runs (``translator_search``), each stage
compiled by ``jax.jit``. To bound the compilations, every batch of a batch size has one shape:
the longest source of the run rounded up to 8 tokens (padding never changes a translation),
and 64 rows; every batch runs once untimed first, so compilation is never timed.

    python benchmarks/studies/nat_vs_at_gpu.py prepare DIR     # tokenized test2016 sources
    KERAS_BACKEND=jax python benchmarks/studies/nat_vs_at_gpu.py run DIR OUT  # on the GPU
    python benchmarks/studies/nat_vs_at_gpu.py report DIR OUT  # BLEU and the table, to RESULTS.md

``run`` reads the models from ``--at`` and ``--nat`` (saved_models/ by default) and needs
neither TensorFlow nor tf-text.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AT_ROWS = [("AT greedy", {"method": "greedy"}), ("AT beam 4", {"method": "beam", "beam_size": 4}),
           ("AT beam 5", {"method": "beam", "beam_size": 5})]
NAT_ROWS = [(f"NAT T={t} l={l}", {"method": "mask_predict", "iterations": t, "length_beam": l})
            for t, l in [(1, 1), (1, 3), (4, 3), (10, 5)]]
BUCKET = 8  # the source width is rounded up to a multiple of this, as translate() does


def prepare(args):
    """Tokenize the split's sources with the AT's vocabulary (the NAT shares it)."""
    from zoo.data import SentencePieceTokenizer, load_multi30k

    os.makedirs(args.dir, exist_ok=True)
    pairs = load_multi30k(args.split)[: args.sentences]
    at_vocab = os.path.join(args.at, "sentencepiece.model")
    nat_vocab = os.path.join(args.nat, "sentencepiece.model")
    with open(at_vocab, "rb") as a, open(nat_vocab, "rb") as n:
        if a.read() != n.read():
            sys.exit("The AT and the NAT must share one vocabulary.")
    tokenizer = SentencePieceTokenizer(at_vocab)
    ids = [np.asarray(row, "int32") for row in tokenizer.tokenize([s for s, _ in pairs]).to_list()]
    np.savez(os.path.join(args.dir, "sources.npz"), *ids)
    with open(os.path.join(args.dir, "references.json"), "w") as f:
        json.dump([t for _, t in pairs], f)
    print(f"{len(ids)} {args.split} sources in {args.dir}")


def _pad(rows, width, batch_size):
    """``rows`` as one ``(batch_size, width)`` batch, 0-padded."""
    batch = np.zeros((batch_size, width), "int32")
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch


def run(args):
    """Each row at batch 64 (every sentence) and batch 1 (the first --batch1-sentences)."""
    import jax
    import keras

    import zoo  # noqa: F401  (registers the layers)
    from zoo.models.translator import translator_search
    from zoo.models.translator import translator_layers

    assert keras.backend.backend() == "jax", "run needs KERAS_BACKEND=jax"
    with np.load(os.path.join(args.dir, "sources.npz")) as data:
        sources = [data[f"arr_{i}"] for i in range(len(data.files))]
    models = {name: keras.saving.load_model(os.path.join(folder, "model.keras"), compile=False)
              for name, folder in (("AT", args.at), ("NAT", args.nat))}
    limit = translator_layers(models["AT"]).max_source_length or 10**9
    sources = [s[:limit] for s in sources]
    os.makedirs(args.out, exist_ok=True)
    gpu = jax.devices()[0]
    device = f"{gpu.device_kind} ({gpu.platform}), JAX {jax.__version__}, Keras {keras.__version__}"
    results = {}
    for name, settings in AT_ROWS + NAT_ROWS:
        model = models[name.split()[0]]
        settings = dict(settings)
        method = settings.pop("method")
        search = translator_search(model, method, translator_layers(model).max_length,
                                   compile_stage=jax.jit, **settings)

        def timed(batch_size, count):
            width = -(-max(len(s) for s in sources[:count]) // BUCKET) * BUCKET
            seconds, ids = 0.0, []
            for start in range(0, count, batch_size):
                rows = sources[start : min(start + batch_size, count)]
                batch = _pad(rows, width, batch_size)
                jax.block_until_ready(search(batch))  # compiles, the first time
                began = time.perf_counter()
                out = jax.block_until_ready(search(batch))
                seconds += time.perf_counter() - began
                ids += [np.asarray(row) for row in out[: len(rows)]]
            return ids, 1000 * seconds / count

        ids, ms_64 = timed(64, len(sources))
        _, ms_1 = timed(1, min(args.batch1_sentences, len(sources)))
        results[name] = {"ms_1": ms_1, "ms_64": ms_64}
        print(f"{name}: {ms_1:.2f} ms/sentence at batch 1, {ms_64:.3f} at batch 64", flush=True)
        # Written row by row: a run cut short still leaves the rows it finished.
        width = max(len(row) for row in ids)
        padded = np.stack([np.pad(row, (0, width - len(row))) for row in ids])
        np.save(os.path.join(args.out, _file_name(name)), padded)
        with open(os.path.join(args.out, "times.json"), "w") as f:
            json.dump(dict(results, _device=device), f, indent=1)


def _file_name(row):
    return row.replace(" ", "_").replace("=", "") + ".npy"


def report(args):
    """Detokenize each row's ids (cut after the first EOS), score them, write the table."""
    from common import append_results, markdown_table

    from zoo.data import EOS_ID, SentencePieceTokenizer
    from zoo.evaluation import corpus_bleu

    tokenizer = SentencePieceTokenizer(os.path.join(args.at, "sentencepiece.model"))
    with open(os.path.join(args.dir, "references.json")) as f:
        references = json.load(f)
    with open(os.path.join(args.out, "times.json")) as f:
        times = json.load(f)
    device = times.pop("_device")
    rows, anchor = [], times["AT beam 4"]
    for name, timing in times.items():
        ids = np.load(os.path.join(args.out, _file_name(name)))
        ids = np.where(np.cumsum(ids == EOS_ID, axis=1) > 0, 0, ids)
        texts = [t.decode("utf-8", errors="replace") for t in tokenizer.detokenize(ids).numpy()]
        bleu = corpus_bleu(texts, references)
        rows.append([name, f"{bleu['bleu_lowercase']:.2f}", f"{timing['ms_1']:.2f}",
                     f"{timing['ms_64']:.3f}", f"{anchor['ms_1'] / timing['ms_1']:.1f}x",
                     f"{anchor['ms_64'] / timing['ms_64']:.1f}x"])
    table = markdown_table(["setting", "BLEU (lc)", "ms/sent b1", "ms/sent b64",
                            "speedup vs AT beam 4, b1", "b64"], rows)
    print("\n".join(table))
    if not args.no_record:
        append_results(
            "NAT against AT on a GPU (JAX)",
            "python benchmarks/studies/nat_vs_at_gpu.py prepare|run|report (see its docstring)",
            table,
            notes=[f"the timed run: {device} (the report's machine line is where BLEU was "
                   "scored)", f"AT: {os.path.relpath(args.at, ROOT)}; NAT: {os.path.relpath(args.nat, ROOT)}",
                   f"{len(references)} sentences at batch 64; the first "
                   f"{min(args.batch1_sentences, len(references))} at batch 1"],
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "run", "report"))
    parser.add_argument("dir", help="the tokenized sources (written by prepare)")
    parser.add_argument("out", nargs="?", help="the ids and times (written by run)")
    parser.add_argument("--at", default=os.path.join(ROOT, "saved_models", "translator-en-de"))
    parser.add_argument("--nat", default=os.path.join(ROOT, "saved_models", "nat-en-de"))
    parser.add_argument("--split", default="test2016", choices=("val", "test2016"))
    parser.add_argument("--sentences", type=int, help="the first N sentences (default: all)")
    parser.add_argument("--batch1-sentences", type=int, default=64)
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    if args.step != "prepare" and not args.out:
        parser.error(f"{args.step} needs OUT")
    {"prepare": prepare, "run": run, "report": report}[args.step](args)


if __name__ == "__main__":
    main()
