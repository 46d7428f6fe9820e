"""Checkpoint averaging: the mean of the weights of a run's last epochs.

Averaging the last checkpoints smooths the noise of the final updates (Vaswani et al. 2017,
section 6.1). ``train()`` keeps the last epochs' weights in ``WORKDIR/epochs/``;
:func:`average_checkpoints` (``zoo average``) writes their mean as the workdir's model.
"""

import os
import re

import numpy as np

from zoo.artifacts import CHECKPOINT_FILE, EPOCHS_DIR, MODEL_FILE, read_model, save_model_atomically

__all__ = ["average_checkpoints", "average_weights", "epoch_checkpoints"]

_EPOCH_FILE = re.compile(r"^epoch-(\d+)\.weights\.h5$")


def epoch_checkpoints(directory):
    """The epoch weight files of ``directory`` (see ``LastCheckpoints``), oldest first."""
    if not os.path.isdir(directory):
        return []
    found = [(int(m.group(1)), name) for name in os.listdir(directory)
             if (m := _EPOCH_FILE.match(name))]
    return [os.path.join(directory, name) for _, name in sorted(found)]


def average_weights(model, paths):
    """Set ``model``'s weights to the mean of the weight files ``paths``; return the model.

    Floating-point weights are averaged in float64; any other weight (an integer counter)
    takes its value from the last file.
    """
    if not paths:
        raise ValueError("average_weights needs at least one weight file.")
    total = None
    for path in paths:
        model.load_weights(path)
        values = [np.asarray(w, dtype=np.float64) if _is_float(w) else np.asarray(w)
                  for w in model.get_weights()]
        if total is None:
            total = values
        else:
            total = [t + v if _is_float(v) else v for t, v in zip(total, values)]
    model.set_weights([
        (t / len(paths)).astype(w.dtype) if _is_float(w) else t
        for t, w in zip(total, model.get_weights())
    ])
    return model


def _is_float(array):
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def average_checkpoints(workdir, last):
    """Average the last ``last`` epochs of a workdir into its ``model.keras``.

    Args:
        workdir: a workdir of ``zoo train`` (with ``epochs/`` and ``model.keras``, or only
            ``checkpoint.keras`` when the run was killed).
        last: how many of the last epochs to average (at least 1).

    Returns:
        ``(model, paths)``: the averaged model (also saved as ``model.keras``) and the weight
        files that were averaged. The un-averaged last epoch stays in ``epochs/``.

    Raises:
        FileNotFoundError: no epoch weights in the workdir.
        ValueError: ``last`` below 1 or above the epochs kept.
    """
    if last < 1:
        raise ValueError(f"--last must be at least 1, got {last}.")
    paths = epoch_checkpoints(os.path.join(workdir, EPOCHS_DIR))
    if not paths:
        raise FileNotFoundError(
            f"{os.path.join(workdir, EPOCHS_DIR)}: no epoch weights to average (train() keeps "
            "them from this version on)"
        )
    if last > len(paths):
        raise ValueError(
            f"--last {last}: {os.path.join(workdir, EPOCHS_DIR)} keeps only {len(paths)} epochs"
        )
    # A killed run leaves no model.keras; its last epoch's checkpoint.keras is the same model.
    missing = not os.path.exists(os.path.join(workdir, MODEL_FILE))
    found = missing and os.path.exists(os.path.join(workdir, CHECKPOINT_FILE))
    path = os.path.join(workdir, CHECKPOINT_FILE if found else MODEL_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no trained model at {path}: run `zoo train` first")
    model = read_model(path)
    # A task model's epochs are its backbone's weights: what train() fits.
    average_weights(getattr(model, "backbone", None) or model, paths[-last:])
    save_model_atomically(model, os.path.join(workdir, MODEL_FILE))
    return model, paths[-last:]
