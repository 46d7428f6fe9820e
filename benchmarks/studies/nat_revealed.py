"""What a CMLM NAT has learned to do with revealed tokens: its accuracy on the masked positions
of the val targets when a fraction r of the gold target is revealed, one decoder pass.

Mask-Predict's iteration t of T reads the tokens it kept (a share t / T of them); a model that
predicts the rest better the more it is shown can refine, one that does not cannot. The CMLM is
trained on every share (a uniform number of masks); glancing training (GLAT) shows the second
pass only a share of the first pass's errors, so it rarely sees most of a target. Only the
validation split; the revealed positions are drawn uniformly (seeded), the same for every model.

    python benchmarks/studies/nat_revealed.py --nat CMLM=workdirs/nat-cmlm \
        --nat "CMLM+GLAT"=DIR [--quick]
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

# benchmarks/: common.py, nat_vs_at.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import append_results, machine_description, markdown_table  # noqa: E402
from nat_vs_at import labelled_folder  # noqa: E402

from zoo.data import load_multi30k, make_translation_dataset  # noqa: E402
from zoo.models.nat import MASK_ID, nat_decode, nat_encode, nat_modes  # noqa: E402
from zoo.models.nat.objectives import CMLMObjective  # noqa: E402
from zoo.tasks import load  # noqa: E402

SHARES = (0.0, 0.25, 0.5, 0.75, 0.9)


def batches(vocabulary, pairs):
    """``(source, target)`` int arrays per batch: the target is the CMLM's (with its EOS)."""
    objective = CMLMObjective(128, vocabulary.eos_id, gold_input=True)  # nothing masked
    dataset = make_translation_dataset(pairs, vocabulary, batch_tokens=4096, max_length=128,
                                       shuffle=False, objective=objective)  # fmt: skip
    return [(features["source"].numpy(), labels["tokens"].numpy()) for features, labels in dataset]


def accuracy_when_shown(model, data, share, seed=0):
    """The share of the hidden target tokens whose argmax is the gold one, ``share`` of each
    target's positions (drawn with ``seed``) revealed."""
    rng = np.random.default_rng(seed)
    right = hidden_count = 0
    for source, target in data:
        real = target != 0
        revealed = real & (rng.random(target.shape) < share)
        target_in = np.where(revealed, target, np.where(real, MASK_ID, 0))
        memory, source_padding, _ = nat_encode(model, source)
        logits = nat_decode(model, memory, source_padding, target_in, source)
        predicted = ops.convert_to_numpy(ops.argmax(logits, axis=-1))
        hidden = real & ~revealed
        right += int(np.sum((predicted == target) & hidden))
        hidden_count += int(np.sum(hidden))
    return right / hidden_count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nat", action="append", type=labelled_folder, required=True,
                        metavar="LABEL=DIR", help="a CMLM NAT and its row label (repeatable)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 32 sentences")
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    print(machine_description())
    pairs = load_multi30k("val")[: 32 if args.quick else None]
    rows = []
    for label, folder in args.nat:
        try:
            _, model, vocabulary = load(folder, "nat")
        except (FileNotFoundError, ValueError) as error:  # one line naming the file
            parser.error(str(error))
        if nat_modes(model).ctc:
            parser.error(f"{folder} holds a CTC NAT: it reads no target tokens; pass a CMLM")
        data = batches(vocabulary, pairs)
        rows.append([label] + [f"{100 * accuracy_when_shown(model, data, share):.1f}"
                               for share in SHARES])  # fmt: skip
        print(" | ".join(rows[-1]), flush=True)
    header = ["accuracy on the hidden tokens, %"] + [f"r={share}" for share in SHARES]
    table = markdown_table(header, rows)
    print("\n".join(table))
    folders = ", ".join(f"{label}: {folder}" for label, folder in args.nat)
    notes = [f"{len(pairs)} val sentences; {folders}"]
    if not (args.no_record or args.quick):
        append_results("NAT accuracy with gold tokens revealed (val)",
                       "python benchmarks/studies/nat_revealed.py " + " ".join(
                           f'--nat "{label}={folder}"' for label, folder in args.nat),
                       table, notes)  # fmt: skip


if __name__ == "__main__":
    main()
