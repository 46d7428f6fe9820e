"""zoo.tasks: one file per kind of run, and the one loader of trained models.

``TASKS`` maps a task's name to its :class:`Task`; ``zoo.training.train(task, config, workdir)``
and the command line read nothing else. :func:`load` reads a workdir or an export folder and
returns its task, model and vocabulary.
"""

import collections
import json
import os
import re
import zipfile

from zoo.artifacts import MODEL_FILE
from zoo.tasks.nat import NATTask
from zoo.tasks.tagging import TaggingTask
from zoo.tasks.task import Task, first_line
from zoo.tasks.translation import TranslationTask

__all__ = ["TASKS", "Loaded", "Task", "get_task", "load"]

TASKS = {task.name: task for task in (TranslationTask(), TaggingTask(), NATTask())}


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
    names the file: no folder, no model, a model that Keras cannot read (truncated, or not a
    ``.keras`` file), a model of another task than ``task``, a missing or broken vocabulary.

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
    import keras

    import zoo  # noqa: F401  (registers the layers for load_model)

    expected = None if task is None else get_task(task)
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder")
    path = os.path.join(folder, model_file)
    if not os.path.exists(path):
        trainer = f"zoo train {expected.name}" if expected else "zoo train"
        raise FileNotFoundError(f"no trained model at {path}: run `{trainer}` first")
    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as error:  # Keras's own messages do not name the file, or name it wrongly
        cause = _innermost_cause(error)
        saved_by = _saving_keras_version(path)
        if saved_by and _version_key(saved_by) > _version_key(keras.__version__):
            raise ValueError(
                f"{path} was saved by Keras {saved_by}, newer than this Keras "
                f"{keras.__version__}, which cannot read it ({cause}): upgrade "
                f"Keras (pip install 'keras>={saved_by}')"
            ) from error
        raise ValueError(
            f"{path} is not a readable .keras model ({cause}); it may be "
            "truncated: train or export it again"
        ) from error
    if model.name not in TASKS:
        raise ValueError(
            f"{path} holds a model named {model.name!r}, which is no zoo task "
            f"({', '.join(sorted(TASKS))})"
        )
    found = TASKS[model.name]
    if expected is not None and found is not expected:
        raise ValueError(f"{folder} holds a {found.name}, not a {expected.name}")
    vocabulary = found.read_vocabulary(folder)
    return Loaded(found, model, vocabulary)


def _innermost_cause(error):
    """The first line of what went wrong: Keras wraps a failed deserialization in one
    "could not be deserialized" message per level and names the cause last."""
    marker = "Exception encountered: "
    text = str(error)
    return first_line(text.rsplit(marker, 1)[1] if marker in text else error)


def _saving_keras_version(path):
    """The Keras version a ``.keras`` archive records in its ``metadata.json``, or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            version = json.loads(archive.read("metadata.json"))["keras_version"]
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
        return None
    return version if isinstance(version, str) else None


def _version_key(version):
    """``"3.15.1"`` -> ``(3, 15, 1)``: the release numbers, enough to order Keras versions."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
