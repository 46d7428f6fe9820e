"""Does the shipped tagger still give its recorded EWT test tags?

Run after ``saved_models/tagger-en-ewt/model.keras`` is re-saved (a new form, the same weights).
Its tags of UD English-EWT test, made two ways, must equal the recorded ones of
``eval/test.tags.tsv`` (every head: UPOS, XPOS, FEATS, lemmas) and of the OOV column:

- ``keras.models.load_model`` on a copy of ``model.keras`` alone in an empty folder, then
  ``tag`` (nothing but ``import keras, zoo``);
- ``zoo evaluate tagger --splits test`` on the shipped folder, into a temporary output folder.

Usage: ``python tools/check_shipped_tagger.py``. Exits 1 when a tag differs. About a minute on
2 cores.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import keras

import zoo
from zoo.data import load_ud_english_ewt

FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "saved_models", "tagger-en-ewt")  # fmt: skip
HEADS = ("upos", "xpos", "feats", "lemma")


def read_tags(path):
    """The predicted columns of a ``{split}.tags.tsv``: one row per word, in order."""
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    columns = [header.index(f"predicted_{head}") for head in HEADS] + [header.index("oov")]
    return [tuple(row[i] for i in columns) for row in rows]


def main():
    recorded = read_tags(os.path.join(FOLDER, "eval", "test.tags.tsv"))
    words = [list(sentence.words) for sentence in load_ud_english_ewt("test")]
    with tempfile.TemporaryDirectory() as alone:
        tagger = keras.models.load_model(shutil.copy(os.path.join(FOLDER, "model.keras"), alone))
        tagged = tagger.tag(words)
        oov = tagger.out_of_vocabulary(words)
    rows = [(*(token[head] for head in HEADS), str(int(unknown)))
            for sentence, flags in zip(tagged, oov) for token, unknown in zip(sentence, flags)]
    differ = sum(a != b for a, b in zip(rows, recorded)) + abs(len(rows) - len(recorded))
    print(f"load_model + tag ({type(tagger).__name__}, zoo {zoo.__version__}): {differ} of "
          f"{len(recorded)} words differ in a head or the OOV flag", flush=True)
    with tempfile.TemporaryDirectory() as output:
        zoo_command = os.path.join(os.path.dirname(sys.executable), "zoo")
        subprocess.run([zoo_command, "evaluate", "tagger", "--workdir", FOLDER, "--splits",
                        "test", "--output-dir", output], check=True)  # fmt: skip
        evaluated = read_tags(os.path.join(output, "test.tags.tsv"))
    differ_evaluated = sum(a != b for a, b in zip(evaluated, recorded)) + abs(
        len(evaluated) - len(recorded))
    print(f"zoo evaluate: {differ_evaluated} of {len(recorded)} words differ", flush=True)
    return 0 if differ == differ_evaluated == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
