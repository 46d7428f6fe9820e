"""Do the shipped translators still give their recorded test2016 hypotheses?

Run after a shipped ``model.keras`` is re-saved (a new form, the same weights). Each model's
hypotheses on Multi30k test2016, made two ways, must equal the ones in its ``eval/``:

- ``keras.models.load_model`` on a copy of ``model.keras`` alone in an empty folder, then
  ``generate`` (nothing but ``import keras, zoo``);
- ``zoo evaluate`` on the shipped folder, into a temporary output folder.

Usage: ``python tools/check_shipped_translators.py [translator|nat ...]`` (default: both).
Exits 1 when a hypothesis differs. About 3 minutes on 2 cores.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import keras
import sacrebleu

import zoo
from zoo.data import load_multi30k

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (shipped folder, its recorded hypotheses, generate's options, zoo evaluate's options)
SHIPPED = {
    "translator": ("translator-en-de", "test2016.beam5.hyp.txt", {"beam_size": 5},
                   ["--method", "beam", "--beam-size", "5"]),
    "nat": ("nat-en-de", "test2016.mask_predict-iterations1-length_beam1.hyp.txt",
            {"iterations": 1, "length_beam": 1}, ["--iterations", "1", "--length-beam", "1"]),
}  # fmt: skip


def differing(hypotheses, recorded):
    """The line numbers (from 1) where two lists of lines differ, lengths included."""
    lines = max(len(hypotheses), len(recorded))
    padded = [list(h) + [None] * (lines - len(h)) for h in (hypotheses, recorded)]
    return [i + 1 for i, (a, b) in enumerate(zip(*padded)) if a != b]


def check(task, sources, references):
    """Print what each way gives; return whether both gave the recorded hypotheses."""
    name, hypotheses_file, options, flags = SHIPPED[task]
    folder = os.path.join(REPO, "saved_models", name)
    with open(os.path.join(folder, "eval", hypotheses_file), encoding="utf-8") as f:
        recorded = f.read().splitlines()
    with tempfile.TemporaryDirectory() as alone:
        model = keras.models.load_model(shutil.copy(os.path.join(folder, "model.keras"), alone))
        hypotheses = model.generate(sources, **options)
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    lowercase = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    lines = differing(hypotheses, recorded)
    print(f"{name}: load_model + generate ({type(model).__name__}, zoo {zoo.__version__}): "
          f"{len(lines)} of {len(recorded)} hypotheses differ; BLEU {bleu:.2f}, "
          f"lowercased {lowercase:.2f}", flush=True)
    same = not lines
    with tempfile.TemporaryDirectory() as output:
        zoo_command = os.path.join(os.path.dirname(sys.executable), "zoo")
        subprocess.run([zoo_command, "evaluate", task, "--workdir", folder, "--splits",
                        "test2016", *flags, "--output-dir", output], check=True)  # fmt: skip
        with open(os.path.join(output, hypotheses_file), encoding="utf-8") as f:
            lines = differing(f.read().splitlines(), recorded)
    print(f"{name}: zoo evaluate: {len(lines)} of {len(recorded)} hypotheses differ", flush=True)
    return same and not lines


def main(tasks):
    pairs = load_multi30k("test2016")
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    results = [check(task, sources, references) for task in tasks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(SHIPPED)))
