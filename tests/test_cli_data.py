"""A user's own corpus through the `zoo` command: a rule-made English-Greek corpus trains,
evaluates, exports, serves through its SavedModel and round-trips through `zoo translate` (the
real command in its own process: quiet, seeded, with a progress bar); and each bad input gets
one line, exit status 2, and loses nothing."""

import contextlib
import gzip
import importlib
import io
import json
import os
import random
import unicodedata

import keras
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

from tests.test_cli import assert_one_line_error, zoo, zoo_here
from zoo.artifacts import BACKUP_DIR, LANGUAGES_FILE, MODEL_FILE, SENTENCEPIECE_FILE, serving_path
from zoo_cli import main

training = importlib.import_module("zoo.training.train")  # the module, not the function

# English words and their Greek: a sentence is 2 to 6 of them, translated word by word.
WORDS = {"dog": "σκύλος", "cat": "γάτα", "house": "σπίτι", "sea": "θάλασσα", "sun": "ήλιος",
         "red": "κόκκινο", "big": "μεγάλο", "small": "μικρό", "runs": "τρέχει",
         "sleeps": "κοιμάται", "eats": "τρώει", "child": "παιδί", "tree": "δέντρο",
         "water": "νερό", "bread": "ψωμί", "white": "λευκό", "black": "μαύρο", "sees": "βλέπει",
         "and": "και", "man": "άντρας"}  # fmt: skip
EMPTY_PAIRS = 3  # training pairs with an empty side, which training skips and counts


def greek_pairs(count, seed):
    rng, keys = random.Random(seed), sorted(WORDS)
    pairs = []
    for _ in range(count):
        words = [rng.choice(keys) for _ in range(rng.randint(2, 6))]
        pairs.append((" ".join(words) + ".", " ".join(WORDS[w] for w in words) + "."))
    return pairs


def write_pairs(folder, name, pairs, gzipped=False):
    """``name.en`` and ``name.el`` (``.gz`` if ``gzipped``); returns their paths."""
    paths = []
    for side, language in ((0, "en"), (1, "el")):
        path = os.path.join(folder, f"{name}.{language}" + (".gz" if gzipped else ""))
        text = "".join(pair[side] + "\n" for pair in pairs).encode("utf-8")
        with open(path, "wb") as f:
            f.write(gzip.compress(text, mtime=0) if gzipped else text)
        paths.append(path)
    return paths


def train_command(workdir, train, valid, *extra):
    return ["train", "translator", "--preset", "tiny", "--workdir", str(workdir), "--seed", "0",
            "--vocab-size", "340", "--learning-rate", "2e-2", "--warmup-steps", "10",
            "--batch-tokens", "512", "--bleu-sample", "0", "--train", *train, "--valid", *valid, *extra]  # fmt: skip


class CutTheFile(keras.callbacks.Callback):
    """Cuts a gzipped training file to its first 40 lines after the fifth batch, mid-epoch;
    the run fails when it reads the file again, with a backup behind it."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == 5:
            with gzip.open(self.path) as f:
                lines = f.read().splitlines(keepends=True)
            with open(self.path, "wb") as f:
                f.write(gzip.compress(b"".join(lines[:40]), mtime=0))


def _train_here(argv):
    """``zoo train`` in this process: (exit status, stderr)."""
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        try:
            main(argv)
            status = 0
        except SystemExit as exit:
            status = exit.code
    return status, log.getvalue()


@pytest.fixture(scope="module")
def greek(tmp_path_factory):
    """The corpus, and a translator trained on it for 10 epochs (about 25 s), in this process
    (the test below runs the real `zoo`). In two runs: a training file that shrinks under the
    first, mid-epoch, ends it; the file restored, the same command resumes and finishes."""
    folder = tmp_path_factory.mktemp("greek")
    pairs = greek_pairs(600, seed=0)
    pairs[10:10] = [("", "κενό."), ("empty.", "   "), ("", "")]  # skipped, counted
    train = write_pairs(folder, "train", pairs, gzipped=True)
    valid = write_pairs(folder, "valid", greek_pairs(20, seed=1))
    test = write_pairs(folder, "test", greek_pairs(20, seed=2))
    workdir = folder / "w"
    argv = train_command(workdir, train, valid, "--epochs", "10")
    with open(train[1], "rb") as f:
        intact = f.read()
    standard = training.standard_callbacks
    with pytest.MonkeyPatch.context() as patch:  # the module's, which train() calls
        patch.setattr(training, "standard_callbacks",
                      lambda *a, **k: [CutTheFile(train[1]), *standard(*a, **k)])
        cut = _train_here(argv)
    left = {"backup": os.path.isdir(workdir / BACKUP_DIR),
            "model": os.path.exists(workdir / MODEL_FILE)}  # fmt: skip
    with open(train[1], "wb") as f:
        f.write(intact)
    status, err = _train_here(argv)
    assert status == 0, err[-3000:]
    return {"folder": folder, "train": train, "valid": valid, "test": test, "workdir": workdir,
            "cut": cut, "left": left, "log": err}  # fmt: skip


def is_greek(text):
    return all(c in " ." or "GREEK" in unicodedata.name(c) for c in text)


def test_a_greek_corpus_trains_evaluates_exports_serves_and_translates(greek, tmp_path, capsys):
    workdir, (source, reference) = greek["workdir"], greek["test"]
    # Counted as read (the pipeline reads ahead of training): 3 pairs in 603, each epoch.
    last = [line for line in greek["log"].splitlines() if line.startswith("epoch 10: ")]
    assert last and "examples skipped (0.50%: " in last[0], greek["log"][-2000:]
    assert last[0].endswith(" empty)"), last
    with open(workdir / "config.json") as f:
        config = json.load(f)
    assert (config["source_lang"], config["target_lang"]) == ("en", "el")

    status, out, err = zoo_here(capsys, "evaluate", "translator", "--workdir", str(workdir),
                                "--source", source, "--reference", reference,
                                "--method", "greedy")  # fmt: skip
    assert status == 0, err[-3000:]
    assert f"{workdir}: en -> el" in err
    with open(workdir / "eval" / "test.en.greedy.scores.json") as f:
        scores = json.load(f)
    assert scores["bleu"] > 10 and scores["chrf"] > 30, scores  # it learned the word mapping
    with open(workdir / "eval" / "test.en.greedy.hyp.txt", encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    assert len(hypotheses) == 20 and all(is_greek(h) for h in hypotheses), hypotheses

    export = tmp_path / "export"
    status, _, err = zoo_here(capsys, "export", "translator", "--workdir", str(workdir),
                              "--output", str(export))  # fmt: skip
    assert status == 0, err[-3000:]
    serving = serving_path(str(export))
    with open(os.path.join(serving, "assets.extra", LANGUAGES_FILE)) as f:
        assert json.load(f) == {"source": "en", "target": "el"}
    with open(source, encoding="utf-8") as f:
        sources = f.read().splitlines()
    model = tf.saved_model.load(serving)
    served = model.signatures["translate_greedy"](inputs=tf.constant(sources))["translations"]
    served = [t.decode("utf-8") for t in served.numpy()]
    assert served == hypotheses

    # The real command in its own process, the suite's one run of it that imports TensorFlow:
    # stdin to stdout, in Greek, a blank line for a blank line; on stderr no TensorFlow C++
    # log line, only the progress bar; --seed makes sampling reproducible, even in this
    # process, whose random state has moved since its start.
    stdin = "\n".join(sources + [""]) + "\n"
    argv = ["translate", "--workdir", str(export), "--method", "sample", "--seed", "7"]
    status, out, err = zoo(*argv, stdin=stdin)
    assert status == 0, err[-3000:]
    sampled = out.splitlines()
    assert len(sampled) == 21 and sampled[20] == "", out
    assert all(any("GREEK" in unicodedata.name(c, "") for c in line) for line in sampled[:20])
    assert sampled[:20] != served  # sampled, not searched
    for sign in ("cuda", "onednn", "absl", "i0000", "cpu_feature_guard"):
        assert sign not in err.lower(), err
    assert "21/21" in err and f"{export}: en -> el" in err, err
    assert zoo_here(capsys, *argv, stdin=stdin)[1] == out
    status, out, err = zoo_here(capsys, "translate", "--workdir", str(export), "--method",
                                "greedy", stdin=stdin)  # fmt: skip
    assert status == 0, err[-3000:]
    assert out.splitlines() == served + [""]  # its .keras file translates as its SavedModel


# ---------------------------------------------------------------- bad input
def assert_error_line(status, stderr, *words):
    """Exit status 2 and the error on the last line, after what the run said it was doing."""
    assert status == 2 and "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("zoo train: error: "), last
    for word in words:
        assert word in last, (word, last)


def _lines_changed(path, change):
    with open(path, "rb") as f:
        data = f.read()
    gzipped = data[:2] == b"\x1f\x8b"
    data = change(gzip.decompress(data) if gzipped else data)
    with open(path, "wb") as f:
        f.write(gzip.compress(data, mtime=0) if gzipped else data)


def test_bad_corpora_get_one_line_before_training(greek, tmp_path, capsys):
    valid = greek["valid"]
    short = write_pairs(tmp_path, "short", greek_pairs(8, seed=3))
    _lines_changed(short[1], lambda data: data.rsplit(b"\n", 2)[0] + b"\n")  # a line less
    status, _, err = zoo_here(capsys, *train_command(tmp_path / "w1", short, valid))
    assert_one_line_error(status, err, "not line-aligned", f"{short[0]} has 8 lines",
                          f"{short[1]} has 7")  # fmt: skip

    broken = write_pairs(tmp_path, "broken", greek_pairs(8, seed=3))
    _lines_changed(broken[1], lambda data: data.replace("σ".encode(), b"\xcf", 1))
    line = 1 + next(i for i, (_, t) in enumerate(greek_pairs(8, seed=3)) if "σ" in t)
    status, _, err = zoo_here(capsys, *train_command(tmp_path / "w2", broken, valid))
    assert_one_line_error(status, err, f"{broken[1]}, line {line}: invalid UTF-8")

    nothing = [str(tmp_path / "none.*.en"), str(tmp_path / "none.*.el")]
    status, _, err = zoo_here(capsys, *train_command(tmp_path / "w3", nothing, valid))
    assert_one_line_error(status, err, "--train", "none.*.en: no file matches")

    # Every pair over --max-length 3 (the vocabulary given, so that none is learned).
    model = str(greek["workdir"] / SENTENCEPIECE_FILE)
    status, _, err = zoo_here(capsys, *train_command(tmp_path / "w4", greek["train"], valid,
                                                  "--max-length", "3",
                                                  "--sentencepiece-model", model))  # fmt: skip
    assert_error_line(status, err, "no pair is left to train on", "--max-length")

    not_a_model = tmp_path / "vocab.txt"
    not_a_model.write_text("dog\ncat\n")
    status, _, err = zoo_here(capsys, *train_command(tmp_path / "w5", greek["train"], valid,
                                                  "--sentencepiece-model",
                                                  str(not_a_model)))  # fmt: skip
    assert_error_line(status, err, str(not_a_model))
    for number in range(1, 6):
        assert not os.path.exists(tmp_path / f"w{number}" / MODEL_FILE)


def test_a_file_cut_short_mid_training_is_named_and_the_fixed_rerun_resumes(greek):
    (source, target), (status, err) = greek["train"], greek["cut"]
    assert status == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"zoo train: error: {source} and {target}: lines "), last
    assert "then rerun the same command to resume" in last
    assert "Traceback" not in err
    assert greek["left"] == {"backup": True, "model": False}
    # The file restored, the same command resumed and finished (the fixture checks its
    # status).
    assert "resum" in greek["log"].lower(), greek["log"][-2000:]
    assert os.path.exists(greek["workdir"] / MODEL_FILE)
