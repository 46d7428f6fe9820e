"""Sequence-level distillation data: distill() against translate(), its resume after a kill, its
guards, a corpus of the user's (`zoo distill --train`), and a student's training on it through
`zoo train nat --train`.

The teacher is a tiny translator with random weights: its translations are nonsense, but long
and varied (byte pieces, control characters and all), which is what the file format must carry.
"""

import importlib
import json
import os
import shutil

import keras
import pytest

from zoo.artifacts import (
    CONFIG_FILE,
    DISTILL_MANIFEST_FILE,
    MODEL_FILE,
    SENTENCEPIECE_FILE,
    SENTENCEPIECE_PREFIX,
)
from zoo.data import (
    ParallelCorpus,
    SentencePieceTokenizer,
    load_multi30k,
    multi30k_files,
    one_line,
    read_lines,
    read_parallel,
    train_sentencepiece,
)
from zoo.models import build_translator, translator_config
from zoo.tasks import get_task, translate
from zoo.tasks.translation import TranslationTask
from zoo.tasks.translation.distillation import distill
from zoo_cli import CommandLineError, main

# A teacher with no languages recorded was trained on the bundled En-De: its files say so.
DISTILL_SOURCE_FILE, DISTILL_TARGET_FILE, DISTILL_PARTIAL_FILE = "train.en", "train.de", (
    "train.de.partial")
LIMIT, BEAM, BATCH = 20, 2, 8  # 3 batches, the last one short
SETTINGS = {"beam_size": BEAM, "batch_size": BATCH, "limit": LIMIT}
FILES = (DISTILL_SOURCE_FILE, DISTILL_TARGET_FILE, DISTILL_MANIFEST_FILE)
distillation = importlib.import_module("zoo.tasks.translation.distillation")
TEACHER_TRANSLATE = TranslationTask().translate  # the real search, bound before any patching


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A workdir of a tiny random translator and a 400-piece vocabulary."""
    folder = tmp_path_factory.mktemp("teacher")
    keras.utils.set_random_seed(5)
    config = translator_config("tiny", vocab_size=400, max_length=16)
    build_translator(config).save(str(folder / MODEL_FILE))
    texts = [s for pair in load_multi30k("val")[:500] for s in pair]
    train_sentencepiece(texts, folder / SENTENCEPIECE_PREFIX, vocab_size=400)
    return str(folder)


@pytest.fixture(scope="module")
def distilled_run(teacher, tmp_path_factory):
    """The distillation of the first LIMIT pairs, and the ``(model, vocabulary)`` it read from
    the teacher's folder: later runs reuse them (read again, its search compiles again)."""
    folder = str(tmp_path_factory.mktemp("kd") / "kd")
    read = []

    def spy(*args, real=distillation.load_trained):
        read.append(real(*args))
        return read[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(distillation, "load_trained", spy)
        distill(teacher, folder, **SETTINGS)
    (teachers,) = read
    return folder, teachers


@pytest.fixture(scope="module")
def distilled(distilled_run):
    return distilled_run[0]


@pytest.fixture
def read_teacher(distilled_run, teacher, monkeypatch):
    """The teacher's ``(model, vocabulary)``, which distill() now gets without reading them."""

    def load_trained(folder, task):
        assert os.path.samefile(folder, teacher)
        return distilled_run[1]

    monkeypatch.setattr(distillation, "load_trained", load_trained)
    return distilled_run[1]


def _contents(folder):
    contents = {}
    for name in FILES:
        with open(os.path.join(folder, name), "rb") as f:
            contents[name] = f.read()
    return contents


class Translations:
    """``translate`` that records each batch and is killed before batch ``stop_at``."""

    class Killed(Exception):
        pass

    def __init__(self, stop_at=None):
        self.batches, self.stop_at = [], stop_at

    def __call__(self, model, vocabulary, sentences, **options):
        if len(self.batches) == self.stop_at:
            raise self.Killed
        self.batches.append(list(sentences))
        return TEACHER_TRANSLATE(model, vocabulary, sentences, **options)


def test_the_files_hold_the_teachers_beam_translations_in_corpus_order(teacher, distilled_run):
    distilled, (model, vocabulary) = distilled_run  # what distill() read from the teacher
    sources = [source for source, _ in load_multi30k("train")[:LIMIT]]
    assert read_lines(os.path.join(distilled, DISTILL_SOURCE_FILE)) == sources
    expected = translate(model, vocabulary, sources, beam_size=BEAM, batch_size=BATCH)
    targets = read_lines(os.path.join(distilled, DISTILL_TARGET_FILE))
    assert targets == [one_line(text) for text in expected] and any(targets)
    files = [os.path.join(distilled, name) for name in (DISTILL_SOURCE_FILE, DISTILL_TARGET_FILE)]
    assert read_parallel(*files) == list(zip(sources, targets))
    with open(os.path.join(distilled, DISTILL_MANIFEST_FILE)) as f:
        manifest = json.load(f)
    assert manifest["finished"] and manifest["seconds"] > 0
    assert (manifest["teacher"], manifest["beam_size"], manifest["sentences"]) == (
        teacher, BEAM, LIMIT
    )
    assert not os.path.exists(os.path.join(distilled, DISTILL_PARTIAL_FILE))


def test_one_line_keeps_the_format():
    assert one_line("a\tb\nc\r\nd\u2028e") == "a b c  d e"


def test_a_killed_run_resumes_without_translating_twice(teacher, distilled, read_teacher, tmp_path,
                                                        monkeypatch):
    folder = str(tmp_path / "kd")
    killed = Translations(stop_at=2)
    monkeypatch.setattr(TranslationTask, "translate", killed)
    with pytest.raises(Translations.Killed):
        distill(teacher, folder, **SETTINGS)
    with open(os.path.join(folder, DISTILL_MANIFEST_FILE)) as f:
        assert not json.load(f)["finished"]
    partial = os.path.join(folder, DISTILL_PARTIAL_FILE)
    done = {int(line.split("\t")[0]) for line in read_lines(partial)}
    assert len(done) == 2 * BATCH
    # A kill in mid-write leaves a torn line, here cut inside a UTF-8 character.
    with open(partial, "ab") as f:
        f.write("7\tEin Hund l\u00e4".encode()[:-1])

    resumed = Translations()
    monkeypatch.setattr(TranslationTask, "translate", resumed)
    distill(teacher, folder, **SETTINGS)
    sources = [source for source, _ in load_multi30k("train")[:LIMIT]]
    assert sorted(sum(resumed.batches, [])) == sorted(
        source for i, source in enumerate(sources) if i not in done
    )
    for name in (DISTILL_SOURCE_FILE, DISTILL_TARGET_FILE):
        assert _contents(folder)[name] == _contents(distilled)[name], name


def test_a_finished_folder_is_left_alone_and_other_settings_are_refused(
    teacher, distilled, tmp_path, monkeypatch, capsys
):
    before = _contents(distilled)
    monkeypatch.setattr(TranslationTask, "translate", None)  # nothing may be translated
    import zoo.cli  # noqa: F401  (imported now, it binds the real load, not the patch below)

    monkeypatch.setattr(distillation, "load_trained", None)  # nor the teacher even loaded
    main(["distill", "--teacher", teacher, "--workdir", distilled, "--beam-size", str(BEAM),
          "--batch-size", "3", "--limit", str(LIMIT)])
    out, err = capsys.readouterr()
    assert "nothing to do" in err and out.startswith(f"{LIMIT} distilled pairs in {distilled}")
    assert _contents(distilled) == before

    for change, field in [({"beam_size": 3}, "beam_size"), ({"limit": 5}, "sentences")]:
        with pytest.raises(ValueError, match=f"begun with {field}"):
            distill(teacher, distilled, **{**SETTINGS, **change})
    with pytest.raises(ValueError, match="begun with teacher"):
        distill(str(tmp_path / "another"), distilled, **SETTINGS)
    assert _contents(distilled) == before


def test_a_partial_file_of_something_else_is_refused(teacher, tmp_path):
    folder = tmp_path / "kd"
    folder.mkdir()
    (folder / DISTILL_PARTIAL_FILE).write_text("3\tEin Hund.\n")
    with pytest.raises(ValueError, match=f"found without .*{DISTILL_MANIFEST_FILE}"):
        distill(teacher, folder, **SETTINGS)
    data = ParallelCorpus([multi30k_files("train")]).fingerprint()
    manifest = {"teacher": teacher, "beam_size": BEAM, "sentences": LIMIT, "data": data,
                "seconds": 0.0, "finished": False}
    (folder / DISTILL_MANIFEST_FILE).write_text(json.dumps(manifest))
    (folder / DISTILL_PARTIAL_FILE).write_text(f"3\tEin Hund.\n{LIMIT}\tZu weit.\n")
    with pytest.raises(ValueError, match="line 2: not an index<TAB>translation line"):
        distill(teacher, folder, **SETTINGS)


class StartedTraining(Exception):
    """Raised once the student's first batch is read: what follows is any NAT's training."""


def test_zoo_train_nat_reads_the_distilled_pairs_and_keeps_to_them(distilled, tmp_path,
                                                                   monkeypatch):
    """A distillation's folder is a corpus like any other: `--train` its two files, in the
    teacher's vocabulary (`--sentencepiece-model`), and a resume on other files is refused.
    The run stops at its first batch (how a NAT trains on: tests/tasks/nat/test_task.py)."""
    task = get_task("nat")
    seen = {}

    def spy(*args, real=task.dataset, **kwargs):
        dataset = real(*args, **kwargs)
        if kwargs.get("training", True):
            seen["files"] = [record.path for record in args[2].files]
            seen["batch"] = next(iter(dataset))
            raise StartedTraining
        return dataset

    monkeypatch.setattr(task, "dataset", spy)
    workdir = str(tmp_path / "nat")
    files = [os.path.join(distilled, name) for name in (DISTILL_SOURCE_FILE, DISTILL_TARGET_FILE)]
    teachers = os.path.join(distilled, SENTENCEPIECE_FILE)
    data = ["--train", *files, "--valid", *files, "--sentencepiece-model", teachers]
    flags = ["--preset", "tiny", "--max-length", "48", "--epochs", "1", "--bleu-sample", "0"]
    with pytest.raises(StartedTraining):
        main(["train", "nat", "--workdir", workdir, *data, *flags, "--debug"])
    assert seen["files"] == files
    # The first batch's sources are distilled sources in the teacher's pieces.
    vocabulary = SentencePieceTokenizer(teachers)
    pieces = {tuple(ids) for ids in vocabulary.tokenize(read_lines(files[0])).to_list()}
    features, _ = seen["batch"]
    sources = [tuple(row[row > 0].tolist()) for row in features["source"].numpy()]
    assert sources and set(sources) <= pieces, sources
    # The student's vocabulary is the teacher's, so the teacher can rescore its outputs; its
    # size comes from it.
    with open(teachers, "rb") as f, open(os.path.join(workdir, SENTENCEPIECE_FILE), "rb") as g:
        assert f.read() == g.read()
    with open(os.path.join(workdir, CONFIG_FILE)) as f:
        assert json.load(f)["vocab_size"] == 400
    # Resuming on Multi30k instead would mix two data sets: the changed file is named.
    with pytest.raises(CommandLineError, match="train.en.gz is not the file this run started on"):
        main(["train", "nat", "--workdir", workdir, "--sentencepiece-model", teachers, *flags])
    # Missing data is named before a workdir is made.
    with pytest.raises(CommandLineError, match="nowhere.en: no such file"):
        main(["train", "nat", "--workdir", workdir + "2", "--train", str(tmp_path / "nowhere.en"),
              files[1], "--valid", *files])
    assert not os.path.exists(workdir + "2")


def test_distill_translates_the_sources_of_a_users_corpus(teacher, read_teacher, tmp_path, capsys):
    sources = ["A man reads.", "Two dogs play in the park.", "", "A woman sings a song."]
    (tmp_path / "mine.en").write_text("".join(s + "\n" for s in sources))
    (tmp_path / "mine.de").write_text("x\n" * len(sources))  # not read
    folder = str(tmp_path / "kd")
    corpus = ["--train", str(tmp_path / "mine.en"), str(tmp_path / "mine.de")]
    main(["distill", "--teacher", teacher, "--workdir", folder, *corpus, "--beam-size", "2"])
    assert capsys.readouterr().out.startswith(f"4 distilled pairs in {folder} (train.en and "
                                              "train.de)")  # fmt: skip
    assert read_lines(os.path.join(folder, DISTILL_SOURCE_FILE)) == sources
    model, vocabulary = read_teacher
    expected = translate(model, vocabulary, sources, beam_size=2, batch_size=64)
    assert read_lines(os.path.join(folder, DISTILL_TARGET_FILE)) == [one_line(t) for t in expected]
    # Another corpus in the same folder is refused; so is one named in another language.
    (tmp_path / "mine.en").write_text("Something else.\n" * len(sources))
    with pytest.raises(CommandLineError, match="mine.en is not the file this run started on"):
        main(["distill", "--teacher", teacher, "--workdir", folder, *corpus, "--beam-size", "2"])
    shutil.copy(tmp_path / "mine.en", tmp_path / "mine.cs")
    with pytest.raises(CommandLineError, match="the teacher translates from 'en', and .*mine.cs "
                       "is named as 'cs'"):  # fmt: skip
        main(["distill", "--teacher", teacher, "--workdir", str(tmp_path / "kd2"), "--train",
              str(tmp_path / "mine.cs"), str(tmp_path / "mine.de")])
