"""Presets: a model config's named architectures, and a trained model by its name or file; one
lookup of each shared by every model."""

import os
from dataclasses import replace


def load_trained(cls, preset, **kwargs):
    """A trained task model of class ``cls``: a shipped one's name (``cls.shipped``, package
    data in ``cls.presets_dir``), a ``.keras`` file, or a folder that holds ``model.keras``;
    a one-line error for anything else (a file of zoo 0.1.0 names ``zoo export``)."""
    import keras  # here: the configs above import without Keras

    path = os.fspath(preset)
    if path in cls.shipped:
        path = os.path.join(cls.presets_dir, f"{path}.keras")
    elif os.path.isdir(path):
        path = os.path.join(path, "model.keras")
    elif not path.endswith(".keras"):
        raise ValueError(f"{preset!r} is neither a shipped model ({', '.join(cls.shipped)}), "
                         "a .keras file nor a folder with model.keras")  # fmt: skip
    if not os.path.exists(path):
        raise FileNotFoundError(f"{preset}: no model at {path}")
    model = keras.models.load_model(path, **kwargs)
    if not isinstance(model, cls):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a {cls.__name__} (a model "
                         "of zoo 0.1.0? `zoo export` of its workdir writes it anew)")  # fmt: skip
    return model


def from_presets(presets, preset, model, **overrides):
    """``presets[preset]`` with any field overridden; a clear error naming the choices.

    Args:
        presets: dict of name -> frozen dataclass config.
        preset: the name asked for.
        model: the model's name, for the error message ("translator", "tagger").
        **overrides: fields to replace.
    """
    if preset not in presets:
        raise ValueError(f"Unknown {model} preset {preset!r}; choose from {sorted(presets)}.")
    return replace(presets[preset], **overrides)
