"""Named presets of a model config: one lookup shared by every model."""

from dataclasses import replace


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
