"""Sequence-level knowledge distillation: a teacher translator's beam translations of the
training sources, for a student (the NAT, or a smaller translator) to train on.

:func:`distill` (``zoo distill``) writes a folder of plain text pairs;
:func:`zoo.data.read_distilled` reads it back, and is what a config's ``data_dir``
(``zoo train ... --data``) trains on. A run
is resumable: each batch's translations are on disk as soon as they are made, so rerunning the
same call goes on where the last one stopped, even after ``kill -9``.

References:
    Kim & Rush 2016, "Sequence-Level Knowledge Distillation"; Gu et al. 2018,
    "Non-Autoregressive Neural Machine Translation".
"""

import json
import os
import shutil
import sys
import time

from zoo.artifacts import (
    DISTILL_MANIFEST_FILE,
    DISTILL_PARTIAL_FILE,
    DISTILL_SOURCE_FILE,
    DISTILL_TARGET_FILE,
    write_text_atomically,
)
from zoo.data import load_multi30k, one_line
from zoo.data.distilled import read_manifest
from zoo.tasks.loading import load_trained
from zoo.tasks.translation.task import TranslationTask
from zoo.progress import Progress

__all__ = ["distill"]


def distill(teacher_folder, workdir, beam_size=5, batch_size=64, limit=None, verbose=False):
    """Translate Multi30k's English training sources with a teacher translator's beam search.

    The beam is 5 by default: the beam that ``zoo evaluate`` scores a translator with, and Kim &
    Rush's, so that the student learns the outputs whose BLEU the teacher is known by (4, the
    default of ``zoo translate``, costs about a fifth less).

    The sentences go through sorted by length (less padding, shorter searches). Each batch's
    translations are appended to ``train.de.partial`` as ``index<TAB>translation`` lines and
    flushed; a rerun translates only the sentences not in it (a torn last line, from a kill in
    mid-write, is dropped). At the end ``train.en`` and ``train.de`` are written in corpus order,
    each under a temporary name then renamed, and ``distill.json`` is marked finished; a rerun
    then does nothing. A tab or line break in a sentence becomes a space. The teacher's
    vocabulary is copied beside the data: a student trained on it (``zoo train --data``) uses it.

    Args:
        teacher_folder: a workdir or export folder of a translator (``zoo train translator``).
        workdir: the folder of the distilled data (created if missing; resumed if it exists).
        beam_size: the teacher's beams.
        batch_size: the sentences translated together.
        limit: only the first ``limit`` training pairs (quick runs); None: all 29,000.
        verbose: a progress bar over the sentences, and what a rerun finds, on stderr.

    Returns:
        The manifest (``distill.json``) as a dict: ``teacher`` (its absolute path),
        ``beam_size``, ``sentences``, ``seconds`` (over every run) and ``finished``.

    Raises:
        FileNotFoundError: no teacher folder, or no model in it.
        ValueError: a teacher that is not a translator, a workdir begun with another teacher,
            beam size or limit, or a partial file that is not this distillation's.

    Example:
        >>> manifest = distill("workdirs/small", "workdirs/kd", limit=100)  # doctest: +SKIP
        >>> manifest["finished"], manifest["sentences"]  # doctest: +SKIP
        (True, 100)
    """
    start = time.monotonic()
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}.")
    sources = [one_line(source) for source, _ in load_multi30k("train")[:limit]]
    teacher = os.path.abspath(teacher_folder)
    settings = {"teacher": teacher, "beam_size": beam_size, "sentences": len(sources)}
    manifest_path = os.path.join(workdir, DISTILL_MANIFEST_FILE)
    partial_path = os.path.join(workdir, DISTILL_PARTIAL_FILE)
    manifest = _resumed_manifest(manifest_path, partial_path, settings)
    if manifest["finished"]:
        _say(verbose, f"{workdir}: already distilled ({len(sources)} sentences); nothing to do")
        return manifest

    task = TranslationTask()
    model, vocabulary = load_trained(teacher_folder, task)
    os.makedirs(workdir, exist_ok=True)
    # The student learns in the teacher's vocabulary (zoo train --data takes it from here).
    shutil.copyfile(
        os.path.join(teacher_folder, task.vocabulary_file),
        os.path.join(workdir, task.vocabulary_file),
    )
    _save_manifest(manifest_path, manifest)
    done = _read_partial(partial_path, len(sources))
    if done:
        _say(verbose, f"{workdir}: resuming, {len(done)} of {len(sources)} sentences translated")
    todo = sorted((i for i in range(len(sources)) if i not in done), key=lambda i: len(sources[i]))
    progress = Progress(len(todo), enabled=verbose, unit="sentences")
    seconds = manifest["seconds"]
    with open(partial_path, "a", encoding="utf-8", newline="\n") as partial:
        for begin in range(0, len(todo), batch_size):
            batch = todo[begin : begin + batch_size]
            texts = task.translate(
                model, vocabulary, [sources[i] for i in batch], method="beam",
                beam_size=beam_size, batch_size=batch_size,
            )
            texts = [one_line(text) for text in texts]
            partial.write("".join(f"{i}\t{text}\n" for i, text in zip(batch, texts)))
            partial.flush()
            done.update(zip(batch, texts))
            manifest["seconds"] = round(seconds + time.monotonic() - start, 1)
            _save_manifest(manifest_path, manifest)
            progress.add(len(batch))

    write_text_atomically(os.path.join(workdir, DISTILL_SOURCE_FILE), _lines(sources))
    write_text_atomically(
        os.path.join(workdir, DISTILL_TARGET_FILE), _lines(done[i] for i in range(len(sources)))
    )
    manifest.update(seconds=round(seconds + time.monotonic() - start, 1), finished=True)
    _save_manifest(manifest_path, manifest)
    os.remove(partial_path)  # train.de holds it all now
    return manifest


def _resumed_manifest(path, partial_path, settings):
    """The manifest to go on with: a new one, or the saved one if it has the same settings."""
    if not os.path.exists(path):
        if os.path.exists(partial_path):  # only distill() writes it, and after the manifest
            raise ValueError(f"{partial_path}: found without {path}; use a new --workdir")
        return {**settings, "seconds": 0.0, "finished": False}
    manifest = read_manifest(path)
    for field, value in settings.items():
        if manifest.get(field) != value:
            raise ValueError(
                f"{path} was begun with {field} {manifest.get(field)!r}, not {value!r}; use a "
                "new --workdir, or the same settings to resume"
            )
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
    return "".join(text + "\n" for text in texts)


def _say(verbose, message):
    if verbose:
        print(message, file=sys.stderr, flush=True)
