"""A transliteration-like task made by a rule, for attention that must move left to right.

Each letter of a random phrase becomes one or two letters by a fixed table (``c`` -> ``ts``,
...), so the alignment is monotonic but not the diagonal. The splits come from fixed seeds, so
nothing is shipped but this file: ``train``, ``val``, ``test``, and ``long``, with phrases longer
than any in training (where plain attention loses its place).
"""

import functools

import numpy as np

__all__ = ["RULES", "SPLITS", "load_transliteration", "transliterate"]

# One letter -> its output: the identity but for these, five of them two letters long.
RULES = {
    **{letter: letter for letter in "abcdefghijklmnopqrstuvwxyz"},
    "c": "ts", "h": "kh", "j": "y", "q": "kv", "w": "v", "x": "ks", "y": "i", "z": "dz",
}  # fmt: skip
_LETTERS = "abcdefghijklmnopqrstuvwxyz"

# split -> (phrases, shortest, longest (characters), seed)
SPLITS = {
    "train": (20_000, 4, 24, 1),
    "val": (1_000, 4, 24, 2),
    "test": (1_000, 4, 24, 3),
    "long": (500, 36, 64, 4),
}


def transliterate(text):
    """The output of ``text`` by :data:`RULES` (spaces kept).

    Example:
        >>> transliterate("lucky fox")
        'lutskki foks'
    """
    return "".join(RULES.get(character, character) for character in text)


def _phrase(rng, length):
    """Random words of 2 to 8 letters, one space between, ``length`` characters in all."""
    words, left = [], length
    while left > 0:
        size = min(int(rng.integers(2, 9)), left)
        if 0 < left - size < 2:  # no one-letter word at the end
            size = left
        words.append("".join(_LETTERS[i] for i in rng.integers(0, 26, size)))
        left -= size + 1
    return " ".join(words)[:length]


def load_transliteration(split):
    """The ``(source, target)`` pairs of a split (see the module's docstring).

    Raises:
        ValueError: an unknown split.

    Example:
        >>> pairs = load_transliteration("val")
        >>> len(pairs), all(target == transliterate(source) for source, target in pairs)
        (1000, True)
    """
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLITS)}.")
    return list(_pairs(split))


@functools.cache
def _pairs(split):
    count, shortest, longest, seed = SPLITS[split]
    rng = np.random.default_rng(seed)
    seen = set()
    if split != "train":  # the evaluation phrases are none of the training ones
        seen = {source for source, _ in _pairs("train")}
    pairs = []
    while len(pairs) < count:
        source = _phrase(rng, int(rng.integers(shortest, longest + 1)))
        if source not in seen:
            seen.add(source)
            pairs.append((source, transliterate(source)))
    return tuple(pairs)
