"""The commands of ``zoo train|evaluate|translate|tag|export|average|distill|bench``, over any task.

The arguments are parsed by the ``zoo_cli`` entry module (before TensorFlow is imported) from
its table of tasks; each command here is written once, for every task: it loads through
:func:`zoo.tasks.load` and calls the task's hooks. Nothing branches on a task's name.
"""

import dataclasses
import os
import subprocess
import sys

from zoo.artifacts import (
    CONFIG_FILE,
    EVAL_DIR,
    MODEL_FILE,
    describe_languages,
    read_languages,
)
from zoo.data import ParallelCorpus, batched, one_line
from zoo.tasks import get_task, load
from zoo.tasks.task import EvaluationFiles
from zoo.tasks.translation.distillation import distill
from zoo.training import train
from zoo.training.average import average_checkpoints

__all__ = ["run"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _options(args, dests):
    """The task flags that were given (unset ones are absent, so the task's defaults hold)."""
    return {dest: getattr(args, dest) for dest in dests if hasattr(args, dest)}


def _started_epochs(workdir):
    """The epochs a workdir's run was started with (None: no readable config there yet)."""
    import json

    try:
        with open(os.path.join(workdir, CONFIG_FILE)) as f:
            epochs = json.load(f).get("epochs")
    except (OSError, ValueError, AttributeError):
        return None  # no run yet; a corrupt config is named by train()'s config guard
    return epochs if isinstance(epochs, int) and epochs > 0 else None


DATA_OPTIONS = ("train_files", "valid_files", "vocabulary_file")  # zoo_cli's data flags
EVALUATION_OPTIONS = ("source", "reference", "gold")  # zoo evaluate's files, not the splits
INPUT_FILE_OPTIONS = ("input_file",)  # a predict verb's file (zoo tag --conllu): predict_file


def cmd_train(args):
    task = get_task(args.task)
    options = _options(args, args.task_options)
    fields = {field.name for field in dataclasses.fields(task.config_class)}
    overrides = {name: value for name, value in options.items() if name in fields}
    started = None if "epochs" in overrides else _started_epochs(args.workdir)
    if started:
        # Resumed without --epochs: train to the epochs the run was started with, not to the
        # preset's (a run started with --epochs 80 would otherwise stop at the preset's 40).
        overrides["epochs"] = started
    task_options = {name: value for name, value in options.items() if name not in fields}
    data = {name: task_options.pop(name, None) for name in DATA_OPTIONS}
    config = task.get_config(args.preset, **overrides)
    train(
        task,
        config,
        args.workdir,
        # Scanned now (line counts, UTF-8, checksums): a bad file is named before training.
        train_data=task.training_data(config, data["train_files"]),
        validation_data=task.validation_data(config, data["valid_files"]),
        vocabulary_file=data["vocabulary_file"],
        strategy=args.strategy,
        jit_compile=args.xla,
        mixed_precision=args.mixed_precision,
        time_limit=args.time_limit * 60 if args.time_limit else None,
        # A progress bar in a log file is one endless line: one line per epoch there instead.
        verbose="auto" if sys.stdout.isatty() else 2,
        keep_checkpoints=args.keep_checkpoints,
        backup_every=args.backup_every,
        init_from=args.init_from,
        **task_options,
    )
    print(f"model saved to {os.path.join(args.workdir, MODEL_FILE)}")


def _say_languages(folder):
    """Print a model's languages on stderr, where a folder records them."""
    languages = read_languages(folder)
    if languages:
        print(f"{folder}: {describe_languages(languages)}", file=sys.stderr)


def cmd_evaluate(args):
    task, model, vocabulary = load(args.workdir, args.task)
    _say_languages(args.workdir)
    output_dir = args.output_dir or os.path.join(args.workdir, EVAL_DIR)
    splits = args.splits or task.evaluation_splits
    if getattr(args, "source", None):
        languages = read_languages(args.workdir) or {}
        splits = [EvaluationFiles(args.source, tuple(args.reference), languages.get("target"))]
    elif getattr(args, "gold", None):  # a tagged file: the words to tag and their gold tags
        splits = [EvaluationFiles(args.gold, (args.gold,))]
    else:  # the bundled splits score a model of their own languages only
        recorded, bundled = read_languages(args.workdir), task.languages(task.config_class())
        if recorded and bundled and recorded != bundled:
            raise ValueError(
                f"{args.workdir} is a {describe_languages(recorded)} model and the bundled "
                f"splits are {describe_languages(bundled)}: name the file(s) to score (zoo "
                f"evaluate {task.name} --help)"
            )
    options = {name: value for name, value in _options(args, args.task_options).items()
               if name not in EVALUATION_OPTIONS}  # fmt: skip
    for split in splits:
        lines = task.evaluate(model, vocabulary, split, output_dir, verbose=True, **options)
        for line in lines:
            print(line, flush=True)


def _predict(args):
    # zoo_cli has refused a model of a task this verb does not serve (before TensorFlow).
    task, model, vocabulary = load(args.workdir)
    _say_languages(args.workdir)
    given = _options(args, {dest for dests in args.predict_options.values() for dest in dests})
    unknown = sorted(set(given) - set(args.predict_options[task.name]))
    if unknown:
        flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
        raise ValueError(f"{flags}: not an option of the {task.name} in {args.workdir}")
    path = given.pop(INPUT_FILE_OPTIONS[0], None)
    if path is not None:  # a file in the task's own format, written back with the predictions
        if args.sentences:
            raise ValueError("give sentences or an input file, not both")
        source = sys.stdin.buffer if path == "-" else path
        task.predict_file(model, vocabulary, source, sys.stdout.buffer, verbose=True, **given)
        return
    done = 0
    for window in _windows(args.sentences):
        for line in task.predict(model, vocabulary, window, verbose=len(window) > 1, **given):
            print(one_line(line))  # one output line per input line, whatever the model emits
        sys.stdout.flush()
        done += len(window)
        if len(window) == WINDOW:  # more may follow: say how far it is
            print(f"{done} lines done", file=sys.stderr, flush=True)


WINDOW = 10_000  # stdin lines predicted together: bounded memory, sorted by length within


def _windows(sentences):
    """The arguments, or stdin in windows of :data:`WINDOW` lines (a file of any length)."""
    if sentences:
        yield sentences
        return
    if sys.stdin.isatty():
        print("reading sentences from stdin, one per line (Ctrl-D ends)", file=sys.stderr)
    yield from batched((line.rstrip("\n") for line in sys.stdin), WINDOW)


def cmd_export(args):
    task, model, vocabulary = load(args.workdir, args.task)
    languages = read_languages(args.workdir)  # a task without them takes no such argument
    task.export(model, vocabulary, args.output, verbose=True,
                **({"languages": languages} if languages else {}),
                **_options(args, args.task_options))
    print(f"exported to {args.output}")


def cmd_average(args):
    _, paths = average_checkpoints(args.workdir, args.last)
    names = ", ".join(os.path.basename(path) for path in paths)
    print(f"averaged {names} into {os.path.join(args.workdir, MODEL_FILE)}")


def cmd_distill(args):
    options = _options(args, args.distill_options)
    corpora = options.pop("train_files", None)
    corpus = ParallelCorpus(corpora, flag="--train") if corpora else None
    manifest = distill(args.teacher, args.workdir, corpus=corpus, verbose=True, **options)
    files = " and ".join(manifest["files"][side] for side in ("source", "target"))
    print(f"{manifest['sentences']} distilled pairs in {args.workdir} ({files})")


def cmd_bench(args):
    script = os.path.join(ROOT, "benchmarks", f"{args.name}.py")
    if not os.path.exists(script):
        names = sorted(
            name[:-3] for name in os.listdir(os.path.join(ROOT, "benchmarks"))
            if name.endswith(".py")
        )
        raise FileNotFoundError(f"no benchmark {args.name!r}; choose from {names}")
    # stderr: the terminal's, not the /dev/null that a quiet start gives C++ (zoo_cli).
    raise SystemExit(subprocess.call([sys.executable, script, *args.rest], stderr=sys.stderr))


COMMANDS = {
    "train": cmd_train,
    "evaluate": cmd_evaluate,
    "export": cmd_export,
    "average": cmd_average,
    "distill": cmd_distill,
    "bench": cmd_bench,
}


def run(args):
    """Run the command of parsed ``args`` (from ``zoo_cli.build_parser``)."""
    if args.seed is not None:
        import keras

        keras.utils.set_random_seed(args.seed)
    # Every other command is a task's predict verb (`zoo translate`, `zoo tag`: zoo_cli's table).
    COMMANDS.get(args.command, _predict)(args)
