"""Start a run from another trained model's weights (``zoo train TASK --init-from DIR``).

zoo's models name their layers alike across tasks, so weights go across layer by layer, by name
and shape: e.g. a NAT started from the translator's embeddings and blocks learns much faster
than from random weights (Guo et al. 2020, "Fine-Tuning by Curriculum Learning for
Non-Autoregressive Neural Machine Translation"); layers the source lacks start as built.
"""

import os

from zoo.artifacts import MODEL_FILE, folder_task, read_model

__all__ = ["warm_start"]


def warm_start(model, folder, task, workdir):
    """Copy into ``model`` the weights of each layer of the model in ``folder`` that has the
    same name and the same weight shapes.

    An embedding row means a piece only under its vocabulary, so the two runs must share it:
    ``task.same_vocabulary`` of ``folder`` and ``workdir`` (the same pieces in the same order,
    for the translators).

    Args:
        model: the built model of the new run.
        folder: a workdir or an export folder of a trained zoo model (any task).
        task: the new run's :class:`zoo.tasks.Task`.
        workdir: the new run's workdir, which holds its vocabulary.

    Returns:
        ``(copied, kept)``: the names of the layers whose weights were copied, and of the
        layers with weights that were left as built.

    Raises:
        FileNotFoundError: no such folder, no model or no vocabulary of this run's kind in it.
        ValueError: another vocabulary, a model that cannot be read, or no layer in common.
    """
    folder = os.fspath(folder)
    try:  # the one check of a model folder (a model of any task starts a run)
        folder_task(folder)
    except (FileNotFoundError, ValueError) as error:
        raise type(error)(f"--init-from {error}") from None
    source = read_model(os.path.join(folder, MODEL_FILE))  # one line when Keras cannot read it
    task.read_vocabulary(folder)  # a one-line error naming the file when it is missing or broken
    if not task.same_vocabulary(folder, workdir):
        raise ValueError(
            f"--init-from {folder}: its {task.vocabulary_file} is not this run's (in {workdir}); "
            "start from a model trained with the same vocabulary"
        )
    source = getattr(source, "backbone", None) or source  # a task model: its backbone's layers
    layers = {layer.name: layer for layer in source.layers}
    copied, kept = [], []
    for layer in model.layers:
        if not layer.weights:
            continue
        other = layers.get(layer.name)
        shapes = [tuple(w.shape) for w in layer.weights]
        if other is not None and [tuple(w.shape) for w in other.weights] == shapes:
            layer.set_weights(other.get_weights())
            copied.append(layer.name)
        else:
            kept.append(layer.name)
    if not copied:
        raise ValueError(f"--init-from {folder}: no layer of its model has the name and the "
                         f"weight shapes of one of this model's ({', '.join(kept)})")
    return copied, kept
