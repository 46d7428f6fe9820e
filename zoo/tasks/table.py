"""The table of tasks: what each command of ``zoo`` takes for each task, written once.

``zoo_cli.py`` parses its arguments from it before TensorFlow is imported (``import zoo`` does
import it), and :mod:`zoo.tasks` reads each task's presets, splits and predict verb from it. So
it uses the standard library only, like :mod:`zoo.artifacts` and :mod:`zoo.training.options`,
and the command loads these files by their paths without running the package's ``__init__``.
"""

import argparse
import math


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
# What each command takes for each task. Train flags named like a config field override the
# preset, and the config checks their values (so no list of a model's choices is copied here);
# the other flags are the task's options (of train(), evaluate(), predict()).
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
CROSS_ATTENTION_SCORE = flag("--cross-attention-score", metavar="NAME",
                             help="the score function of cross attention (default scaled_dot)")
CROSS_ATTENTION = flag("--cross-attention", metavar="NAME",
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
SCHEDULED_SAMPLING = flag("--scheduled-sampling", metavar="DECAY",
                          help="two-pass scheduled sampling with this decay: linear, "
                          "exponential or inverse_sigmoid (default none)")
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
LONG_PAIRS = flag("--long-pairs", metavar="skip|truncate",
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
# One row per task: a new task adds its row here, and its Task (zoo.tasks) reads its presets,
# splits and predict verb from it.
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
            flag("--decoder-input", metavar="mask|copy",
                 help="mask tokens (CMLM) or a uniform copy of the source (default mask)"),
            flag("--length-mode", metavar="predict|max",
                 help="predicted lengths, or the widest cut at the first EOS (default predict)"),
            flag("--decoder", metavar="cmlm|ctc",
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

