"""Reading a trained model and its vocabulary from a workdir or an export folder."""

import os

from zoo.artifacts import MODEL_FILE, read_model

__all__ = ["load_trained", "read_folder_model"]


def read_folder_model(folder, model_file=MODEL_FILE, trainer="zoo train"):
    """The model in ``folder`` (not compiled); a one-line error naming the file when there is
    no folder, no model (``trainer`` is the command that makes one) or an unreadable one."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder")
    path = os.path.join(folder, model_file)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no trained model at {path}: run `{trainer}` first")
    return read_model(path)


def load_trained(folder, task, model_file=MODEL_FILE):
    """The ``(model, vocabulary)`` of a folder that must hold a model of ``task``.

    Raises:
        FileNotFoundError: no such folder, or no model or vocabulary in it.
        ValueError: a file that cannot be read, or a model of another task.
    """
    model = read_folder_model(folder, model_file, f"zoo train {task.name}")
    if model.name != task.name:
        raise ValueError(f"{folder} holds a {model.name}, not a {task.name}")
    return model, task.read_vocabulary(folder)
