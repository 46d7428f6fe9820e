"""A user's own treebank through the `zoo` command: a rule-made Russian treebank (Cyrillic) in
UD-named CoNLL-U files trains every head (UPOS, XPOS, FEATS, lemma; its language and name
recorded), validates with an XPOS tag that training never saw, is scored with the CoNLL 2018
figures, tags CoNLL-U in and out, and exports (in TF Serving's version folder); and each bad
input gets one line, exit status 2, and loses nothing. The commands run in this process
(`zoo_cli.main`): tests/test_cli.py covers what only a subprocess shows."""

import gzip
import json
import os
import random

import pytest

import zoo_cli
from tests.test_cli import SHIPPED_TAGGER, zoo_here
from zoo.artifacts import DATA_FILE, LANGUAGES_FILE, MODEL_FILE, serving_path
from zoo.data.conllu import iter_conllu

# A word, its UPOS, XPOS, features and lemma: a sentence is a subject, a verb and an object.
NOUNS = [("кошка", "кошка", "Gender=Fem|Number=Sing"),
         ("кошки", "кошка", "Gender=Fem|Number=Plur"),
         ("дом", "дом", "Gender=Masc|Number=Sing"),
         ("дома", "дом", "Gender=Masc|Number=Plur"),
         ("собака", "собака", "Gender=Fem|Number=Sing"),
         ("окно", "окно", "Gender=Neut|Number=Sing")]  # fmt: skip
VERBS = [("видит", "видеть"), ("любит", "любить"), ("ест", "есть")]
ADJECTIVES = ["большой", "красный", "новый"]


def sentence_lines(rng, number, unseen_xpos=False):
    words = []
    subject, verb, obj = rng.choice(NOUNS), rng.choice(VERBS), rng.choice(NOUNS)
    if rng.random() < 0.5:
        words.append((rng.choice(ADJECTIVES), "_", "ADJ", "JJ", "Degree=Pos"))
    words.append((subject[0], subject[1], "NOUN", "NN", subject[2]))
    words.append((verb[0], verb[1], "VERB", "VBZ" if not unseen_xpos else "VBX", "Tense=Pres"))
    words.append((obj[0], obj[1], "NOUN", "NN", obj[2]))
    words.append((".", ".", "PUNCT", "PUNCT", "_"))
    lines = [f"# sent_id = s{number}", f"# text = {' '.join(w[0] for w in words)}"]
    for i, (form, lemma, upos, xpos, feats) in enumerate(words, start=1):
        lemma = form if lemma == "_" else lemma
        lines.append("\t".join([str(i), form, lemma, upos, xpos, feats, "0" if i == 1 else "1",
                                "root" if i == 1 else "dep", "_", "_"]))  # fmt: skip
    return "\n".join(lines) + "\n\n"


def write_treebank(folder, name, count, seed, gzipped=False, unseen=0):
    rng = random.Random(seed)
    text = "".join(sentence_lines(rng, n, unseen_xpos=n < unseen) for n in range(count))
    path = os.path.join(folder, name + (".gz" if gzipped else ""))
    with open(path, "wb") as f:
        f.write(gzip.compress(text.encode(), mtime=0) if gzipped else text.encode())
    return path


def train_command(workdir, *extra):
    return ["train", "tagger", "--preset", "tiny", "--workdir", str(workdir), "--seed", "0",
            "--epochs", "4", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def russian(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ru")
    files = {
        "train": write_treebank(folder, "ru_rule-ud-train.conllu", 300, seed=0, gzipped=True),
        "dev": write_treebank(folder, "ru_rule-ud-dev.conllu", 30, seed=1, unseen=3),
        "test": write_treebank(folder, "ru_rule-ud-test.conllu", 30, seed=2),
    }
    return folder, files


def test_a_russian_treebank_trains_is_scored_and_exports(russian, tmp_path, capsys):
    _, files = russian
    workdir = tmp_path / "w"
    status, _, err = zoo_here(capsys, *train_command(workdir, "--xpos", "--feats", "--lemmas",
                                                     "--train", files["train"], "--valid",
                                                     files["dev"]))  # fmt: skip
    assert status == 0, err[-3000:]
    assert "the validation data has 3 XPOS tag(s) that the training data never had" in err
    assert "keeping the epoch with the best val_alltags" in err
    with open(workdir / "config.json") as f:
        config = json.load(f)
    assert (config["language"], config["treebank"]) == ("ru", "RULE")
    with open(workdir / DATA_FILE) as f:
        data = json.load(f)
    assert data["languages"] == {"language": "ru", "treebank": "RULE"}
    assert data["training_data"]["corpora"][0]["shards"][0][0]["name"] == os.path.basename(
        files["train"])  # the file by name, not its path
    assert str(tmp_path) not in json.dumps(data)

    # The export, in the version folder that TF Serving reads.
    export = tmp_path / "export"
    status, out, err = zoo_here(capsys, "export", "tagger", "--workdir", str(workdir),
                                "--output", str(export), "--serving-version", "3")  # fmt: skip
    assert status == 0, err[-3000:]
    assert out.strip() == f"exported to {export}"
    assert sorted(os.listdir(export)) == [LANGUAGES_FILE, "model.keras", "serving",
                                          "vocabulary.json"]  # fmt: skip
    assert os.listdir(export / "serving") == ["3"]
    serving = serving_path(str(export), version=3)
    assert os.path.isfile(os.path.join(serving, "saved_model.pb"))
    with open(os.path.join(serving, "assets.extra", LANGUAGES_FILE)) as f:
        assert json.load(f) == {"language": "ru", "treebank": "RULE"}
    # Scored from the export (the workdir's model; `zoo tag` below reads the workdir), whose
    # languages the evaluation names.
    status, _, err = zoo_here(capsys, "evaluate", "tagger", "--workdir", str(export), "--gold",
                              files["test"])  # fmt: skip
    assert status == 0 and f"{export}: ru (UD RULE)" in err, err[-3000:]
    with open(export / "eval" / "ru_rule-ud-test.json") as f:
        report = json.load(f)
    assert set(report["figures"]) == {"UPOS", "XPOS", "UFeats", "AllTags", "Lemmas"}
    assert min(report["figures"].values()) > 90 and report["words"] > 100, report
    assert report["unseen"]["unseen_tokens"] == 0  # every test word is in training
    predicted = report["predicted"]
    with open(files["test"], encoding="utf-8") as f, open(predicted, encoding="utf-8") as g:
        for gold_line, line in zip(f, g):
            if gold_line[0].isdigit():  # every column but those predicted as it was
                gold_fields, fields = gold_line.split("\t"), line.split("\t")
                for index in (0, 1, 6, 7, 8, 9):
                    assert fields[index] == gold_fields[index]
            else:
                assert line == gold_line

    # CoNLL-U in, CoNLL-U out (stdin): the tags to predict are "_", with a multiword token, an
    # empty node and CRLF endings; the output is the input with the model's tags filled in,
    # the same the evaluation's predicted file has, and every other byte as it was.
    with open(files["test"], encoding="utf-8", newline="") as f:
        gold_lines = f.read().splitlines(keepends=True)
    with open(predicted, encoding="utf-8", newline="") as f:
        predicted_lines = f.read().splitlines(keepends=True)
    lines, expected = [], []
    for number, (line, tagged) in enumerate(zip(gold_lines, predicted_lines)):
        ending = "\r\n" if number < 8 else "\n"
        if line[0].isdigit():
            fields, tagged_fields = line.rstrip("\n").split("\t"), tagged.split("\t")
            fields[2:6] = ["_"] * 4
            lines.append("\t".join(fields) + ending)
            fields[2:6] = tagged_fields[2:6]
            expected.append("\t".join(fields) + ending)
        else:
            lines.append(line.rstrip("\n") + ending)
            expected.append(line.rstrip("\n") + ending)
    extra = ["1-2\tмультислово\t_\t_\t_\t_\t_\t_\t_\t_\r\n",
             "2.1\tпусто\t_\t_\t_\t_\t_\t_\t_\t_\r\n"]  # fmt: skip
    lines[2:2], expected[2:2] = extra[:1], extra[:1]
    lines[5:5], expected[5:5] = extra[1:], extra[1:]
    status, out, err = zoo_here(capsys, "tag", "--workdir", str(workdir), "--conllu", "-",
                                stdin="".join(lines))  # fmt: skip
    assert status == 0, err[-3000:]
    assert out == "".join(expected)

    # The tokens signature serves what `zoo tag` writes: every head's column, word by word.
    import tensorflow as tf

    sentences = list(iter_conllu(predicted))
    tokens = [list(sentence.words) for sentence in sentences]
    tokens[0][1] = "дом с окном"  # a FORM with spaces stays one token
    width = max(map(len, tokens))
    served = tf.saved_model.load(serving).signatures["tag_tokens"](
        tokens=tf.constant([row + [""] * (width - len(row)) for row in tokens]),
        lengths=tf.constant([len(row) for row in tokens], tf.int32),
    )
    assert served["lengths"].numpy().tolist() == [len(row) for row in tokens]
    assert served["tokens"].numpy()[0][1].decode() == "дом с окном"
    for output, column in [("tags", "UPOS"), ("xpos_tags", "XPOS"), ("feats", "FEATS"),
                           ("lemmas", "LEMMA")]:  # fmt: skip
        values = [[value.decode() for value in row[: len(tokens[i])]]
                  for i, row in enumerate(served[output].numpy())]  # fmt: skip
        expected = [list(sentence.column(column)) for sentence in sentences]
        assert values[1:] == expected[1:], output  # the first sentence has a changed word


def test_bad_treebanks_get_one_line_and_lose_nothing(russian, tmp_path, capsys):
    folder, files = russian

    def refused(*argv):
        status, _, err = zoo_here(capsys, *argv)
        assert status == 2 and "Traceback" not in err, err[-3000:]
        lines = err.strip().splitlines()
        assert lines[-1].startswith("zoo "), lines[-1]
        return lines[-1]

    line = refused(*train_command(tmp_path / "w1", "--train", files["train"]))
    assert "--train needs --valid FILE" in line

    mine = write_treebank(tmp_path, "mine.conllu", 5, seed=3)
    line = refused(*train_command(tmp_path / "w2", "--train", mine, "--valid", files["dev"]))
    assert "the language of" in line and "--language" in line

    empty = tmp_path / "xx_empty-ud-train.conllu"
    empty.write_text("\n")
    line = refused(*train_command(tmp_path / "w3", "--train", str(empty), "--valid",
                                  files["dev"]))  # fmt: skip
    assert "no sentence in it (an empty treebank)" in line and str(empty) in line

    broken = tmp_path / "xx_broken-ud-train.conllu"
    text = open(files["dev"], encoding="utf-8").read().splitlines(keepends=True)
    text[2] = text[2].replace("\t", " ", 1)  # the first word line (line 3): 9 fields
    broken.write_text("".join(text), encoding="utf-8")
    line = refused(*train_command(tmp_path / "w4", "--train", str(broken), "--valid",
                                  files["dev"]))  # fmt: skip
    assert f"{broken}, line 3: expected 10 tab-separated fields" in line

    line = refused(*train_command(tmp_path / "w5", "--train", str(tmp_path / "none*.conllu"),
                                  "--valid", files["dev"], "--language", "xx"))  # fmt: skip
    assert "--train" in line and "no file matches" in line
    blank = tmp_path / "xx_blank-ud-train.conllu"
    with open(files["dev"], encoding="utf-8") as f:
        lines = [line.split("\t") for line in f]
    blank.write_text("".join("\t".join(fields[:5] + ["_"] + fields[6:]) if len(fields) == 10
                             else fields[0] for fields in lines), encoding="utf-8")  # fmt: skip
    line = refused(*train_command(tmp_path / "w6", "--feats", "--train", str(blank), "--valid",
                                  files["dev"]))  # fmt: skip
    assert "--feats: the training data's FEATS column is blank ('_' throughout)" in line
    for number in range(1, 7):
        assert not os.path.exists(tmp_path / f"w{number}" / MODEL_FILE)

    line = refused("evaluate", "tagger", "--workdir", SHIPPED_TAGGER, "--gold", files["test"],
                   "--splits", "dev")  # fmt: skip
    assert "--gold scores a file" in line
    ru = tmp_path / "ru"  # a model of another treebank: EWT's splits would score nothing real
    ru.mkdir()
    for name in ("model.keras", "vocabulary.json"):
        os.symlink(os.path.join(SHIPPED_TAGGER, name), ru / name)
    (ru / LANGUAGES_FILE).write_text(json.dumps({"language": "ru", "treebank": "RULE"}))
    line = refused("evaluate", "tagger", "--workdir", str(ru))
    assert "is a ru (UD RULE) model and the bundled splits are en (UD EWT)" in line


@pytest.mark.parametrize("argv, expected", [
    (["--train", "ud/fr_gsd-ud-train.conllu.gz"], ("fr", "GSD")),
    (["--train", "ud/ru_syntagrus-ud-train-*.conllu"], ("ru", "SYNTAGRUS")),  # a glob of parts
    (["--train", "mine.conllu", "--language", "xx"], ("xx", "mine")),
    (["--train", "ud/fr_gsd-ud-train.conllu", "--treebank", "Mine"], ("fr", "Mine")),
])  # fmt: skip
def test_the_language_and_treebank_come_from_the_ud_name_or_the_flags(argv, expected):
    args = zoo_cli.build_parser().parse_args(["train", "tagger", "--workdir", "w", *argv,
                                              "--valid", "d.conllu"])  # fmt: skip
    zoo_cli._check_data_flags(args)
    assert (args.language, args.treebank) == expected
