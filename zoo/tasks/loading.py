"""Reading a trained model and its vocabulary from a workdir or an export folder."""

import os

from zoo.artifacts import MODEL_FILE, folder_task, read_model

__all__ = ["load_trained"]


def load_trained(folder, task, model_file=MODEL_FILE):
    """The ``(model, vocabulary)`` of a folder that must hold a model of ``task``: the model in
    today's form (:meth:`Task.upgrade_model`), not compiled, and the vocabulary that a task
    model holds inside, else the one beside it.

    Raises:
        FileNotFoundError: no such folder, or no model or vocabulary in it.
        ValueError: a file that cannot be read, or a model of another task.
    """
    found = folder_task(folder, model_file, f"zoo train {task.name}")
    if found != task.name:
        raise ValueError(f"{folder} holds a {found}, not a {task.name}")
    model = task.upgrade_model(read_model(os.path.join(os.fspath(folder), model_file)), folder)
    inside = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    return model, inside or task.read_vocabulary(folder)
