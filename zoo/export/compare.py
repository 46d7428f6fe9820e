"""Print the translations of exported translators side by side.

Usage: ``python -m zoo.export.compare DIR [DIR ...] [--greedy | --beam-size K] [-- SENTENCE ...]``.
Each ``DIR`` is an export folder (its highest ``serving/`` version) or a SavedModel folder;
without sentences, a few Multi30k-style English ones are translated. A folder that cannot be
loaded gets a line on stderr and the others still print. Exit status: 0 when a model translated,
1 when none loaded, 2 for a usage error. Imports only TensorFlow and tensorflow_text, so it also
runs as a plain script where zoo is not installed.
"""

import argparse
import os
import shutil
import sys
import textwrap

__all__ = ["DEFAULT_SENTENCES", "LoadError", "format_table", "load_translator", "main", "printable"]

# Multi30k-like English captions (the first of them are from the Multi30k training set).
DEFAULT_SENTENCES = (
    "Two young, White males are outside near many bushes.",
    "A man in an orange hat starring at something.",
    "A little girl climbing into a wooden playhouse.",
    "A dog is running in the snow.",
    "Several women wait outside in a city.",
)


class LoadError(Exception):
    """A folder without a usable SavedModel; the message says why, in one line."""


def _serving_path(directory):
    """The SavedModel folder of an export folder (the highest version in ``DIR/serving/``, as
    TF Serving picks it; zoo.artifacts.latest_serving_path, which this script cannot import),
    of a base path (the highest version in ``DIR``), or ``DIR`` itself."""
    if not os.path.isdir(directory):
        raise LoadError(f"{directory}: no such folder")
    for base in (os.path.join(directory, "serving"), directory):
        names = os.listdir(base) if os.path.isdir(base) else []
        for version in sorted((int(name) for name in names if name.isdigit()), reverse=True):
            if os.path.isfile(os.path.join(base, str(version), "saved_model.pb")):
                return os.path.join(base, str(version))
    if os.path.isfile(os.path.join(directory, "saved_model.pb")):
        return directory
    raise LoadError(
        f"{directory}: no SavedModel in {os.path.join(directory, 'serving', 'N')} "
        f"(write one with `zoo export translator --workdir WORKDIR --output {directory}`)"
    )


def load_translator(directory, beam_size=None, greedy=False):
    """Load an exported translator with TensorFlow alone; return ``sentences -> translations``.

    Args:
        directory: an export folder (with ``serving/``) or a SavedModel folder.
        beam_size: use the ``translate_beam`` signature with this beam size; None uses
            ``serving_default`` (beam search with the export's default beam size).
        greedy: use the ``translate_greedy`` signature.

    Returns:
        A function from a list of ``str`` to the list of their translations (``str``).

    Raises:
        LoadError: no such folder, no SavedModel in it, or it cannot be loaded.
    """
    path = _serving_path(directory)
    # TensorFlow's C++ start-up lines (CUDA probing, oneDNN) are noise here, unless asked for.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the SavedModel)

    try:
        serving = tf.saved_model.load(path)
    except Exception as e:  # a broken or foreign SavedModel: say so, do not crash
        message = str(e).strip().splitlines()
        raise LoadError(f"{directory}: cannot load {path}: {message[0] if message else e!r}")
    if greedy:
        name = "translate_greedy"
    else:
        name = "serving_default" if beam_size is None else "translate_beam"
    if name not in serving.signatures:
        raise LoadError(f"{directory}: the SavedModel has no signature {name!r}")
    function = serving.signatures[name]

    def translate(sentences):
        kwargs = {"inputs": tf.constant(list(sentences), tf.string)}
        if name == "translate_beam":
            kwargs["beam_size"] = tf.constant(beam_size, tf.int32)
        texts = function(**kwargs)["translations"].numpy()
        return [text.decode("utf-8", errors="replace") for text in texts]

    translate.serving = serving  # keeps the loaded resources alive with the function
    return translate


def printable(text):
    """``text`` safe for a terminal: whitespace becomes spaces, other control characters
    (which byte pieces of an untrained model can spell) become U+FFFD."""
    return "".join(
        ch if ch.isprintable() else " " if ch.isspace() else "\ufffd" for ch in text
    )


def format_table(headers, rows, width=None):
    """A plain-text table whose cells wrap to fit ``width`` columns.

    Args:
        headers: the column titles.
        rows: lists of cells (``str``), one per column.
        width: the total width; defaults to the terminal's (120 when not a terminal).

    Returns:
        The table as one ``str``, rows separated by rules; cells go through :func:`printable`.
    """
    if width is None:
        width = shutil.get_terminal_size((120, 24)).columns
    columns = len(headers)
    cell_width = max(12, (width - 3 * (columns - 1)) // columns)

    def lines(row):
        wrapped = [textwrap.wrap(printable(cell), cell_width) or [""] for cell in row]
        height = max(len(cell) for cell in wrapped)
        for i in range(height):
            parts = [cell[i] if i < len(cell) else "" for cell in wrapped]
            yield " | ".join(part.ljust(cell_width) for part in parts).rstrip()

    rule = "-+-".join("-" * cell_width for _ in range(columns))
    out = list(lines(headers))
    for row in rows:
        out.append(rule)
        out.extend(lines(row))
    return "\n".join(out)


def _parse(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    sentences = None
    if "--" in argv:
        split = argv.index("--")
        argv, sentences = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m zoo.export.compare",
        description="Translate sentences with exported translators and print them side by side.",
        epilog="Sentences go after `--`; without them, a few Multi30k-like sentences are used.",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="folders of `zoo export`")
    method = parser.add_mutually_exclusive_group()
    method.add_argument("--greedy", action="store_true", help="greedy search")
    method.add_argument("--beam-size", type=int, help="beam search with this beam size")
    parser.add_argument("--width", type=int, help="table width (default: the terminal's)")
    args = parser.parse_args(argv)
    args.sentences = list(sentences) if sentences else list(DEFAULT_SENTENCES)
    return args


def main(argv=None):
    """Run the comparison; returns the exit status (see the module docstring)."""
    args = _parse(argv)
    headers, columns = ["source"], [args.sentences]
    for directory in args.dirs:
        try:
            translate = load_translator(directory, beam_size=args.beam_size, greedy=args.greedy)
            translations = translate(args.sentences)
        except LoadError as e:
            print(f"compare: {e}", file=sys.stderr)
            continue
        except Exception as e:  # a model that fails to translate must not hide the others
            print(f"compare: {directory}: translation failed: {e!r:.300}", file=sys.stderr)
            continue
        headers.append(directory)
        columns.append(translations)
    if len(columns) == 1:
        print("compare: no model could be loaded.", file=sys.stderr)
        return 1
    rows = [list(row) for row in zip(*columns)]
    sys.stdout.flush()
    print(format_table(headers, rows, args.width))
    return 0


if __name__ == "__main__":
    sys.exit(main())
