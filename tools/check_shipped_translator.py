"""Does the shipped translator still give its recorded test2016 hypotheses?

Run after the shipped ``model.keras`` is re-saved (a new form, the same weights): its beam-5
hypotheses on Multi30k test2016, made two ways, must equal ``eval/test2016.beam5.hyp.txt``:

- ``keras.models.load_model`` on a copy of ``model.keras`` alone in an empty folder, then
  ``generate`` (nothing but ``import keras, zoo``);
- ``zoo evaluate translator`` on the shipped folder, into a temporary output folder.

Usage: ``python tools/check_shipped_translator.py [FOLDER]`` (default
``saved_models/translator-en-de``). Exits 1 when a hypothesis differs. About 3 minutes on 2 cores.
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


def differing(hypotheses, recorded):
    """The line numbers (from 1) where two lists of lines differ, lengths included."""
    lines = max(len(hypotheses), len(recorded))
    padded = [list(h) + [None] * (lines - len(h)) for h in (hypotheses, recorded)]
    return [i + 1 for i, (a, b) in enumerate(zip(*padded)) if a != b]


def main(folder):
    with open(os.path.join(folder, "eval", "test2016.beam5.hyp.txt"), encoding="utf-8") as f:
        recorded = f.read().splitlines()
    pairs = load_multi30k("test2016")
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    failed = False
    with tempfile.TemporaryDirectory() as alone:
        path = shutil.copy(os.path.join(folder, "model.keras"), alone)
        translator = keras.models.load_model(path)
        hypotheses = translator.generate(sources, beam_size=5)
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    lowercase = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    lines = differing(hypotheses, recorded)
    print(f"load_model + generate ({type(translator).__name__}, zoo {zoo.__version__}): "
          f"{len(lines)} of {len(recorded)} hypotheses differ; BLEU {bleu:.2f}, "
          f"lowercased {lowercase:.2f}")
    failed |= bool(lines)
    with tempfile.TemporaryDirectory() as output:
        zoo_command = os.path.join(os.path.dirname(sys.executable), "zoo")
        subprocess.run([zoo_command, "evaluate", "translator", "--workdir", folder, "--splits",
                        "test2016", "--method", "beam", "--beam-size", "5", "--output-dir",
                        output], check=True)  # fmt: skip
        with open(os.path.join(output, "test2016.beam5.hyp.txt"), encoding="utf-8") as f:
            lines = differing(f.read().splitlines(), recorded)
    print(f"zoo evaluate: {len(lines)} of {len(recorded)} hypotheses differ")
    failed |= bool(lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "saved_models",
                                                                      "translator-en-de")))
