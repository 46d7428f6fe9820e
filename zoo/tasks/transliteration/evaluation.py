"""The transliterator's scores: whole outputs right, and the character error rate."""

__all__ = ["edit_distance", "transliteration_scores"]


def edit_distance(a, b):
    """The Levenshtein distance between two strings (insertions, deletions, substitutions).

    Example:
        >>> edit_distance("kitten", "sitting")
        3
    """
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def transliteration_scores(hypotheses, references):
    """``{"exact": share of outputs equal to their reference, "cer": character errors per
    reference character}``.

    Example:
        >>> transliteration_scores(["abc", "xy"], ["abc", "xyz"])
        {'exact': 0.5, 'cer': 0.16666666666666666}
    """
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    errors = sum(edit_distance(h, r) for h, r in zip(hypotheses, references))
    return {"exact": exact / len(references),
            "cer": errors / max(1, sum(len(r) for r in references))}  # fmt: skip

