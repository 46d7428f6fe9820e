"""Attention variants by name: a ``MultiHeadAttention`` subclass in its own file registers
itself with ``@register_attention("short-name")``, and the blocks take ``attention="short-name"``.
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
