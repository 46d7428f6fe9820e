"""zoo.tasks: one file per kind of run, and the one loader of trained models.

``TASKS`` maps each row of :mod:`zoo.tasks.table` to its :class:`Task`, the object that
``zoo.training.train`` takes; :func:`load` reads a workdir or an export folder.
"""

import collections

from zoo.artifacts import MODEL_FILE, folder_task
from zoo.tasks.loading import load_trained
from zoo.tasks.nat import NATTask
from zoo.tasks.tagging import TaggingTask
from zoo.tasks.task import Task
from zoo.tasks.translation import TranslationTask
from zoo.tasks.transliteration import TransliterationTask

__all__ = ["TASKS", "Loaded", "Task", "get_task", "load", "task_of", "translate"]

TASKS = {
    task.name: task
    for task in (TranslationTask(), TaggingTask(), NATTask(), TransliterationTask())
}


def get_task(task):
    """The :class:`Task` of a name (``"translator"``, ``"tagger"``), or the task itself."""
    if isinstance(task, Task):
        return task
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; choose from {sorted(TASKS)}.")
    return TASKS[task]


Loaded = collections.namedtuple("Loaded", "task model vocabulary")


def load(folder, task=None, model_file=MODEL_FILE):
    """The task, model and vocabulary of a workdir (``zoo train``) or an export folder.

    The model's name says which task it belongs to. Every problem is a one-line error that
    names the file: no folder, no model, a model that Keras cannot read (truncated, not a
    ``.keras`` file, or saved by a newer Keras), a model of another task than ``task``, a
    missing or broken vocabulary.

    Args:
        folder: the workdir or export folder.
        task: the task the caller expects (a name or a :class:`Task`), or None for any.
        model_file: the model's file in the folder (a workdir's ``checkpoint.keras``, say).

    Returns:
        A :class:`Loaded` ``(task, model, vocabulary)``; the model is not compiled.

    Raises:
        FileNotFoundError: no such folder, or no model or vocabulary in it.
        ValueError: a file that cannot be read, or a model of another task.
    """
    if task is None:  # the one its model names
        task = folder_task(folder, model_file, "zoo train", TASKS)
    task = get_task(task)
    return Loaded(task, *load_trained(folder, task, model_file))


def task_of(model):
    """The :class:`Task` whose model ``model`` is (by its name)."""
    if model.name not in TASKS:
        raise ValueError(f"the model holds a model named {model.name!r}, which is no zoo task "
                         f"({', '.join(sorted(TASKS))})")  # fmt: skip
    return TASKS[model.name]


def translate(model, tokenizer, sentences, method=None, beam_size=4, **options):
    """Translate ``sentences`` with a trained translator or NAT, by its task's search.

    ``method``: the task's search (None: its default, a translator's ``"beam"``, a NAT's
    ``"mask_predict"``); ``beam_size``: of ``"beam"``; ``options`` are the task's
    (:meth:`TranslationTask.translate`): ``max_length``, ``batch_size``, ``verbose``, and the
    search's own (``alpha``, ``seed``, ``iterations``, ``length_beam``, ``rescorer``, ...).

    Example:
        >>> import os, tempfile
        >>> from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
        >>> from zoo.models import build_translator, translator_config
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> path = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> model = build_translator(translator_config("tiny", vocab_size=400))
        >>> texts = translate(model, SentencePieceTokenizer(path), ["A dog runs."], method="greedy")
        >>> len(texts), type(texts[0])
        (1, <class 'str'>)
    """
    task = task_of(model)
    if not hasattr(task, "translate"):
        raise ValueError(f"A model named {model.name!r} does not translate.")
    return task.translate(model, tokenizer, sentences, method, beam_size, **options)
