"""The command line as a user meets it: through the real `zoo` entry point, in subprocesses.

Argument errors and `--help` must come back without a TensorFlow import; every error a user can
cause ends in one line on stderr and exit status 2, never a traceback. The one run of the real
command that imports TensorFlow (quiet, seeded, with its progress bar) is in test_cli_data.py,
on the small model trained there; a command that gets as far as TensorFlow runs in this process
here (``zoo_here``), where it costs no start of a Python and TensorFlow.
"""

import io
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import zoo_cli
from tests.harness import REPO_ROOT
from zoo_cli import main

SHIPPED_TAGGER = os.path.join(REPO_ROOT, "saved_models", "tagger-en-ewt")
SHIPPED_TRANSLATOR = os.path.join(REPO_ROOT, "saved_models", "translator-en-de")
ZOO = os.path.join(os.path.dirname(sys.executable), "zoo")  # the installed console script


def zoo(*args, stdin=None):
    """Run the real `zoo` command (with TF_CPP_MIN_LOG_LEVEL unset); return (exit status,
    stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [ZOO, *args], capture_output=True, text=True, input=stdin, env=env, timeout=600
    )
    return result.returncode, result.stdout, result.stderr


def zoo_here(capsys, *args, stdin=None):
    """``zoo`` run in this process (exit status, stdout, stderr), with ``stdin`` (a ``str``) as
    its standard input when given."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        if stdin is not None:
            patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), "utf-8"))
        try:
            main(list(args))
            status = 0
        except SystemExit as exit:
            status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line_error(status, stderr, *words):
    assert status == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


# ---------------------------------------------------------------- moved from the old tests
def test_tag_prints_word_slash_tag_per_sentence(capsys):
    main(["tag", "--workdir", SHIPPED_TAGGER, "I want to book a flight .", "She read a good book ."])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split() == [
        "I/PRON", "want/VERB", "to/PART", "book/VERB", "a/DET", "flight/NOUN", "./PUNCT"
    ]
    assert lines[-1].split()[-2:] == ["book/NOUN", "./PUNCT"]


def test_each_input_gives_one_output_line_whatever_the_model_emits(capsys, monkeypatch):
    """A model can emit a line break (byte fallback): the output must stay line-aligned."""
    from zoo.tasks.tagging import TaggingTask

    monkeypatch.setattr(TaggingTask, "predict", lambda self, model, vocabulary, lines, **_: [
        f"{line}\nX\u2028Y\x0bZ" for line in lines
    ])  # fmt: skip
    main(["tag", "--workdir", SHIPPED_TAGGER, "a b", "c"])
    assert capsys.readouterr().out.splitlines() == ["a b X Y Z", "c X Y Z"]


def test_a_resume_without_epochs_trains_to_the_epochs_its_run_was_started_with(tmp_path,
                                                                              monkeypatch):
    """Not to the preset's: a run started with --epochs 80 would stop at the preset's 40."""
    import json

    import zoo.cli

    configs = []
    monkeypatch.setattr(zoo.cli, "train", lambda task, config, *a, **k: configs.append(config))
    argv = ["train", "translator", "--preset", "tiny", "--workdir", str(tmp_path)]
    main(argv)  # a new workdir: the preset's epochs
    (tmp_path / "config.json").write_text(json.dumps({"epochs": 80}))
    main(argv)  # a resume without --epochs: the run's
    main(argv + ["--epochs", "90"])  # a resume that asks for more
    (tmp_path / "config.json").write_text("{not json")
    main(argv)  # a corrupt config is left to train()'s config guard to name
    from zoo.tasks.translation.config import get_config

    preset = get_config("tiny").epochs
    assert [config.epochs for config in configs] == [preset, 80, 90, preset]


def test_a_workdir_without_a_model_exits_with_a_message(tmp_path):
    with pytest.raises(SystemExit, match="no trained model"):
        main(["tag", "--workdir", str(tmp_path), "a b"])
    with pytest.raises(SystemExit, match="no trained model"):
        main(["evaluate", "tagger", "--workdir", str(tmp_path)])


# ---------------------------------------------------------------- no TensorFlow for parsing
_IMPORTS = textwrap.dedent(
    """
    import sys
    import zoo_cli
    try:
        zoo_cli.main(sys.argv[1:])
    except SystemExit:
        pass
    # zoo's table of tasks and its constants only (the standard library), never the package
    heavy = sorted({m for m in sys.modules} & {"tensorflow", "keras", "zoo", "jax"})
    print("heavy:", heavy)
    """
)


def heavy_imports(*argv):
    """The heavy modules that `zoo ARGV` imported before it exited."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS, *argv], capture_output=True, text=True, timeout=60
    )
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["train", "translator", "--help"],
        ["train", "translator", "--preset", "huge", "--workdir", "w"],
        ["evaluate", "tagger", "--workdir", "w", "--beam-size", "3"],
        ["distill", "--help"],
        # A model folder that cannot serve the command: refused from its files alone.
        ["translate", "--workdir", "nowhere", "A dog."],
        ["evaluate", "tagger", "--workdir", SHIPPED_TRANSLATOR],
        ["tag", "--workdir", SHIPPED_TRANSLATOR, "A dog ."],
        ["export", "translator", "--workdir", SHIPPED_TAGGER, "--output", "nowhere"],
        ["distill", "--teacher", SHIPPED_TAGGER, "--workdir", "nowhere"],
    ],
)
def test_help_and_argument_errors_import_no_tensorflow(argv):
    assert heavy_imports(*argv) == "heavy: []"


def test_version():
    status, out, err = zoo("--version")
    assert status == 0 and out.strip() == f"zoo {zoo_cli._version()}", out + err


# ---------------------------------------------------------------- one line, exit status 2
@pytest.mark.parametrize(
    "argv, words",
    [
        (["train", "translator", "--preset", "huge", "--workdir", "w"], ["--preset", "huge"]),
        (["evaluate", "translator", "--workdir", "w", "--splits", "nope"], ["--splits", "nope"]),
        (["train", "tagger", "--vocab-size", "5000", "--workdir", "w"],
         ["--vocab-size", "translator only"]),
        (["train", "tagger", "--bleu-sample", "5", "--workdir", "w"],
         ["--bleu-sample", "the nat, translator and transliterator only"]),
        (["train", "translator", "--xpos", "--workdir", "w"], ["--xpos", "tagger only"]),
        (["train", "tagger", "--source-lang", "en", "--workdir", "w"],
         ["--source-lang", "nat and translator only"]),
        # Data flags (issue 53): a corpus is two files, validated on pairs of its own.
        (["train", "translator", "--train", "a.en", "--workdir", "w"],
         ["--train", "takes SRC TGT [WEIGHT], got 1 value"]),
        (["train", "translator", "--train", "a.en", "a.de", "b.en", "b.de", "--workdir", "w"],
         ["--train", "got 4 value", "quote a glob"]),
        (["train", "translator", "--train", "a.en", "a.de", "--workdir", "w"],
         ["--train needs --valid"]),
        (["train", "nat", "--train", "a.en", "a.de", "-1", "--valid", "b.en", "b.de",
          "--workdir", "w"], ["--train", "'-1' is not a number above 0"]),
        (["train", "translator", "--train", "src.txt", "tgt.txt", "--valid", "b", "c",
          "--workdir", "w"], ["source language of src.txt", "--source-lang"]),
        (["train", "translator", "--train", "a.en", "b.en", "--valid", "b", "c",
          "--workdir", "w"], ["both 'en'"]),
        # No prefix matching: a shortened flag is no longer another flag.
        (["train", "translator", "--vocab", "123", "--workdir", "w"],
         ["unrecognized arguments: --vocab 123"]),
        (["train", "translator", "--de", "--workdir", "w"], ["unrecognized arguments: --de"]),
        (["distill", "--workdir", "kd"], ["--teacher"]),
        (["distill", "--teacher", "t", "--workdir", "kd", "--limit", "0"], ["--limit", "0"]),
        (["evaluate", "tagger", "--beam-size", "3", "--workdir", "w"],
         ["--beam-size", "the translator and transliterator only"]),
        (["train", "translator", "--epochs", "0", "--workdir", "w"], ["--epochs", "0"]),
        (["export", "tagger", "--workdir", "w", "--output", "o", "--serving-version", "0"],
         ["--serving-version", "0"]),
        (["train", "translator", "--dropout", "1.5", "--workdir", "w"],
         ["--dropout", "1.5 is not less than 1"]),
        (["train", "nat", "--learning-rate", "0", "--workdir", "w"],
         ["--learning-rate", "not more than 0"]),
        (["train", "tagger", "--learning-rate", "1e-3", "--workdir", "w"],
         ["--learning-rate", "the nat, translator and transliterator only"]),
        (["train", "translator", "--mixed-precision", "float8", "--workdir", "w"],
         ["--mixed-precision", "float8", "bfloat16", "float16"]),
        (["train", "translator", "--scheduled-sampling-k", "-1", "--workdir", "w"],
         ["--scheduled-sampling-k", "less than 0"]),
        (["train", "translator", "--cross-attention-layers", "first", "--workdir", "w"],
         ["--cross-attention-layers", "'first'", "last, mix or comma-separated"]),
        (["train", "nat", "--cross-attention-layers", "mix", "--workdir", "w"],
         ["--cross-attention-layers", "translator only"]),
        (["train", "translator", "--time-limit", "soon", "--workdir", "w"],
         ["--time-limit", "soon"]),
        (["train", "translator", "--dropout", "nan", "--workdir", "w"],
         ["--dropout", "nan is not a finite number"]),
        (["train", "nat", "--learning-rate", "inf", "--workdir", "w"],
         ["--learning-rate", "inf is not a finite number"]),
        (["translate", "--workdir", "w", "--alpha", "-1"], ["--alpha", "less than 0"]),
        (["evaluate", "nat", "--alpha", "1", "--workdir", "w"], ["--alpha", "translator only"]),
        (["train", "nat", "--init-from", "nowhere", "--workdir", "w"],
         ["--init-from", "nowhere", "no such folder"]),
        (["train", "gpt", "--workdir", "w"], ["gpt"]),
        (["train", "translator"], ["--workdir"]),
        (["fly"], ["fly"]),
    ],
)
def test_bad_arguments_get_one_line_and_status_2(argv, words):
    status, _, err = zoo(*argv)
    assert_one_line_error(status, err, *words)


def test_missing_and_corrupt_files_get_one_line(tmp_path, capsys):
    status, _, err = zoo("translate", "--workdir", str(tmp_path / "nowhere"), "A dog.")
    assert_one_line_error(status, err, "nowhere", "no such folder")

    status, _, err = zoo("evaluate", "translator", "--workdir", str(tmp_path))
    assert_one_line_error(status, err, "no trained model", "model.keras")

    # A truncated model.keras: Keras alone would say "File not found" under a traceback.
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    with open(os.path.join(SHIPPED_TAGGER, "model.keras"), "rb") as f:
        (truncated / "model.keras").write_bytes(f.read()[:50_000])
    shutil.copy(os.path.join(SHIPPED_TAGGER, "vocabulary.json"), truncated)
    status, _, err = zoo("tag", "--workdir", str(truncated), "A dog .")
    assert_one_line_error(status, err, str(truncated / "model.keras"), "truncated")
    assert heavy_imports("tag", "--workdir", str(truncated), "A dog .") == "heavy: []"

    # The right model with a broken vocabulary beside it: found once TensorFlow is up, so in
    # this process (the real command's run in test_cli_data.py keeps TensorFlow's lines off).
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(os.path.join(SHIPPED_TAGGER, "model.keras"), broken)
    (broken / "vocabulary.json").write_text("{not json")
    status, _, err = zoo_here(capsys, "tag", "--workdir", str(broken), "A dog .")
    assert_one_line_error(status, err, str(broken / "vocabulary.json"))


def test_a_model_of_another_task_is_named(tmp_path):
    status, _, err = zoo("tag", "--workdir", SHIPPED_TRANSLATOR, "A dog .")
    assert_one_line_error(status, err, "holds a translator", "zoo translate")
    status, _, err = zoo("translate", "--workdir", SHIPPED_TAGGER, "--beam-size", "2", "A dog .")
    assert_one_line_error(status, err, "holds a tagger", "zoo tag")


def test_distill_names_a_teacher_that_is_no_translator(tmp_path):
    status, _, err = zoo("distill", "--teacher", SHIPPED_TAGGER, "--workdir", str(tmp_path / "kd"))
    assert_one_line_error(status, err, SHIPPED_TAGGER, "holds a tagger, not a translator")
    assert not (tmp_path / "kd").exists()


# ---------------------------------------------------------------- TensorFlow's log lines
_QUIETED = textwrap.dedent(
    """
    import os, sys
    import zoo_cli
    zoo_cli.quiet_native_logs()
    print("level", os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
    print("said on sys.stderr", file=sys.stderr, flush=True)
    os.write(2, b"written to file descriptor 2, as TensorFlow's C++ logs are")
    """
)


@pytest.mark.parametrize("level", [None, "3", "1"])
def test_the_usual_silencing_variable_leaves_it_quiet_too(level):
    """TF_CPP_MIN_LOG_LEVEL=3, the usual way to silence TensorFlow, let its start-up lines
    through (the CUDA probes log before the variable is read): the command quiets them as it
    does with the variable unset, whose real run (test_cli_data.py) shows no C++ line, while
    sys.stderr still reaches the terminal. A level that asks for the lines (0, 1) keeps them.
    A Python without TensorFlow shows it: the quieting runs before TensorFlow's import."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    result = subprocess.run([sys.executable, "-c", _QUIETED], capture_output=True, text=True,
                            env=env, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["level", level or "3"]
    assert "said on sys.stderr" in result.stderr
    assert ("file descriptor 2" in result.stderr) == (level == "1"), result.stderr


def test_the_command_line_reads_the_runs_options_from_zoo():
    from zoo.training.options import BACKUP_EVERY, MIXED_POLICIES, STRATEGIES

    parse = zoo_cli.build_parser().parse_args
    argv = ["train", "translator", "--workdir", "w"]
    assert parse(argv).backup_every == BACKUP_EVERY
    for strategy in STRATEGIES:
        assert parse(argv + ["--strategy", strategy]).strategy == strategy
    assert parse(argv).mixed_precision is None
    assert parse(argv + ["--mixed-precision"]).mixed_precision == "bfloat16"
    for compute in MIXED_POLICIES:
        assert parse(argv + ["--mixed-precision", compute]).mixed_precision == compute
    assert parse(argv + ["--copy-mechanism"]).copy_mechanism is True
    assert not hasattr(parse(argv), "copy_mechanism")
    # The training levers override config fields of the same name (never task options).
    import dataclasses

    from zoo.tasks import TASKS

    run = {name: task.config_class for name, task in TASKS.items()}
    levers = {names[0][2:].replace("-", "_") for names, _ in zoo_cli.table.REGULARIZATION}
    for name in ("translator", "nat"):
        assert levers <= {field.name for field in dataclasses.fields(run[name])}
    for name in ("translator", "nat", "tagger"):
        parsed = parse(["train", name, "--workdir", "w", "--gradient-accumulation-steps", "4"])
        assert parsed.gradient_accumulation_steps == 4
        assert "gradient_accumulation_steps" in {f.name for f in dataclasses.fields(run[name])}


def test_export_translator_alpha_reaches_the_export():
    """`zoo export translator --alpha A` passes A (a task option) to the translator's
    export_serving, whose signatures bake it into the beam search of the SavedModel."""
    import inspect

    from zoo.models.translator.serving import TranslatorServing

    argv = ["export", "translator", "--workdir", "w", "--output", "o", "--alpha", "1"]
    args = zoo_cli.build_parser().parse_args(argv)
    assert args.alpha == 1.0 and "alpha" in args.task_options
    assert "alpha" in inspect.signature(TranslatorServing).parameters
