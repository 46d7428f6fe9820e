"""Attention variants by name.

A new variant is a new file in this folder: a subclass of ``MultiHeadAttention`` (same call
signature) decorated with ``@register_attention("short-name")`` and imported in
``zoo/layers/attention/__init__.py``. The blocks then take ``attention="short-name"``; they
never change when a variant is added.
"""

_REGISTRY = {}


def register_attention(name):
    """Class decorator that makes an attention layer available to the blocks as ``name``."""

    def decorator(cls):
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"Attention name {name!r} is already taken by {_REGISTRY[name]}.")
        _REGISTRY[name] = cls
        return cls

    return decorator


def get_attention(name):
    """The attention class registered as ``name``."""
    if name not in _REGISTRY:
        raise ValueError(f"Unknown attention {name!r}; registered: {sorted(_REGISTRY)}.")
    return _REGISTRY[name]


def available_attention():
    """The registered attention names."""
    return sorted(_REGISTRY)
