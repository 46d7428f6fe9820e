"""What each choice of padded shapes costs: the shipped translator's XLA searches in process, on
the same requests, under each ladder of batch and length buckets (``zoo.decoding.text.Buckets``).

Coarser buckets mean fewer XLA programs (each compiled once, about a second here, and what an
export's ``--warmup-xla`` file must cover) but more padding per request. For each ladder, greedy
and beam 4 (the ``_xla`` signatures' searches) on the first 128 sentences of Multi30k test2016
as ``benchmarks/serving.py`` sends them (batch 1 and batch 64, in order), and on one request of
every batch size from 1 to 64 (sentences taken in order, cycling), where the row buckets show.
Each ladder first runs every request once untimed (compiling what it meets); then the ladders are
timed alternately, round by round, and the median is kept. Ratio = the ladder's time over the
finest ladder's (every power of two rows, every multiple of 8 tokens: the ladder before issue 55).

    python benchmarks/studies/bucket_padding.py [--rounds 2] [--no-record]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402  (benchmarks/common.py)

from zoo.data import load_multi30k  # noqa: E402
from zoo.decoding.text import BUCKETS, Buckets, bucketed, translate_strings, xla_compiled  # noqa
from zoo.models import TranslatorPreprocessor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "saved_models", "translator-en-de")
TITLE = "Bucket padding: the cost of fewer XLA programs (ms per sentence, in process)"
FINEST = "rows 1-64 by x2, lengths by 8 (before)"
LADDERS = {
    FINEST: Buckets(rows=(1, 2, 4, 8, 16, 32, 64), lengths=tuple(range(8, 129, 8))),
    "rows 1-64 by x4, lengths 16-128 by x2": Buckets((1, 4, 16, 64), (16, 32, 64, 128)),
    "rows 1-64 by x4, lengths 16, 24, 32, 48, 64, 96, 128": Buckets(
        (1, 4, 16, 64), (16, 24, 32, 48, 64, 96, 128)
    ),
    "rows 1, 8, 64, lengths 16, 24, 32, 48, 64, 96, 128 (shipped)": BUCKETS,
}
SEARCHES = {"greedy": {}, "beam 4": {"beam_size": 4}}


def translate_function(model, tokenizer, method, limit, buckets, **kwargs):
    """What ``model.generate`` runs (the search under XLA in the tf-text frame), on
    ``buckets``."""
    ids = {"bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id, **kwargs}
    search = model.search(model.backbone, method, None, compile_stage=xla_compiled, **ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def run(sentences):
        return translate_strings(sentences, TranslatorPreprocessor(tokenizer, limit),
                                 bucketed(search, limit, buckets))

    return run


def workloads(sentences):
    """name -> list of requests (lists of sentences)."""
    mixed, at = [], 0
    for rows in range(1, 65):
        mixed.append([sentences[(at + i) % len(sentences)] for i in range(rows)])
        at += rows
    return {
        "batch 1": [[s] for s in sentences[:128]],
        "batch 64": [sentences[:64], sentences[64:128]],
        "every batch 1-64": mixed,
    }


def programs(buckets, requests, tokenizer, limit):
    """How many (rows, length) shapes these requests compile under ``buckets``."""
    shapes = set()
    for batch in requests:
        lengths = tokenizer.tokenize(tf.constant(batch)).row_lengths().numpy()
        width = buckets.padded_length(min(int(lengths.max()), limit), limit)
        shapes.add((buckets.padded_rows(len(batch)), width))
    return len(shapes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    print(common.machine_description(), flush=True)
    import zoo  # noqa: F401  (registers zoo's models for load_model)

    model = keras.models.load_model(os.path.join(MODEL, "model.keras"))
    tokenizer, limit = model.preprocessor.tokenizer, model.source_positions(model.backbone)
    sentences = [source for source, _ in load_multi30k("test2016")]
    loads = workloads(sentences)
    rows = []
    for search, kwargs in SEARCHES.items():
        method = "beam" if "beam_size" in kwargs else "greedy"
        for load_name, requests in loads.items():
            count = sum(len(batch) for batch in requests)
            runs = {
                name: (lambda f=translate_function(model, tokenizer, method, limit, buckets,
                                                   **kwargs): [f(tf.constant(b)) for b in requests])
                for name, buckets in LADDERS.items()
            }  # fmt: skip
            seconds = common.time_alternating(runs, steps=1, rounds=args.rounds, warmup=1)
            for name, buckets in LADDERS.items():
                ms = 1000 * seconds[name] / count
                row = [search, load_name, name, programs(buckets, requests, tokenizer, limit),
                       f"{ms:.2f}", f"{seconds[name] / seconds[FINEST]:.2f}"]  # fmt: skip
                rows.append(row)
                print(" | ".join(str(cell) for cell in row), flush=True)
    header = ["search", "requests", "buckets", "programs met", "ms per sentence", "ratio"]
    print("\n".join(common.markdown_table(header, rows)))
    if not args.no_record:
        totals = [f"{name}: {len(b.rows)} x {len(b.widths(limit))} = "
                  f"{len(b.rows) * len(b.widths(limit))} programs per search"
                  for name, b in LADDERS.items()]  # fmt: skip
        notes = [
            f"median of {args.rounds} alternating rounds after an untimed pass that compiles; "
            "ratio = the ladder's time over the finest's",
            "programs per search, all lengths to 128 tokens: " + "; ".join(totals),
        ]
        command = "python benchmarks/studies/bucket_padding.py"
        common.publish_table(TITLE, command, header, rows, notes)


if __name__ == "__main__":
    main()
