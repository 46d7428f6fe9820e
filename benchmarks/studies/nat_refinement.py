"""Does Mask-Predict's refinement help the NAT? Validation BLEU by iterations, length beam and
early stopping (off by default), and at the gold lengths (which isolates the length choice).

Only the validation split: the settings are chosen on it. BLEU is sacreBLEU 13a, lowercased.

    python benchmarks/studies/nat_refinement.py --nat DIR [--quick]

DIR is a CMLM NAT (a workdir or an export folder); the shipped NAT is a CTC decoder, which has
nothing to refine. The CMLM shipped before it is in git at 7cd084b (saved_models/nat-en-de).
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

# benchmarks/: common.py, nat_vs_at.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import append_results, machine_description, markdown_table  # noqa: E402
from nat_vs_at import length_report  # noqa: E402

from zoo.data import load_multi30k  # noqa: E402
from zoo.evaluation import corpus_bleu  # noqa: E402
from zoo.models.nat import nat_modes  # noqa: E402
from zoo.tasks import load, translate  # noqa: E402

ITERATIONS = (1, 2, 4, 10)
LENGTH_BEAMS = (1, 3, 5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nat", required=True, help="a CMLM NAT: workdir or export folder")
    parser.add_argument("--quick", action="store_true", help="smoke run: 32 sentences")
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    print(machine_description())
    pairs = load_multi30k("val")[: 32 if args.quick else None]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    _, model, vocabulary = load(args.nat, "nat")
    if nat_modes(model).ctc:
        parser.error(f"{args.nat} holds a CTC NAT: one pass, nothing to refine; pass a CMLM")

    def bleu(**settings):
        hypotheses = translate(model, vocabulary, sources, method="mask_predict", **settings)
        return corpus_bleu(hypotheses, references)["bleu_lowercase"]

    rows = []
    settings = [(f"l={beam}", {"length_beam": beam}) for beam in LENGTH_BEAMS]
    settings.append(("l=3, early stop", {"length_beam": 3, "early_stopping": True}))
    for label, setting in settings:
        row = [label] + [f"{bleu(iterations=t, **setting):.2f}" for t in ITERATIONS]
        rows.append(row)
        print(" | ".join(row), flush=True)
    report = length_report(model, vocabulary, pairs, iterations=ITERATIONS)
    rows.append(["gold length"] + [f"{report['bleu_gold'][t]['bleu_lowercase']:.2f}"
                                   for t in ITERATIONS])  # fmt: skip
    print(" | ".join(rows[-1]))
    header = ["val BLEU (lowercased)"] + [f"T={t}" for t in ITERATIONS]
    table = markdown_table(header, rows)
    notes = [
        f"{len(pairs)} val sentences, {args.nat}, batch 64 through zoo.tasks.translate(); "
        f"length predictor: exact {100 * report['exact']:.1f} %, within 1 "
        f"{100 * report['within_1']:.1f} %, gold in the top 3 {100 * report['in_top_3']:.1f} %.",
    ]
    print("\n".join(table))
    for note in notes:
        print(note)
    if not (args.no_record or args.quick):
        # One section per model: a second NAT's run does not replace the first's.
        append_results(f"NAT refinement on val ({args.nat})",
                       f"python benchmarks/studies/nat_refinement.py --nat {args.nat}", table,
                       notes)


if __name__ == "__main__":
    main()
