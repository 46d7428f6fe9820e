"""Serving against in-process decoding: each shipped model's SavedModel signatures next to the
Python path on the same sentences, at batch 1 and batch 64, in one run.

- translator (``saved_models/translator-en-de``), greedy and beam 4: :func:`zoo.tasks.translate`
  (its search compiled by XLA) against the plain signatures (``translate_greedy``,
  ``serving_default``: graph mode, no XLA, they run on any TF Serving) and the XLA ones
  (``translate_greedy_xla``, ``translate_xla``);
- NAT (``saved_models/nat-en-de``), with the defaults of its ``serving_default``
  (:func:`zoo.models.nat.search.nat_counts`: a CMLM 4 iterations and 3 candidate lengths, a CTC
  NAT, the one shipped now, its one pass): ``translate(..., method="mask_predict")`` against
  ``serving_default`` and ``translate_xla``;
- tagger (``saved_models/tagger-en-ewt``): ``Tagger.tag_columns`` (its own ``tf.function``) against
  ``serving_default``.

The translators read the first 128 sentences of Multi30k test2016, the tagger the first 128
of UD English-EWT test, the same ones at both batch sizes. Each path first runs once untimed
(tracing, and XLA compiling each padded shape), and its outputs are compared with the
in-process ones; then the paths are timed alternately, round by round, and the median per
sentence is kept. The ratio is served over in-process time. The targets (issues 15 and 39): the
plain signatures within 3x at batch 1 and 1.5x at batch 64 (their loop pays TensorFlow's cost per
op at every step, which XLA does not), the `_xla` ones within 1.5x at both, and the cost per
sentence falling as the batch grows. Then issue 42's speed targets, served against served: the
NAT's signatures at least 1.5x faster than the translator's greedy and beam-4 ones of the same
kind (for a CTC NAT `serving_default` is its one pass, so this is also the one-pass target).

    python benchmarks/serving.py [--quick] [--no-record]
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)
from tagger_throughput import python_tags, serving_tags  # noqa: E402  (Tagger, batch 64)

from zoo.artifacts import latest_serving_path  # noqa: E402
from zoo.data import load_multi30k, load_ud_english_ewt  # noqa: E402
from zoo.tasks import translate  # noqa: E402
from zoo.tasks import load  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "saved_models")
TITLE = "Serving: the shipped SavedModels against in-process decoding (ms per sentence)"
# The most served / in-process time of each kind of signature, by batch size.
TARGETS = {"plain": {1: 3.0, 64: 1.5}, "XLA": {1: 1.5, 64: 1.5}}
NAT_CASE = "NAT serving_default"
# Issue 42's speed targets, through the SavedModels: the NAT at least this many times faster
# than the translator's search of the same kind of signature, at both batch sizes.
NAT_TARGETS = {"translator greedy": 1.5, "translator beam 4": 1.5}


def texts_of(outputs):
    return [text.decode("utf-8") for text in outputs["translations"].numpy()]


def translator_cases():
    """name -> (in-process function, {signature name: function}) of the translators; each
    function maps a list of sentences to a list of outputs."""
    cases = {}
    _, model, tokenizer = load(os.path.join(SAVED, "translator-en-de"))
    served = tf.saved_model.load(latest_serving_path(os.path.join(SAVED, "translator-en-de")))

    def signature(name):
        function = served.signatures[name]
        return lambda batch: texts_of(function(inputs=tf.constant(batch)))

    cases["translator greedy"] = (
        lambda batch: translate(model, tokenizer, batch, "greedy", batch_size=len(batch)),
        {"plain": signature("translate_greedy"), "XLA": signature("translate_greedy_xla")},
    )
    cases["translator beam 4"] = (
        lambda batch: translate(model, tokenizer, batch, "beam", 4, batch_size=len(batch)),
        {"plain": signature("serving_default"), "XLA": signature("translate_xla")},
    )
    _, nat, nat_tokenizer = load(os.path.join(SAVED, "nat-en-de"))
    nat_served = tf.saved_model.load(latest_serving_path(os.path.join(SAVED, "nat-en-de")))
    nat_signatures = {
        kind: (lambda batch, f=nat_served.signatures[name]: texts_of(f(inputs=tf.constant(batch))))
        for kind, name in (("plain", "serving_default"), ("XLA", "translate_xla"))
    }
    cases[NAT_CASE] = (  # the model's default iterations and length beam, as serving_default
        lambda batch: translate(nat, nat_tokenizer, batch, "mask_predict", batch_size=len(batch)),
        nat_signatures,
    )
    return cases


def tagger_case():
    _, model, vocabulary = load(os.path.join(SAVED, "tagger-en-ewt"))
    served = tf.saved_model.load(latest_serving_path(os.path.join(SAVED, "tagger-en-ewt")))
    default = served.signatures["serving_default"]
    return (
        lambda batch: python_tags(model, vocabulary, batch),
        {"plain": lambda batch: serving_tags(default, batch)},
    )


def measure(in_process, served, sentences, batch_size, rounds):
    """ms per sentence of each path over ``sentences`` in batches of ``batch_size``, and
    whether each served path gives the in-process outputs."""
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    paths = {"in process": in_process, **served}
    outputs = {name: [o for b in batches for o in path(b)] for name, path in paths.items()}
    same = {name: outputs[name] == outputs["in process"] for name in served}
    seconds = common.time_alternating(
        {name: (lambda p=path: [p(b) for b in batches]) for name, path in paths.items()},
        steps=1, rounds=rounds, warmup=0,
    )  # fmt: skip
    return {name: 1000 * s / len(sentences) for name, s in seconds.items()}, same


def nat_speedups(served_ms):
    """Lines: how many times faster the NAT's served signatures are than the translator's of
    the same kind (plain or XLA), at each batch size, against issue 42's targets."""
    lines = []
    for kind in ("plain", "XLA"):
        for rival, target in NAT_TARGETS.items():
            ratios = {b: served_ms[rival, b][kind] / served_ms[NAT_CASE, b][kind] for b in (1, 64)}
            verdict = "met" if min(ratios.values()) >= target else "missed"
            lines.append(
                f"{NAT_CASE} against {rival}, both served ({kind}): {ratios[1]:.2f}x faster at "
                f"batch 1 and {ratios[64]:.2f}x at batch 64 (target >= {target}x at both: "
                f"{verdict})"
            )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="16 sentences, 2 rounds; not recorded")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    rounds = 2 if args.quick else args.rounds
    count = 16 if args.quick else 128  # the same sentences at every batch size

    print(common.machine_description(), flush=True)
    english = [source for source, _ in load_multi30k("test2016")]
    treebank = [" ".join(s.words) for s in load_ud_english_ewt("test")]
    cases = translator_cases()
    cases["tagger"] = tagger_case()
    rows, misses, served_ms = [], [], {}
    for name, (in_process, served) in cases.items():
        sentences = treebank if name == "tagger" else english
        for batch_size in (1, 64):
            ms, same = measure(in_process, served, sentences[:count], batch_size, rounds)
            served_ms[name, batch_size] = ms
            row = [name, batch_size, f"{ms['in process']:.1f}"]
            for kind in ("plain", "XLA"):
                if kind in served:
                    ratio = ms[kind] / ms["in process"]
                    mark = "" if same[kind] else " (outputs differ)"
                    row += [f"{ms[kind]:.1f}", f"{ratio:.2f}{mark}"]
                    if ratio > TARGETS[kind][batch_size]:
                        misses.append(f"{name} {kind} batch {batch_size}: {ratio:.2f}")
                else:
                    row += ["-", "-"]
            rows.append(row)
            print(" | ".join(str(cell) for cell in row), flush=True)
    header = ["model, search", "batch", "in process", "served (plain)", "ratio",
              "served (XLA)", "ratio"]  # fmt: skip
    lines = common.markdown_table(header, rows)
    print("\n".join(lines))
    targets = ", ".join(
        f"{kind} within {t[1]}x at batch 1 and {t[64]}x at batch 64" for kind, t in TARGETS.items()
    )
    print(f"targets: {targets}; over them: " + ("; ".join(misses) if misses else "none"))
    speedups = nat_speedups(served_ms)
    print("\n".join(speedups))
    if not (args.quick or args.no_record):
        notes = [
            f"sentences: the first {count} at both batch sizes (Multi30k test2016 for the "
            "translators, UD English-EWT test for the tagger); median of "
            f"{rounds} alternating rounds after an untimed pass; ratio = served / in process",
            "plain: graph-mode signatures (any TF Serving); XLA: the `_xla` signatures "
            "(TF Serving needs `--xla_cpu_compilation_enabled=true`)",
            f"targets: {targets}; over them: " + ("; ".join(misses) if misses else "none"),
            *speedups,
        ]
        command = "python benchmarks/serving.py" + (f" --rounds {rounds}" if rounds != 3 else "")
        common.publish_table(TITLE, command, header, rows, notes)


if __name__ == "__main__":
    main()
