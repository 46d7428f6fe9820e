"""The ``zoo`` command: its arguments, parsed before anything heavy is imported.

This module stands outside the ``zoo`` package on purpose: ``import zoo`` registers the layers
with Keras, which imports TensorFlow (seconds), and ``zoo --help`` or a wrong argument must not
wait for that. It holds the table of tasks (what each command takes for each task) and the
error handling; the commands themselves are in :mod:`zoo.cli`.

Every error a user can cause ends in one line on stderr that names the problem, and exit status
2; ``--debug`` shows the traceback instead.
"""

import argparse
import json
import math
import os
import re
import sys
import zipfile

__all__ = ["TASKS", "CommandLineError", "main"]

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


MIXED_PRECISION = ("bfloat16", "float16")  # zoo.training.train.MIXED_POLICIES (no TF import here)
MODEL_FILE = "model.keras"  # zoo.artifacts.MODEL_FILE (no TF import here)
BACKUP_EVERY = 200  # zoo.training.train.BACKUP_EVERY (no TF import here)


class CommandLineError(SystemExit):
    """Exit with ``status`` after a one-line ``message`` (already printed on stderr)."""

    def __init__(self, message, status=2):
        super().__init__(status)
        self.message = message

    def __str__(self):
        return self.message


# ---------------------------------------------------------------- argument types
def _number(kind, minimum, text):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):  # nan passes every comparison below, and inf is no setting
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text} is less than {minimum}")
    return value


def positive_int(text):
    return _number(int, 1, text)


def count(text):
    return _number(int, 0, text)


def non_negative_float(text):
    return _number(float, 0, text)


def positive_float(text):
    value = _number(float, 0, text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text} is not more than 0")
    return value


def fraction(text):
    value = _number(float, 0, text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} is not less than 1")
    return value


def minutes(text):
    value = _number(float, 0, text)
    if value == 0:
        raise argparse.ArgumentTypeError("a time limit must be more than 0 minutes")
    return value


def flag(*names, **options):
    """One task flag: ``argparse.add_argument``'s arguments. Unset flags stay unset, so the
    task's own defaults (and the preset's values) apply."""
    return names, {"default": argparse.SUPPRESS, **options}


# ---------------------------------------------------------------- the table of tasks
# What each command takes for each task. A new task is a new row (tests/test_cli.py checks the
# presets and splits against zoo.tasks). Train flags named like a config field override the
# preset; the other flags are the task's options (of train(), evaluate(), predict()).
EPOCHS = flag("--epochs", type=positive_int,
              help="training epochs (default: the preset's; on a resume, the run's)")
BATCH_TOKENS = flag("--batch-tokens", type=positive_int, help="the token budget of a batch")
ACCUMULATE = flag("--gradient-accumulation-steps", type=positive_int, metavar="N",
                  help="update with the mean gradient of N batches (a device too small for "
                  "--batch-tokens; default 1)")
MAX_LENGTH = flag("--max-length", type=positive_int, help="the longest sequence, in tokens")
BEAM_SIZE = flag("--beam-size", type=positive_int, help="beams of --method beam")
ALPHA = flag("--alpha", type=non_negative_float,
             help="the length penalty of beam search, GNMT's exponent (default 0.6)")
VOCAB_SIZE = flag("--vocab-size", type=positive_int, help="SentencePiece pieces")
ITERATIONS = flag("--iterations", type=positive_int,
                  help="Mask-Predict iterations (default 4, 1 for a copy model; 1: one pass)")
LENGTH_BEAM = flag("--length-beam", type=positive_int,
                   help="candidate lengths per sentence (default 3, 1 for a max-length model)")
BLEU_SAMPLE = flag("--bleu-sample", dest="bleu_sample_size", type=count,
                   help="validation pairs decoded for BLEU after each epoch (default 200; 0: off)")
RESCORE_WITH = flag("--rescore-with", metavar="DIR",
                    help="a translator (workdir or export) of the same vocabulary that picks "
                    "among the length candidates")
# The training levers of a small corpus; each overrides the preset's field.
DROPOUT = flag("--dropout", type=fraction, help="residual dropout (default: the preset's)")
ATTENTION_DROPOUT = flag("--attention-dropout", type=fraction,
                         help="dropout on the attention weights (default: the preset's)")
ACTIVATION_DROPOUT = flag("--activation-dropout", type=fraction,
                          help="dropout on the feed-forward activations (default: the preset's)")
LEARNING_RATE = flag("--learning-rate", type=positive_float,
                     help="the peak learning rate (default: the preset's)")
WARMUP_STEPS = flag("--warmup-steps", type=positive_int,
                    help="steps of linear warm-up to the peak (default: the preset's)")
LABEL_SMOOTHING = flag("--label-smoothing", type=fraction,
                       help="label smoothing of the cross entropy (default: the preset's)")
REGULARIZATION = (DROPOUT, ATTENTION_DROPOUT, ACTIVATION_DROPOUT, LEARNING_RATE, WARMUP_STEPS,
                  LABEL_SMOOTHING)
CROSS_ATTENTION_SCORE = flag("--cross-attention-score",
                             choices=("scaled_dot", "dot", "cosine", "additive"),
                             help="the score function of cross attention (default scaled_dot)")
CROSS_ATTENTION = flag("--cross-attention", choices=("mha", "location_aware", "monotonic"),
                       help="the decoder's cross attention: plain, location-aware (it sees "
                       "where it has attended) or monotonic (it never goes back); default mha")


def encoder_layers(text):
    """``last``, ``mix``, or comma-separated encoder-layer indices, one per decoder block."""
    if text in ("last", "mix"):
        return text
    try:
        return tuple(int(index) for index in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected last, mix or comma-separated layer indices such as 0,2,4, got {text!r}"
        ) from None


CROSS_ATTENTION_LAYERS = flag("--cross-attention-layers", type=encoder_layers,
                              metavar="last|mix|I,J,...",
                              help="the encoder layer each decoder block reads: the last, a "
                              "learned mix, or one index per block (0: the embeddings)")
SCHEDULED_SAMPLING = flag("--scheduled-sampling",
                          choices=("none", "linear", "exponential", "inverse_sigmoid"),
                          help="two-pass scheduled sampling with this decay (default none)")
SCHEDULED_SAMPLING_K = flag("--scheduled-sampling-k", type=non_negative_float, metavar="K",
                            help="the decay's k (default: the schedule's own; exponential: "
                            "0 < K <= 1, inverse_sigmoid: K >= 1)")
GUIDED_ATTENTION = flag("--guided-attention", dest="guided_attention_weight", type=float,
                        metavar="WEIGHT",
                        help="the weight of the loss that pulls cross attention toward the "
                        "diagonal (default 0: off)")
COPY_MECHANISM = flag("--copy-mechanism", action="store_true",
                      help="a pointer-generator that copies source pieces into the output")
SERVING_VERSION = flag("--serving-version", dest="version", type=positive_int, metavar="N",
                       help="write the SavedModel to serving/N/, TF Serving's version folder "
                       "(default 1)")
WARMUP_XLA = flag("--warmup-xla", action="store_true",
                  help="the warm-up file also compiles every program of the _xla signatures, for "
                  "a server started with --xla_cpu_compilation_enabled=true (it then fails to "
                  "load on one without)")


class CorpusFlag(argparse.Action):
    """``--train SRC TGT [WEIGHT]`` and ``--valid SRC TGT``, repeatable: each a corpus of two
    line-aligned files (paths or quoted globs of shards, plain or gzipped)."""

    def __call__(self, parser, namespace, values, option_string=None):
        weighted = option_string == "--train"
        if len(values) not in ((2, 3) if weighted else (2,)):
            shape = "SRC TGT [WEIGHT]" if weighted else "SRC TGT"
            raise argparse.ArgumentError(
                self, f"takes {shape}, got {len(values)} value(s): {' '.join(values)[:200]} "
                "(quote a glob, so that the shell does not expand it: 'train.*.en.gz')"
            )
        corpus = list(values[:2])
        if len(values) == 3:
            if not (_is_number(values[2]) and float(values[2]) > 0):
                raise argparse.ArgumentError(self, f"the weight {values[2]!r} is not a number "
                                             "above 0")  # fmt: skip
            corpus.append(float(values[2]))
        given = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*(given if isinstance(given, list) else []), corpus])


def _is_number(text):
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


TRAIN_FILES = flag("--train", dest="train_files", nargs="+", action=CorpusFlag,
                   metavar="SRC TGT [WEIGHT]",
                   help="a parallel corpus: two line-aligned files (or quoted globs of shards; "
                   "plain or gzipped), with a sampling weight if several are mixed; repeat for "
                   "several corpora (default: the bundled Multi30k En-De); needs --valid")
VALID_FILES = flag("--valid", dest="valid_files", nargs="+", action=CorpusFlag,
                   metavar="SRC TGT", help="the validation pairs' two files")
SOURCE_LANG = flag("--source-lang", type=str, metavar="CODE",
                   help="the source language (default: the --train file's suffix, train.en)")
TARGET_LANG = flag("--target-lang", type=str, metavar="CODE",
                   help="the target language (default: the --train file's suffix)")
SHUFFLE_BUFFER = flag("--shuffle-buffer", type=positive_int, metavar="PAIRS",
                      help="pairs shuffled together (default 100000)")
LONG_PAIRS = flag("--long-pairs", choices=("skip", "truncate"),
                  help="training pairs over --max-length: skipped and counted (default), or "
                  "truncated (a cut target teaches the model to stop mid-sentence)")
VOCAB_SAMPLE = flag("--vocab-sample-size", type=positive_int, metavar="N",
                    help="learn the vocabulary from a random sample of at most N sentences "
                    "(default 1000000)")
SENTENCEPIECE_MODEL = flag("--sentencepiece-model", dest="vocabulary_file", metavar="FILE",
                           help="use this SentencePiece model as the vocabulary (its size "
                           "sets --vocab-size); a `zoo distill` folder's is its teacher's")
EVALUATION_FILES = (
    flag("--source", metavar="FILE", help="translate this file (plain or gzipped) and score it "
         "against --reference with BLEU and chrF, instead of the bundled splits"),
    flag("--reference", metavar="FILE", action="append",
         help="the reference translations of --source, line by line; repeat for several"),
)
DATA = (TRAIN_FILES, VALID_FILES, SOURCE_LANG, TARGET_LANG, SHUFFLE_BUFFER, LONG_PAIRS,
        VOCAB_SAMPLE, SENTENCEPIECE_MODEL)

# A tagger's treebank: CoNLL-U files, and what its UD file name says unless given.
TREEBANK_DATA = (
    flag("--train", dest="train_files", action="append", metavar="FILE",
         help="a CoNLL-U training file (or a quoted glob; plain or gzipped); repeat for several "
         "(default: the bundled UD English-EWT); needs --valid"),
    flag("--valid", dest="valid_files", action="append", metavar="FILE",
         help="a CoNLL-U validation file; repeat for several"),
    flag("--language", type=str, metavar="CODE",
         help="the treebank's language (default: its UD file name's, fr_gsd-ud-train.conllu)"),
    flag("--treebank", type=str, metavar="NAME",
         help="the treebank's name (default: its UD file name's, GSD)"),
)

TRANSLATE_HELP = "translate sentences (arguments, or stdin one per line)"
# One row per task of zoo.tasks.TASKS (tests/test_cli_table.py keeps them in step): a new task
# adds its row here and nothing else outside its own files.
TASKS = {
    "translator": {
        "help": "the autoregressive translator (your corpus; Multi30k En->De bundled)",
        "presets": ("tiny", "demo", "small", "deep_shallow", "base"),
        "splits": ("train", "val", "test2016"),
        "predict": "translate",
        "predict_help": TRANSLATE_HELP,
        "train": (
            EPOCHS, BATCH_TOKENS, ACCUMULATE, MAX_LENGTH, VOCAB_SIZE, *DATA, BLEU_SAMPLE,
            *REGULARIZATION,
            CROSS_ATTENTION_SCORE, CROSS_ATTENTION, CROSS_ATTENTION_LAYERS, SCHEDULED_SAMPLING,
            SCHEDULED_SAMPLING_K, GUIDED_ATTENTION, COPY_MECHANISM,
        ),
        "evaluate": (
            flag("--method", choices=("beam", "greedy"), help="search (default beam)"),
            flag("--beam-size", type=positive_int, help="beams (default 5)"),
            ALPHA, *EVALUATION_FILES,
        ),
        "predict_flags": (
            flag("--method", choices=("beam", "greedy", "sample"), help="search (default beam)"),
            flag("--beam-size", type=positive_int, help="beams (default 4)"),
            ALPHA,
        ),
        "export": (SERVING_VERSION, ALPHA, WARMUP_XLA),
    },
    "tagger": {
        "help": "the UD tagger: UPOS, and XPOS, FEATS, lemmas (your UD treebank; UD "
        "English-EWT bundled)",
        "presets": ("tiny", "small"),
        "splits": ("train", "dev", "test"),
        "predict": "tag",
        "predict_help": "tag whitespace-tokenized sentences (arguments, or stdin one per line), "
        "or a CoNLL-U file (--conllu)",
        "train": (
            EPOCHS, BATCH_TOKENS, ACCUMULATE, MAX_LENGTH,
            flag("--xpos", dest="num_xpos_tags", action="store_const", const=1,
                 help="add an XPOS head"),
            flag("--feats", dest="num_feats_tags", action="store_const", const=1,
                 help="add a FEATS head (each bundle one class)"),
            flag("--lemmas", dest="num_lemma_scripts", action="store_const", const=1,
                 help="add a lemma head (edit scripts from form to lemma)"),
            *TREEBANK_DATA,
        ),
        "evaluate": (
            flag("--gold", metavar="FILE", help="tag this CoNLL-U file's words (plain or "
                 "gzipped) and score them with the CoNLL 2018 shared task's figures, instead "
                 "of the bundled splits"),
        ),
        "predict_flags": (
            flag("--conllu", dest="input_file", metavar="FILE",
                 help="tag this CoNLL-U file ('-': stdin; plain or gzipped) and write it to "
                 "stdout with the predicted columns filled, every other byte as it was"),
        ),
        "export": (SERVING_VERSION,),
    },
    "nat": {
        "help": "the non-autoregressive translator (your corpus; Multi30k En->De bundled; CMLM "
        "and Mask-Predict, or CTC)",
        "presets": ("tiny", "small"),
        "splits": ("train", "val", "test2016"),
        "predict": "translate",
        "predict_help": TRANSLATE_HELP,
        "train": (
            EPOCHS, BATCH_TOKENS, ACCUMULATE, MAX_LENGTH, VOCAB_SIZE, *DATA, BLEU_SAMPLE,
            *REGULARIZATION,
            CROSS_ATTENTION_SCORE,
            flag("--decoder-input", choices=("mask", "copy"),
                 help="mask tokens (CMLM) or a uniform copy of the source (default mask)"),
            flag("--length-mode", choices=("predict", "max"),
                 help="predicted lengths, or the widest cut at the first EOS (default predict)"),
            flag("--decoder", choices=("cmlm", "ctc"),
                 help="a CMLM refined by Mask-Predict, or a CTC decoder over the upsampled "
                 "source, decoded in one pass (default cmlm)"),
            flag("--ctc-upsample", type=positive_int,
                 help="the CTC decoder's upsampling of the source (default 2)"),
            flag("--glancing-ratio", type=fraction, metavar="R",
                 help="glancing training (GLAT) with this ratio of the first pass's errors "
                 "revealed (0: off, the default)"),
            flag("--glancing-ratio-end", type=fraction, metavar="R",
                 help="anneal the glancing ratio linearly to R over --glancing-anneal-steps"),
            flag("--glancing-anneal-steps", type=positive_int, metavar="N",
                 help="steps of the glancing ratio's anneal (default 4000)"),
        ),
        "evaluate": (ITERATIONS, LENGTH_BEAM, RESCORE_WITH, *EVALUATION_FILES),
        "predict_flags": (ITERATIONS, LENGTH_BEAM, RESCORE_WITH),
        "export": (SERVING_VERSION, WARMUP_XLA),
    },
    "transliterator": {
        "help": "the translator on a rule-made monotonic character task (long inputs too)",
        "presets": ("tiny", "small"),
        "splits": ("train", "val", "test", "long"),
        "predict": "transliterate",
        "predict_help": "transliterate lower-case phrases (arguments, or stdin one per line)",
        "train": (
            EPOCHS, BATCH_TOKENS, ACCUMULATE,
            flag("--bleu-sample", dest="bleu_sample_size", type=count,
                 help="validation pairs decoded for val_exact (outputs entirely right) after "
                 "each epoch (default 200; 0: off)"),
            *REGULARIZATION, CROSS_ATTENTION, GUIDED_ATTENTION,
        ),
        "evaluate": (
            flag("--method", choices=("greedy", "beam"), help="search (default greedy)"),
            flag("--beam-size", type=positive_int, help="beams (default 4)"),
        ),
        "predict_flags": (
            flag("--method", choices=("greedy", "beam"), help="search (default greedy)"),
            flag("--beam-size", type=positive_int, help="beams (default 4)"),
        ),
        "export": (SERVING_VERSION, WARMUP_XLA),
    },
}


def predict_verbs():
    """The predict verbs (``zoo translate``, ``zoo tag``) and their help, from the rows."""
    return {row["predict"]: row["predict_help"] for row in TASKS.values()}


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
        sub.add_argument("--strategy", default="auto", choices=STRATEGIES)
        sub.add_argument("--xla", action="store_true", help="compile the train step with XLA")
        sub.add_argument("--mixed-precision", nargs="?", const="bfloat16", default=None,
                         choices=MIXED_PRECISION,
                         help="compute in bfloat16 (the default; CPUs, TPUs, recent GPUs) or "
                         "float16 (with loss scaling; older GPUs); the weights stay float32")
        sub.add_argument("--time-limit", type=minutes, help="stop after this many minutes")
        sub.add_argument("--keep-checkpoints", type=positive_int, default=5,
                         help="keep the weights of this many last epochs, for zoo average")
        sub.add_argument("--init-from", metavar="DIR",
                         help="start a new run from the weights of the trained model in DIR "
                         "(any task), layer by layer where names and shapes match, and with "
                         "its vocabulary; a resumed run starts from its backup")
        sub.add_argument("--backup-every", type=positive_int, default=BACKUP_EVERY, metavar="N",
                         help="back up the training state every N steps too (a killed run "
                         f"resumes there; default {BACKUP_EVERY})")
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
    for verb, help_text in predict_verbs().items():
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
    average.add_argument("--last", type=positive_int, required=True, help="epochs to average")

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
        flag("--train", dest="train_files", nargs="+", action=CorpusFlag, metavar="SRC TGT",
             help="the corpus whose sources the teacher translates (its targets are not read; "
             "repeat for several corpora, in order)"),
        flag("--beam-size", type=positive_int, help="the teacher's beams (default 5)"),
        flag("--batch-size", type=positive_int, help="sentences translated together (default 64)"),
        flag("--limit", type=positive_int, help="only the first N training pairs (quick runs)"),
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
    archive's config.json). These errors then come back at once; ``zoo.tasks.load`` checks
    the same (and the rest) for library callers."""
    if args.command == "distill":
        folder, expected = args.teacher, ["translator"]
        other = "{folder} holds a {task}, not a translator"
    elif args.command in ("evaluate", "export"):
        folder, expected = args.workdir, [args.task]
        other = "{folder} holds a {task}, not a " + args.task
    elif args.command in predict_verbs():
        folder, expected = args.workdir, sorted(args.predict_options)
        other = "{folder} holds a {task}: use `zoo {verb}`, not `zoo " + args.command + "`"
    elif args.command == "train" and args.init_from:
        folder, expected, other = args.init_from, list(TASKS), ""  # a model of any task
    else:
        return
    where = f"zoo {args.command}: error:" + (" --init-from" if args.command == "train" else "")
    if not os.path.isdir(folder):
        raise _usage_error(f"{where} {folder}: no such folder")
    path = os.path.join(folder, MODEL_FILE)
    if not os.path.exists(path):
        trainer = f"zoo train {expected[0]}" if len(expected) == 1 else "zoo train"
        raise _usage_error(f"{where} no trained model at {path}: run `{trainer}` first")
    try:
        with zipfile.ZipFile(path) as archive:
            task = json.loads(archive.read("config.json"))["config"]["name"]
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as error:
        raise _usage_error(
            f"{where} {path} is not a readable .keras model ({_one_line(error)}); it may be "
            "truncated: train or export it again"
        ) from None
    if task in TASKS and task not in expected:
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
    while Python's ``sys.stderr`` (progress, warnings, errors) still reaches it. Call it before
    importing TensorFlow. It steps aside where the user asked to see those logs
    (``TF_CPP_MIN_LOG_LEVEL`` at 0 or 1; ``zoo --debug`` does not call it), where an earlier call
    quieted them, and where TensorFlow is imported already (too late: a test's process).

    ``TF_CPP_MIN_LOG_LEVEL`` alone does not do it, at 3 either: the CUDA probes of TensorFlow's
    shared libraries write through absl before the setting is read, and TensorFlow 2.20 logs
    XLA's first compile whatever it says. So file descriptor 2, where C++ writes, goes to
    /dev/null, and ``sys.stderr`` writes to a copy of the terminal's. Subprocesses inherit the
    /dev/null: pass them ``stderr=sys.stderr``. A C++ abort's last words go with it (``zoo
    --debug`` keeps them).
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
