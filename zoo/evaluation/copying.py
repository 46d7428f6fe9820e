"""How often the source words that a translation must copy (names, numbers) come out right."""

import collections
import re

_WORD = re.compile(r"\w+")


def rare_word_accuracy(sources, hypotheses, references, train_sources, max_count=1):
    """The share of rare source words that the hypotheses copy, among those the references copy.

    A word (a run of letters and digits) of a source counts when its reference has it too,
    verbatim, and it is a number or occurs at most ``max_count`` times in ``train_sources``:
    the names and numbers that a translator has to copy rather than translate. It is right
    when the hypothesis has it verbatim.

    Args:
        sources, hypotheses, references: aligned lists of sentences.
        train_sources: the training sources, for the word counts.
        max_count: the most training occurrences of a rare word.

    Returns:
        ``{"rare_words": n, "rare_word_accuracy": share}`` (share 0.0 when n is 0).

    Example:
        >>> rare_word_accuracy(["Anna sees 3 dogs ."], ["Anna sieht 3 Katzen ."],
        ...                    ["Anna sieht 3 Hunde ."], ["dogs run .", "she sees ."])
        {'rare_words': 2, 'rare_word_accuracy': 1.0}
    """
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"sources, hypotheses and references must align: {len(sources)}, "
            f"{len(hypotheses)} and {len(references)} sentences."
        )
    counts = collections.Counter(w for line in train_sources for w in _WORD.findall(line))
    total = right = 0
    for source, hypothesis, reference in zip(sources, hypotheses, references):
        copied = set(_WORD.findall(reference))
        produced = set(_WORD.findall(hypothesis))
        for word in _WORD.findall(source):
            if word in copied and (word.isdigit() or counts[word] <= max_count):
                total += 1
                right += word in produced
    return {"rare_words": total, "rare_word_accuracy": right / total if total else 0.0}
