"""Sequence-level knowledge distillation: a teacher translator's beam translations of the
training sources, for a student (the NAT, or a smaller translator) to train on.

:func:`distill` (``zoo distill``) writes two line-aligned files named by the teacher's languages
(``train.en``, ``train.de``), a corpus for ``zoo train --train``. Each batch is on disk as soon
as it is made, so rerunning the same call resumes, even after ``kill -9``.

References:
    Kim & Rush 2016, "Sequence-Level Knowledge Distillation"; Gu et al. 2018,
    "Non-Autoregressive Neural Machine Translation".
"""

import itertools
import json
import os
import shutil
import sys
import time

from zoo.artifacts import (
    DISTILL_MANIFEST_FILE,
    distill_file_names,
    read_languages,
    write_text_atomically,
)
from zoo.data import ParallelCorpus, batched, fingerprint_change, multi30k_files, one_line
from zoo.tasks.loading import load_trained
from zoo.tasks.translation.task import TranslationTask
from zoo.progress import Progress

__all__ = ["WINDOW", "distill"]

# Sources are read this many at a time and sorted by length within each window: memory bounded
# by a window (and the translations made, which the target file is written from).
WINDOW = 10_000


def distill(teacher_folder, workdir, corpus=None, beam_size=5, batch_size=64, limit=None,
            verbose=False):
    """Translate a corpus's sources with a teacher translator's beam search.

    The beam is 5 by default, that of ``zoo evaluate`` and Kim & Rush, so that the student learns
    the outputs whose BLEU the teacher is known by. Sources are read in windows of
    :data:`WINDOW`, sorted by length within each. Each batch's translations are appended to
    ``train.<target>.partial`` as ``index<TAB>translation`` lines and flushed, and a rerun
    translates only what is missing (a torn last line is dropped). At the end both files are
    written in corpus order (each renamed into place) and ``distill.json`` marked finished. Tabs
    and line breaks in a sentence become spaces. The teacher's vocabulary is copied beside the
    data, for the student's ``--sentencepiece-model``.

    Args:
        teacher_folder: a workdir or export folder of a translator (``zoo train translator``).
        workdir: the folder of the distilled data (created if missing; resumed if it exists).
        corpus: a :class:`~zoo.data.ParallelCorpus` whose sources are translated (its targets
            are not read); None: the bundled Multi30k's training pairs.
        beam_size: the teacher's beams.
        batch_size: the sentences translated together.
        limit: only the first ``limit`` pairs (quick runs); None: all.
        verbose: a progress bar over the sentences, and what a rerun finds, on stderr.

    Returns:
        The manifest (``distill.json``) as a dict: ``teacher`` (its absolute path),
        ``beam_size``, ``sentences``, ``data`` (the corpus's fingerprint), ``files`` (the two
        files' names), ``seconds`` (over every run) and ``finished``.

    Raises:
        FileNotFoundError: no teacher folder, or no model in it.
        ValueError: a teacher that is not a translator, a workdir begun with another teacher,
            corpus, beam size or limit, or a partial file that is not this distillation's.

    Example:
        >>> manifest = distill("workdirs/small", "workdirs/kd", limit=100)  # doctest: +SKIP
        >>> manifest["finished"], manifest["sentences"], manifest["files"]  # doctest: +SKIP
        (True, 100, {'source': 'train.en', 'target': 'train.de'})
    """
    start = time.monotonic()
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}.")
    if corpus is None:
        corpus = ParallelCorpus([multi30k_files("train")], flag="Multi30k train")
    if corpus.weighted:
        raise ValueError(f"{corpus}: distillation translates every pair once; give no weights")
    count = corpus.num_pairs if limit is None else min(limit, corpus.num_pairs)
    # A teacher from before languages were recorded was trained on the bundled En-De.
    languages = read_languages(teacher_folder) or {"source": "en", "target": "de"}
    names = distill_file_names(languages["source"], languages["target"])
    teacher = os.path.abspath(teacher_folder)
    settings = {"teacher": teacher, "beam_size": beam_size, "sentences": count,
                "data": corpus.fingerprint()}  # fmt: skip
    manifest_path = os.path.join(workdir, DISTILL_MANIFEST_FILE)
    partial_path = os.path.join(workdir, names["partial"])
    manifest = _resumed_manifest(manifest_path, partial_path, settings)
    manifest["files"] = {"source": names["source"], "target": names["target"]}
    if manifest["finished"]:
        _say(verbose, f"{workdir}: already distilled ({count} sentences); nothing to do")
        return manifest

    task = TranslationTask()
    model, vocabulary = load_trained(teacher_folder, task)
    os.makedirs(workdir, exist_ok=True)
    # The student learns in the teacher's vocabulary (its --sentencepiece-model).
    shutil.copyfile(
        os.path.join(teacher_folder, task.vocabulary_file),
        os.path.join(workdir, task.vocabulary_file),
    )
    _save_manifest(manifest_path, manifest)
    done = _read_partial(partial_path, count)
    if done:
        _say(verbose, f"{workdir}: resuming, {len(done)} of {count} sentences translated")
    progress = Progress(count - len(done), enabled=verbose, unit="sentences")
    seconds = manifest["seconds"]
    with open(partial_path, "a", encoding="utf-8", newline="\n") as partial:
        for number, window in enumerate(batched(_sources(corpus, count), WINDOW)):
            first = number * WINDOW  # the index of the window's first sentence
            todo = sorted((first + i for i in range(len(window)) if first + i not in done),
                          key=lambda i: len(window[i - first]))  # fmt: skip
            for begin in range(0, len(todo), batch_size):
                batch = todo[begin : begin + batch_size]
                texts = task.translate(
                    model, vocabulary, [window[i - first] for i in batch], method="beam",
                    beam_size=beam_size, batch_size=batch_size,
                )
                texts = [one_line(text) for text in texts]
                partial.write("".join(f"{i}\t{text}\n" for i, text in zip(batch, texts)))
                partial.flush()
                done.update(zip(batch, texts))
                manifest["seconds"] = round(seconds + time.monotonic() - start, 1)
                _save_manifest(manifest_path, manifest)
                progress.add(len(batch))

    write_text_atomically(os.path.join(workdir, names["source"]), _lines(_sources(corpus, count)))
    write_text_atomically(os.path.join(workdir, names["target"]),
                          _lines(done[i] for i in range(count)))  # fmt: skip
    manifest.update(seconds=round(seconds + time.monotonic() - start, 1), finished=True)
    _save_manifest(manifest_path, manifest)
    os.remove(partial_path)  # the target file holds it all now
    return manifest


def _sources(corpus, count):
    """The first ``count`` source sentences of ``corpus``, one line each, streamed."""
    return (one_line(source) for source, _ in itertools.islice(corpus.iter_pairs(), count))


def _resumed_manifest(path, partial_path, settings):
    """The manifest to go on with: a new one, or the saved one if it has the same settings."""
    if not os.path.exists(path):
        if os.path.exists(partial_path):  # only distill() writes it, and after the manifest
            raise ValueError(f"{partial_path}: found without {path}; use a new --workdir")
        return {**settings, "seconds": 0.0, "finished": False}
    manifest = read_manifest(path)
    change = fingerprint_change(manifest.get("data") or {}, settings["data"], path)
    if change:
        raise ValueError(f"{change} (this folder distils other files)")
    for field, value in settings.items():
        if field != "data" and manifest.get(field) != value:
            raise ValueError(
                f"{path} was begun with {field} {manifest.get(field)!r}, not {value!r}; use a "
                "new --workdir, or the same settings to resume"
            )
    return manifest


def read_manifest(path):
    with open(path, encoding="utf-8") as f:
        try:
            manifest = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path} is not a JSON manifest ({error})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path} is not a JSON manifest (an object)")
    return manifest


def _save_manifest(path, manifest):
    write_text_atomically(path, json.dumps(manifest, indent=2) + "\n")


def _read_partial(path, count):
    """``{index: translation}`` of the partial file; a torn last line is cut off the file too,
    so that the next line appended starts a line of its own."""
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        data = f.read()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    done = {}
    for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        index, tab, text = line.partition(b"\t")
        try:
            index, text = int(index), text.decode("utf-8")
        except ValueError:  # UnicodeDecodeError is one
            index = None
        if not tab or index not in range(count) or index in done:
            raise ValueError(
                f"{path}, line {number}: not an index<TAB>translation line of this "
                "distillation; delete the file to start over"
            )
        done[index] = text
    return done


def _lines(texts):
    """Each text as a line, streamed."""
    return (text + "\n" for text in texts)


def _say(verbose, message):
    if verbose:
        print(message, file=sys.stderr, flush=True)
