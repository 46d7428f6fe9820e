"""What the non-autoregressive translator trades against the autoregressive one: BLEU and speed.

One run, the same Multi30k sentences for every row: the AT translator greedy, beam 4 and beam 5;
each NAT (distilled and, when given, trained on the raw data) at Mask-Predict T=1 l=1 (one
pass), T=1 l=3, T=4 l=3 and T=10 l=5, and T=4 l=3 reranked by the AT. Every row goes through
the public ``zoo.tasks.translate()`` at batch 64 (all the sentences: BLEU, sacreBLEU 13a
lowercased and cased) and at batch 1 (the first ``--batch1-sentences``). Each batch runs once
untimed first, so compilation is never timed. Then, for each NAT: its
length predictor's accuracy, and BLEU with the gold length given (what the length prediction
costs).

    python benchmarks/nat_vs_at.py --at saved_models/translator-en-de --nat saved_models/nat-en-de
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
NAT_SETTINGS = [(1, 1), (1, 3), (4, 3), (10, 5)]  # (iterations, length beam)
RESCORED = (4, 3)


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
    parser.add_argument("--nat", default=os.path.join(ROOT, "saved_models", "nat-en-de"),
                        help="the NAT trained on distilled data")
    parser.add_argument("--nat-raw", help="a NAT trained on the raw data, for comparison")
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
    _, at, at_vocabulary = load(args.at, "translator")
    nats = [("NAT distilled", args.nat)] + ([("NAT raw", args.nat_raw)] if args.nat_raw else [])
    nats = [(label, *load(folder, "nat")[1:]) for label, folder in nats]

    rows = [("AT greedy", at, at_vocabulary, {"method": "greedy"})]
    rows += [(f"AT beam {k}", at, at_vocabulary, {"method": "beam", "beam_size": k})
             for k in (4, 5)]
    for label, model, vocabulary in nats:
        for steps, beam in NAT_SETTINGS:
            settings = {"method": "mask_predict", "iterations": steps, "length_beam": beam}
            rows.append((f"{label} T={steps} l={beam}", model, vocabulary, settings))
        if vocabulary.model_proto == at_vocabulary.model_proto:
            steps, beam = RESCORED
            settings = {"method": "mask_predict", "iterations": steps, "length_beam": beam,
                        "rescorer": at}
            rows.append((f"{label} T={steps} l={beam} + AT rescoring", model, vocabulary,
                         settings))

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
    for label, model, vocabulary in nats:
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
                f"AT: {args.at}; NATs: " + ", ".join(
                    f"{label} {folder}" for label, folder in
                    [("distilled", args.nat), ("raw", args.nat_raw)] if folder),
                f"{len(sources)} {args.split} sentences at batch 64 (BLEU: sacreBLEU 13a); "
                f"the first {min(len(sources), args.batch1_sentences)} at batch 1; every row "
                "through zoo.tasks.translate() (XLA); each batch runs once untimed first",
                *notes,
            ],
        )


if __name__ == "__main__":
    main()
