"""What the non-autoregressive translator trades against the autoregressive one: BLEU and speed.

One run, the same Multi30k sentences for every row: the AT translator greedy, beam 4 and beam 5;
each fast AT (``--fast-at LABEL=DIR``, a deep-encoder shallow-decoder translator, say) greedy
and beam 4; each NAT (``--nat LABEL=DIR``, repeatable: the options, distilled or not) in one
pass and, for a CMLM, at Mask-Predict T=1 l=3, T=4 l=3 (its ``serving_default``), T=10 l=3 and
T=4 l=3 reranked by the AT (a CTC decoder has only its one pass). Every row goes through the
public ``zoo.tasks.translate()`` (XLA, as the SavedModels' ``*_xla`` signatures) at batch 64
(all the sentences: BLEU, sacreBLEU 13a lowercased and cased) and at batch 1 (the first
``--batch1-sentences``). Each batch runs once untimed first, so compilation is never timed.
Then, for each NAT: how far its rows are from the issue's targets, and for a length predictor
its accuracy and BLEU with the gold length given (what the length prediction costs).

    python benchmarks/nat_vs_at.py --at saved_models/translator-en-de \
        --nat CTC=saved_models/nat-en-de --nat CMLM=workdirs/nat-cmlm \
        --fast-at "AT 7+1"=workdirs/at-deep-shallow
"""

import argparse
import os
import sys
import time

from zoo_cli import quiet_native_logs

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from common import append_results, machine_description, markdown_table  # noqa: E402

from zoo.data import EOS_ID, load_multi30k  # noqa: E402
from zoo.decoding import nat_search  # noqa: E402
from zoo.tasks import translate  # noqa: E402
from zoo.models.nat import nat_length_candidates  # noqa: E402
from zoo.evaluation import corpus_bleu  # noqa: E402
from zoo.models.nat import decode_and_lengths, nat_modes  # noqa: E402
from zoo.models.translator import translator_layers  # noqa: E402
from zoo.tasks import load  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAT_SETTINGS = [(1, 1), (1, 3), (4, 3), (10, 3)]  # (iterations, length beam) of a CMLM
RESCORED = (4, 3)
ONE_PASS, SERVED = (1, 1), (4, 3)  # the rows the targets name: one pass, serving_default


def labelled_folder(text):
    """``LABEL=DIR`` -> ``(label, dir)``: what ``--nat`` and ``--fast-at`` take."""
    label, sep, folder = text.partition("=")
    if not sep or not label or not folder:
        raise argparse.ArgumentTypeError(f"expected LABEL=DIR, got {text!r}")
    return label, folder


def nat_rows(label, model, vocabulary, at, at_vocabulary):
    """``(name, model, vocabulary, settings)`` of a NAT's rows: a CTC decoder's one pass, or a
    CMLM at each of NAT_SETTINGS and reranked by the AT (if it shares the AT's vocabulary)."""
    if nat_modes(model).ctc:
        return [(f"{label} one pass", model, vocabulary, {"method": "mask_predict"})]
    rows = []
    for steps, beam in NAT_SETTINGS:
        settings = {"method": "mask_predict", "iterations": steps, "length_beam": beam}
        rows.append((f"{label} T={steps} l={beam}", model, vocabulary, settings))
    if vocabulary.model_proto == at_vocabulary.model_proto:
        steps, beam = RESCORED
        settings = {"method": "mask_predict", "iterations": steps, "length_beam": beam,
                    "rescorer": at}
        rows.append((f"{label} T={steps} l={beam} + AT rescoring", model, vocabulary, settings))
    return rows


def target_notes(label, model, results):
    """How far a NAT's one pass and ``serving_default`` are from the issue's targets."""
    ctc = nat_modes(model).ctc
    one = results[f"{label} one pass" if ctc else f"{label} T={ONE_PASS[0]} l={ONE_PASS[1]}"]
    served = one if ctc else results[f"{label} T={SERVED[0]} l={SERVED[1]}"]
    greedy, beam = results["AT greedy"], results["AT beam 4"]
    notes = []
    for name, row, anchor, anchor_name, allowed in (
        ("one pass", one, greedy, "AT greedy", 4.0),
        ("serving_default", served, beam, "AT beam 4", 2.0),
    ):
        gap = anchor["bleu"] - row["bleu"]
        notes.append(
            f"{label} {name} against {anchor_name}: {gap:+.2f} BLEU behind (target <= "
            f"{allowed:.0f}: {'met' if gap <= allowed else 'missed'}), "
            f"{anchor['ms_1'] / row['ms_1']:.2f}x at batch 1 and "
            f"{anchor['ms_64'] / row['ms_64']:.2f}x at batch 64 (target >= 1.5x)"
        )
    return notes


def timed_translate(model, tokenizer, sentences, batch_size, **settings):
    """``translate()`` batch by batch: the translations and the seconds of the timed batches.

    Every batch is run once untimed first, so that no compilation is timed: a NAT's
    refinement compiles per width of its longest candidate, which only the run knows.
    """
    seconds, outputs = 0.0, []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        translate(model, tokenizer, chunk, batch_size=batch_size, **settings)  # compiles
        began = time.perf_counter()
        outputs += translate(model, tokenizer, chunk, batch_size=batch_size, **settings)
        seconds += time.perf_counter() - began
    return outputs, seconds


def length_report(model, tokenizer, pairs, iterations=(1, 4), batch_size=64):
    """The length predictor against the gold lengths, and BLEU when decoding at them.

    Returns:
        ``{"exact", "within_1", "in_top_3", "out_of_range", "bleu_gold": {T: scores}}``.
    """
    modes = nat_modes(model)
    max_offset = modes.max_offset
    max_length = translator_layers(model).max_length
    limit = translator_layers(model).max_source_length

    @tf.function(reduce_retracing=True, autograph=False)
    def at_gold_lengths(source, lengths, steps):
        decode, _ = decode_and_lengths(model, source, max_length, 1)
        ids, _ = nat_search(decode, max_length=max_length, iterations=steps, lengths=lengths)
        return ids

    @tf.function(reduce_retracing=True, autograph=False)
    def predicted(source):  # a max-length model has one width per sentence
        return nat_length_candidates(model, source, 3 if modes.predicts_length else 1,
                                     max_length)

    counts = {"exact": 0, "within_1": 0, "in_top_3": 0, "out_of_range": 0}
    hypotheses = {steps: [] for steps in iterations}
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        source = tokenizer.tokenize(tf.constant([s for s, _ in chunk]))
        source = (source[:, :limit] if limit else source).to_tensor()
        source_lengths = np.sum(source.numpy() != 0, axis=1)
        gold = tokenizer.tokenize(tf.constant([t for _, t in chunk])).row_lengths().numpy() + 1
        gold = np.minimum(gold, max_length)  # the target with its EOS, as trained
        top = predicted(source).numpy()  # (B, 3), best first
        counts["exact"] += int(np.sum(top[:, 0] == gold))
        counts["within_1"] += int(np.sum(np.abs(top[:, 0] - gold) <= 1))
        counts["in_top_3"] += int(np.sum(np.any(top == gold[:, None], axis=1)))
        counts["out_of_range"] += int(np.sum(np.abs(gold - source_lengths) > max_offset))
        for steps in iterations:
            ids = at_gold_lengths(source, tf.constant(gold, tf.int32), tf.constant(steps)).numpy()
            ids = np.where(np.cumsum(ids == EOS_ID, axis=1) > 0, 0, ids)  # cut at the EOS
            hypotheses[steps] += [
                text.decode("utf-8", errors="replace")
                for text in tokenizer.detokenize(ids).numpy()
            ]
    references = [t for _, t in pairs]
    report = {name: count / len(pairs) for name, count in counts.items()}
    report["bleu_gold"] = {s: corpus_bleu(h, references) for s, h in hypotheses.items()}
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", default=os.path.join(ROOT, "saved_models", "translator-en-de"),
                        help="the autoregressive translator (workdir or export folder)")
    parser.add_argument("--nat", action="append", type=labelled_folder, metavar="LABEL=DIR",
                        help="a NAT and its row label (repeatable; default: the shipped one)")
    parser.add_argument("--fast-at", action="append", type=labelled_folder, default=[],
                        metavar="LABEL=DIR", help="another translator, greedy and beam 4")
    parser.add_argument("--split", default="test2016", choices=("val", "test2016"))
    parser.add_argument("--sentences", type=int, help="the first N sentences (default: all)")
    parser.add_argument("--batch1-sentences", type=int, default=64,
                        help="sentences timed at batch 1")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 32 sentences, 8 at batch 1")
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        args.sentences, args.batch1_sentences = 32, 8

    print(machine_description())
    pairs = load_multi30k(args.split)[: args.sentences]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    nat_folders = args.nat or [("NAT", os.path.join(ROOT, "saved_models", "nat-en-de"))]
    _, at, at_vocabulary = load(args.at, "translator")
    nats = [(label, *load(folder, "nat")[1:]) for label, folder in nat_folders]
    fast = [(label, *load(folder, "translator")[1:]) for label, folder in args.fast_at]

    rows = []
    for label, model, vocabulary, beams in [("AT", at, at_vocabulary, (4, 5))] + [
        (label, model, vocabulary, (4,)) for label, model, vocabulary in fast
    ]:
        rows.append((f"{label} greedy", model, vocabulary, {"method": "greedy"}))
        rows += [(f"{label} beam {k}", model, vocabulary, {"method": "beam", "beam_size": k})
                 for k in beams]  # fmt: skip
    for label, model, vocabulary in nats:
        rows += nat_rows(label, model, vocabulary, at, at_vocabulary)

    results = {}
    for name, model, vocabulary, settings in rows:
        hypotheses, seconds_64 = timed_translate(model, vocabulary, sources, 64, **settings)
        _, seconds_1 = timed_translate(
            model, vocabulary, sources[: args.batch1_sentences], 1, **settings
        )
        scores = corpus_bleu(hypotheses, references)
        results[name] = {
            "bleu": scores["bleu_lowercase"], "bleu_cased": scores["bleu"],
            "ms_1": 1000 * seconds_1 / min(len(sources), args.batch1_sentences),
            "ms_64": 1000 * seconds_64 / len(sources),
        }
        print(f"{name}: lowercased BLEU {scores['bleu_lowercase']:.2f}, "
              f"{results[name]['ms_1']:.1f} ms/sentence at batch 1, "
              f"{results[name]['ms_64']:.1f} at batch 64", flush=True)

    anchor = results["AT beam 4"]
    table = markdown_table(
        ["setting", "BLEU (lc)", "BLEU (cased)", "ms/sent b1", "ms/sent b64",
         "speedup vs AT beam 4, b1", "b64"],
        [[name, f"{r['bleu']:.2f}", f"{r['bleu_cased']:.2f}", f"{r['ms_1']:.1f}",
          f"{r['ms_64']:.1f}", f"{anchor['ms_1'] / r['ms_1']:.1f}x",
          f"{anchor['ms_64'] / r['ms_64']:.1f}x"] for name, r in results.items()],
    )
    notes = []
    for label, model, _ in nats:
        notes += target_notes(label, model, results)
    for label, model, vocabulary in nats:
        if nat_modes(model).ctc:
            continue
        report = length_report(model, vocabulary, pairs)
        gold = ", ".join(f"T={s} {b['bleu_lowercase']:.2f}" for s, b in report["bleu_gold"].items())
        notes.append(
            f"{label} length predictor: exact {report['exact']:.1%}, within 1 "
            f"{report['within_1']:.1%}, gold in the top 3 {report['in_top_3']:.1%}, gold "
            f"offset beyond its range {report['out_of_range']:.1%}; lowercased BLEU at the "
            f"gold length (l=1): {gold}"
        )
    print("\n".join(table))
    print("\n".join(notes))

    if not args.no_record:
        append_results(
            f"NAT against AT on Multi30k {args.split}",
            " ".join(["python benchmarks/nat_vs_at.py", *sys.argv[1:]]),
            table,
            notes=[
                f"AT: {args.at}; " + ", ".join(
                    f"{label}: {folder}" for label, folder in nat_folders + args.fast_at),
                f"{len(sources)} {args.split} sentences at batch 64 (BLEU: sacreBLEU 13a); "
                f"the first {min(len(sources), args.batch1_sentences)} at batch 1; every row "
                "through zoo.tasks.translate() (XLA); each batch runs once untimed first",
                *notes,
            ],
        )


if __name__ == "__main__":
    main()
