"""The ``zoo`` command: its arguments, parsed before anything heavy is imported.

It stands outside the ``zoo`` package on purpose: ``import zoo`` imports TensorFlow, and
``zoo --help`` or a wrong argument must not wait for that. It builds the parser from
:mod:`zoo.tasks.table`; the commands are in :mod:`zoo.cli`. A user's error ends in one line on
stderr and exit status 2; ``--debug`` shows the traceback instead.
"""

import argparse
import importlib.util
import json
import os
import re
import sys

__all__ = ["CommandLineError", "main"]


def _standard_library_module(name):
    """The zoo module ``name``, which imports only the standard library (and others like it),
    read from its file without the ``zoo`` package's ``__init__`` (TensorFlow), under its own
    name, so that zoo's own imports later get this same module."""
    if name not in sys.modules:
        [package] = importlib.util.find_spec("zoo").submodule_search_locations
        path = os.path.join(package, *name.split(".")[1:]) + ".py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


artifacts = _standard_library_module("zoo.artifacts")
run_options = _standard_library_module("zoo.training.options")
table = _standard_library_module("zoo.tasks.table")
TASKS = table.TASKS


class CommandLineError(SystemExit):
    """Exit with ``status`` after a one-line ``message`` (already printed on stderr)."""

    def __init__(self, message, status=2):
        super().__init__(status)
        self.message = message

    def __str__(self):
        return self.message


# ---------------------------------------------------------------- the parser
class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the problem and where the help is, and no prefix
    matching: a shortened or misspelled flag is an error, never another flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise _usage_error(f"{self.prog}: error: {message} (see {self.prog} --help)")


def _usage_error(message):
    print(message, file=sys.stderr)
    return CommandLineError(message)


def _add(parser, flags):
    dests = []
    for names, options in flags:
        dests.append(parser.add_argument(*names, **options).dest)
    return dests


def _common():
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    common.add_argument("--seed", type=int, help="seed every random generator (reproducible runs)")
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    return common


def build_parser():
    common = _common()
    parser = _Parser(prog="zoo", description="zoo: transformer models in Keras, trained, "
                     "evaluated, served.")
    parser.add_argument("--version", action="version", version=f"zoo {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)

    def per_task(name, help_text, build):
        command = commands.add_parser(name, help=help_text, description=help_text)
        tasks = command.add_subparsers(dest="task", required=True, metavar="TASK",
                                       parser_class=_Parser)
        for task, row in TASKS.items():
            sub = tasks.add_parser(task, help=row["help"], parents=[common])
            sub.set_defaults(task_options=build(sub, task, row))

    def train(sub, task, row):
        sub.add_argument("--workdir", required=True, help="the run's folder (resumes if it exists)")
        sub.add_argument("--preset", default="small", choices=row["presets"])
        sub.add_argument("--strategy", default="auto", choices=run_options.STRATEGIES)
        sub.add_argument("--xla", action="store_true", help="compile the train step with XLA")
        sub.add_argument("--mixed-precision", nargs="?", const="bfloat16", default=None,
                         choices=tuple(run_options.MIXED_POLICIES),
                         help="compute in bfloat16 (the default; CPUs, TPUs, recent GPUs) or "
                         "float16 (with loss scaling; older GPUs); the weights stay float32")
        sub.add_argument("--time-limit", type=table.minutes, help="stop after this many minutes")
        sub.add_argument("--keep-checkpoints", type=table.positive_int,
                         default=run_options.KEEP_CHECKPOINTS,
                         help="keep the weights of this many last epochs, for zoo average")
        sub.add_argument("--init-from", metavar="DIR",
                         help="start a new run from the weights of the trained model in DIR "
                         "(any task), layer by layer where names and shapes match, and with "
                         "its vocabulary; a resumed run starts from its backup")
        sub.add_argument("--backup-every", type=table.positive_int,
                         default=run_options.BACKUP_EVERY, metavar="N",
                         help="back up the training state every N steps too (a killed run "
                         f"resumes there; default {run_options.BACKUP_EVERY})")
        return _add(sub, row["train"])

    def evaluate(sub, task, row):
        sub.add_argument("--workdir", required=True, help="a workdir or an export folder")
        sub.add_argument("--splits", nargs="+", choices=row["splits"],
                         help="default: the validation and test splits")
        sub.add_argument("--output-dir", help="default: WORKDIR/eval")
        return _add(sub, row["evaluate"])

    def export(sub, task, row):
        sub.add_argument("--workdir", required=True, help="a workdir")
        sub.add_argument("--output", required=True, help="the export folder")
        return _add(sub, row["export"])

    per_task("train", "train a model", train)
    per_task("evaluate", "score a trained model on its test data", evaluate)

    # A predict verb serves every task whose row names it; each task keeps its own flags.
    for verb, help_text in table.predict_verbs().items():
        sub = commands.add_parser(verb, help=help_text, description=help_text, parents=[common])
        sub.add_argument("sentences", nargs="*")
        sub.add_argument("--workdir", required=True, help="a workdir or an export folder")
        options, added = {}, set()
        for task, row in TASKS.items():
            if row["predict"] == verb:
                options[task] = _add(argparse.ArgumentParser(add_help=False, allow_abbrev=False),
                                     row["predict_flags"])
                for names, flag_options in row["predict_flags"]:
                    if names not in added:  # two tasks of one verb may share a flag
                        added.add(names)
                        sub.add_argument(*names, **flag_options)
        sub.set_defaults(predict_options=options)

    per_task("export", "write .keras, the vocabulary and a serving SavedModel", export)

    average = commands.add_parser(
        "average", parents=[common], help="average the weights of a run's last epochs",
        description="Write the mean of the last N epochs' weights as WORKDIR/model.keras.",
    )
    average.add_argument("--workdir", required=True, help="a workdir of zoo train")
    average.add_argument("--last", type=table.positive_int, required=True, help="epochs to average")

    distill = commands.add_parser(
        "distill", parents=[common], help="a teacher translator's translations, for train --train",
        description="Translate a corpus's sources (default: the bundled Multi30k's training "
        "pairs) with a teacher translator's beam search: sequence-level distillation data, two "
        "files named by the teacher's languages (train.en, train.de), for `zoo train "
        "nat|translator --train KD/train.en KD/train.de --sentencepiece-model "
        "KD/sentencepiece.model`. Rerunning the same command resumes an interrupted run.",
    )
    distill.add_argument("--teacher", required=True, help="a translator's workdir or export")
    distill.add_argument("--workdir", required=True,
                         help="the data's folder (resumes if it exists)")
    distill.set_defaults(distill_options=_add(distill, (
        table.flag("--train", dest="train_files", nargs="+", action=table.CorpusFlag, metavar="SRC TGT",
             help="the corpus whose sources the teacher translates (its targets are not read; "
             "repeat for several corpora, in order)"),
        table.flag("--beam-size", type=table.positive_int, help="the teacher's beams (default 5)"),
        table.flag("--batch-size", type=table.positive_int, help="sentences translated together (default 64)"),
        table.flag("--limit", type=table.positive_int, help="only the first N training pairs (quick runs)"),
    )))

    bench = commands.add_parser("bench", help="run benchmarks/NAME.py", parents=[common])
    bench.add_argument("name")
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _version():
    from importlib import metadata

    try:
        return metadata.version("keras-zoo")
    except metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- running
def main(argv=None):
    """Run ``zoo`` with ``argv`` (default ``sys.argv[1:]``)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        raise _usage_error(_unknown_flags(args, unknown))
    _check_model_folder(args)
    _check_data_flags(args)
    try:
        cli = _import_commands(quiet=not args.debug)
        cli.run(args)
    except CommandLineError:
        raise
    except KeyboardInterrupt:
        print("zoo: interrupted", file=sys.stderr)
        raise CommandLineError("zoo: interrupted", status=130) from None
    except (ValueError, OSError) as error:  # what a user's input or files cause
        if args.debug:
            raise
        raise _usage_error(f"zoo {args.command}: error: {_one_line(error)}") from None
    except Exception as error:
        if args.debug:
            raise
        message = (
            f"zoo {args.command}: internal error: {type(error).__name__}: {_one_line(error)} "
            "(rerun with --debug for the traceback)"
        )
        print(message, file=sys.stderr)
        raise CommandLineError(message, status=1) from None


def _check_model_folder(args):
    """Refuse, before TensorFlow is imported, a model folder whose files alone show that the
    command cannot use it: no folder, no model, a model file that is no .keras archive (a
    truncated one), or a model of another task (a zoo model is named after its task, in the
    archive's config.json): :func:`zoo.artifacts.folder_task`, which ``zoo.tasks.load``
    runs too. These errors then come back at once."""
    if args.command == "distill":
        folder, expected = args.teacher, ["translator"]
        other = "{folder} holds a {task}, not a translator"
    elif args.command in ("evaluate", "export"):
        folder, expected = args.workdir, [args.task]
        other = "{folder} holds a {task}, not a " + args.task
    elif args.command in table.predict_verbs():
        folder, expected = args.workdir, sorted(args.predict_options)
        other = "{folder} holds a {task}: use `zoo {verb}`, not `zoo " + args.command + "`"
    elif args.command == "train" and args.init_from:
        folder, expected, other = args.init_from, list(TASKS), ""  # a model of any task
    else:
        return
    where = f"zoo {args.command}: error:" + (" --init-from" if args.command == "train" else "")
    trainer = f"zoo train {expected[0]}" if len(expected) == 1 else "zoo train"
    try:
        task = artifacts.folder_task(folder, artifacts.MODEL_FILE, trainer, TASKS)
    except (OSError, ValueError) as error:
        raise _usage_error(f"{where} {error}") from None
    if task not in expected:
        verb = TASKS[task]["predict"]
        raise _usage_error(f"{where} {other.format(folder=folder, task=task, verb=verb)}")


# How UD's release files are named: <language>_<treebank>-ud-<split>[-<part>].conllu.
UD_FILE = re.compile(r"([a-z]{2,3})_([A-Za-z0-9]+)-ud-")
LANGUAGE_SUFFIX = re.compile(r"[a-z]{2,3}([-_][A-Za-z0-9]{2,8})?")
NOT_LANGUAGES = {"txt", "tsv", "csv", "tok", "bpe", "raw", "xml", "dat", "out", "ref", "hyp", "src",
                 "tgt", "trg", "sgm", "log", "tmp"}  # file types, not ISO 639 codes


def _check_data_flags(args):
    """``zoo evaluate --source`` needs ``--reference`` and takes no ``--splits``.
    ``--train`` needs ``--valid`` (no silent fall-back to Multi30k's validation pairs), and
    its languages, named or read from the files' suffixes (``train.cs.gz``: ``cs``)."""
    if args.command == "evaluate" and (hasattr(args, "source") or hasattr(args, "reference")):
        where = f"zoo evaluate {args.task}: error:"
        if not (hasattr(args, "source") and hasattr(args, "reference")):
            raise _usage_error(f"{where} --source and --reference go together")
        if args.splits:
            raise _usage_error(f"{where} --source scores a file: give it or --splits, not both")
        for path in (args.source, *args.reference):
            if not os.path.isfile(path):
                raise _usage_error(f"{where} {path}: no such file")
    if args.command == "evaluate" and hasattr(args, "gold"):
        where = f"zoo evaluate {args.task}: error:"
        if args.splits:
            raise _usage_error(f"{where} --gold scores a file: give it or --splits, not both")
        if not os.path.isfile(args.gold):
            raise _usage_error(f"{where} {args.gold}: no such file")
    if args.command == "distill" and getattr(args, "train_files", None):
        _check_distill_languages(args)
    if args.command != "train" or not getattr(args, "train_files", None):
        return
    where = f"zoo train {args.task}: error:"
    pairs = isinstance(args.train_files[0], list)  # a translator's corpora, a tagger's files
    if not getattr(args, "valid_files", None):
        what = "SRC TGT, the validation pairs of the same languages" if pairs else (
            "FILE, a validation file of the same treebank")
        raise _usage_error(f"{where} --train needs --valid {what}")
    if not pairs:
        _check_treebank_name(args, where)
        return
    for index, side in enumerate(("source", "target")):
        dest = f"{side}_lang"
        if getattr(args, dest, None) is None:
            language = _language_of(args.train_files[0][index])
            if language is None:
                raise _usage_error(
                    f"{where} the {side} language of {args.train_files[0][index]} is not in its "
                    f"name (as in train.en.gz): give --{side}-lang CODE"
                )
            setattr(args, dest, language)
    if args.source_lang == args.target_lang:
        raise _usage_error(f"{where} the source and target languages are both "
                           f"{args.source_lang!r}: give --source-lang and --target-lang")


def _check_treebank_name(args, where):
    """A treebank's language and name: given, or read from its UD file name
    (``fr_gsd-ud-train.conllu``: ``fr``, ``GSD``)."""
    match = UD_FILE.match(os.path.basename(args.train_files[0]))
    if getattr(args, "language", None) is None:
        if match is None:
            raise _usage_error(f"{where} the language of {args.train_files[0]} is not in its "
                               "name (as in fr_gsd-ud-train.conllu): give --language CODE")
        args.language = match.group(1)
    if getattr(args, "treebank", None) is None:
        name = os.path.basename(args.train_files[0]).split(".")[0]
        args.treebank = match.group(2).upper() if match else name


def _check_distill_languages(args):
    """The corpus's source language, where its file names one, is the teacher's."""
    teacher = "en"  # a teacher from before languages were recorded: the bundled En-De's
    for name, key in (("languages.json", "source"), ("config.json", "source_lang")):
        try:
            with open(os.path.join(args.teacher, name), encoding="utf-8") as f:
                teacher = json.load(f)[key]
            break
        except (OSError, ValueError, KeyError, TypeError):
            continue  # zoo.tasks.load names a broken file once TensorFlow is up
    source = args.train_files[0][0]
    language = _language_of(source)
    if language is not None and language != teacher:
        raise _usage_error(f"zoo distill: error: the teacher translates from {teacher!r}, "
                           f"and {source} is named as {language!r}")  # fmt: skip


def _language_of(path):
    """The language code that ends a file's name, before .gz (``train.en.gz``: ``en``)."""
    name = os.path.basename(path)
    name = name[:-3] if name.endswith(".gz") else name
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    return suffix if LANGUAGE_SUFFIX.fullmatch(suffix) and suffix not in NOT_LANGUAGES else None


def _import_commands(quiet):
    """``zoo.cli``, which imports TensorFlow; with ``quiet``, without its C++ log lines."""
    if quiet:
        quiet_native_logs()
    from zoo import cli

    return cli


_QUIETED = []  # one entry once quiet_native_logs has redirected file descriptor 2


def quiet_native_logs():
    """Keep TensorFlow's and XLA's C++ log lines off the terminal for the rest of the process,
    while Python's ``sys.stderr`` still reaches it. Call it before importing TensorFlow. It
    steps aside where ``TF_CPP_MIN_LOG_LEVEL`` is 0 or 1, after an earlier call, and where
    TensorFlow is imported already. ``TF_CPP_MIN_LOG_LEVEL`` alone is not enough (CUDA probes
    log before it is read, and XLA's first compile logs whatever it says), so file descriptor 2
    goes to /dev/null and ``sys.stderr`` to a copy of the terminal's. Subprocesses inherit the
    /dev/null (pass them ``stderr=sys.stderr``), and a C++ abort's last words go with it
    (``zoo --debug`` keeps them).
    """
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    if _QUIETED or level in ("0", "1") or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = level or "3"
    _QUIETED.append(True)
    sys.stderr.flush()
    terminal = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    sys.stderr = open(
        terminal, "w", buffering=1, encoding=sys.stderr.encoding, errors=sys.stderr.errors
    )


def _unknown_flags(args, unknown):
    """A flag that this command does not take, and which task's it is, if any."""
    where = " ".join(filter(None, ["zoo", args.command, getattr(args, "task", None)]))
    name = unknown[0].split("=")[0]
    owners = sorted(
        task for task, row in TASKS.items()
        for key in ("train", "evaluate", "predict_flags", "export")
        if (key == args.command or (key == "predict_flags" and row["predict"] == args.command))
        and any(name in names for names, _ in row[key])
    )
    if name.startswith("-") and owners:
        listed = ", ".join(owners[:-1]) + " and " + owners[-1] if len(owners) > 1 else owners[0]
        return f"{where}: error: {name} applies to the {listed} only"
    return f"{where}: error: unrecognized arguments: {' '.join(unknown)} (see {where} --help)"


def _one_line(error):
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    # A traced TensorFlow function's error starts "in user code:" and ends with the reason.
    return lines[-1] if lines[0] == "in user code:" else lines[0]


if __name__ == "__main__":
    main()
