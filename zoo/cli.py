"""`zoo train|evaluate|translate|tag|export|bench ...`: argument parsing only; the work is in zoo.*."""

import argparse
import os
import subprocess
import sys

from zoo.training.strategy import STRATEGIES

MODELS = ("translator", "tagger")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _overrides(args):
    """Config fields given on the command line (those left unset keep the preset's value)."""
    fields = ("epochs", "vocab_size", "batch_tokens", "max_length")
    return {f: getattr(args, f) for f in fields if getattr(args, f, None) is not None}


def _training_options(args):
    return dict(
        strategy=args.strategy,
        jit_compile=args.xla,
        mixed_precision=args.mixed_precision,
        time_limit=args.time_limit * 60 if args.time_limit else None,
        # A progress bar in a log file is one endless line: one line per epoch there instead.
        verbose="auto" if sys.stdout.isatty() else 2,
    )


def cmd_train(args):
    if args.model == "tagger":
        from zoo.models.tagger import get_config
        from zoo.training.train_tagger import train_tagger

        overrides = _overrides(args)
        if args.xpos:
            overrides["num_xpos_tags"] = 1  # any nonzero count: the vocabulary sets the real one
        train_tagger(get_config(args.preset, **overrides), args.workdir, **_training_options(args))
    else:
        from zoo.models.translator import get_config
        from zoo.training import train

        config = get_config(args.preset, **_overrides(args))
        train(config, args.workdir, bleu_sample_size=args.bleu_sample, **_training_options(args))
    print(f"model saved to {os.path.join(args.workdir, 'model.keras')}")


def _load_tagger(workdir):
    import keras

    import zoo  # noqa: F401  (registers the layers)
    from zoo.models import TaggerVocabulary
    from zoo.training.train_tagger import VOCABULARY_FILE

    model_path = os.path.join(workdir, "model.keras")
    if not os.path.exists(model_path):
        raise SystemExit(f"no trained model at {model_path}: run `zoo train tagger` first")
    return keras.models.load_model(model_path), TaggerVocabulary.load(
        os.path.join(workdir, VOCABULARY_FILE)
    )


def _load(workdir):
    import keras

    import zoo  # noqa: F401  (registers the layers)
    from zoo.data import SentencePieceTokenizer
    from zoo.training.train import VOCAB_PREFIX

    model_path = os.path.join(workdir, "model.keras")
    if not os.path.exists(model_path):
        raise SystemExit(f"no trained model at {model_path}: run `zoo train` first")
    model = keras.models.load_model(model_path)
    tokenizer = SentencePieceTokenizer(os.path.join(workdir, VOCAB_PREFIX + ".model"))
    return model, tokenizer


def cmd_evaluate(args):
    if args.model == "tagger":
        return _evaluate_tagger(args)
    from zoo.evaluation.translation import evaluate_translator

    model, tokenizer = _load(args.workdir)
    output_dir = args.output_dir or os.path.join(args.workdir, "eval")
    for split in args.splits or ["val", "test2016"]:
        scores = evaluate_translator(
            model, tokenizer, split, output_dir, method=args.method, beam_size=args.beam_size
        )
        print(
            f"{split}: BLEU {scores['bleu']:.2f} ({scores['bleu_signature']}), "
            f"lowercased BLEU {scores['bleu_lowercase']:.2f} ({scores['bleu_lowercase_signature']}); "
            f"hypotheses in {output_dir}"
        )


def _evaluate_tagger(args):
    from zoo.evaluation.tagging import evaluate_tagger

    model, vocabulary = _load_tagger(args.workdir)
    output_dir = args.output_dir or os.path.join(args.workdir, "eval")
    for split in args.splits or ["dev", "test"]:
        report = evaluate_tagger(model, vocabulary, split, output_dir)
        for head in ("upos", "xpos"):
            if head in report:
                scores = report[head]
                print(
                    f"{split} {head.upper()}: accuracy {scores['accuracy']:.2f} "
                    f"({scores['tokens']} words), OOV accuracy {scores['oov_accuracy']:.2f} "
                    f"({scores['oov_tokens']} OOV words)"
                )
    print(f"scores and tags in {output_dir}")


def cmd_tag(args):
    from zoo.decoding import tag_sentences

    model, vocabulary = _load_tagger(args.workdir)
    lines = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    sentences = [line.split() for line in lines]
    for words, tags in zip(sentences, tag_sentences(model, vocabulary, sentences)):
        print(" ".join(f"{word}/{tag}" for word, tag in zip(words, tags)))


def cmd_translate(args):
    from zoo.decoding import translate

    model, tokenizer = _load(args.workdir)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    for line in translate(model, tokenizer, sentences, method=args.method, beam_size=args.beam_size):
        print(line)


def cmd_export(args):
    if args.model == "tagger":
        from zoo.export import export_tagger

        model, vocabulary = _load_tagger(args.workdir)
        export_tagger(model, vocabulary, args.output)
    else:
        from zoo.export import export_translator

        model, tokenizer = _load(args.workdir)
        export_translator(model, tokenizer, args.output)
    print(f"exported to {args.output}")


def cmd_bench(args):
    script = os.path.join(ROOT, "benchmarks", f"{args.name}.py")
    if not os.path.exists(script):
        raise SystemExit(f"no benchmark {script}")
    raise SystemExit(subprocess.call([sys.executable, script, *args.rest]))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="zoo", description="The zoo transformer model zoo.")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a model")
    train.add_argument("model", choices=MODELS)
    train.add_argument("--preset", default="small", help="tiny, small (or base: translator)")
    train.add_argument("--workdir", required=True)
    train.add_argument("--strategy", default="auto", choices=STRATEGIES)
    train.add_argument("--xla", action="store_true", help="compile the train step with XLA")
    train.add_argument("--mixed-precision", action="store_true", help="mixed_bfloat16")
    train.add_argument("--time-limit", type=float, help="stop after this many minutes")
    train.add_argument("--bleu-sample", type=int, default=200,
                       help="validation pairs decoded for BLEU after each epoch (0: off)")
    train.add_argument("--epochs", type=int)
    train.add_argument("--vocab-size", type=int)
    train.add_argument("--batch-tokens", type=int)
    train.add_argument("--max-length", type=int)
    train.add_argument("--xpos", action="store_true", help="tagger: add an XPOS head")
    train.set_defaults(func=cmd_train)

    evaluate = commands.add_parser(
        "evaluate", help="translator: sacreBLEU on val and test2016; tagger: accuracy on dev and test"
    )
    evaluate.add_argument("model", choices=MODELS)
    evaluate.add_argument("--workdir", required=True)
    evaluate.add_argument("--splits", nargs="+", help="default: val test2016, or dev test")
    evaluate.add_argument("--method", default="beam", choices=["beam", "greedy"])
    evaluate.add_argument("--beam-size", type=int, default=5)
    evaluate.add_argument("--output-dir")
    evaluate.set_defaults(func=cmd_evaluate)

    translate = commands.add_parser("translate", help="translate sentences (arguments or stdin)")
    translate.add_argument("sentences", nargs="*")
    translate.add_argument("--workdir", required=True)
    translate.add_argument("--method", default="beam", choices=["beam", "greedy", "sample"])
    translate.add_argument("--beam-size", type=int, default=4)
    translate.set_defaults(func=cmd_translate)

    tag = commands.add_parser("tag", help="tag whitespace-tokenized sentences (arguments or stdin)")
    tag.add_argument("sentences", nargs="*")
    tag.add_argument("--workdir", required=True)
    tag.set_defaults(func=cmd_tag)

    export = commands.add_parser("export", help="export .keras and a serving SavedModel")
    export.add_argument("model", choices=MODELS)
    export.add_argument("--workdir", required=True)
    export.add_argument("--output", required=True)
    export.set_defaults(func=cmd_export)

    bench = commands.add_parser("bench", help="run benchmarks/NAME.py")
    bench.add_argument("name")
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
