"""Tagging accuracy: overall and on out-of-vocabulary words."""


def tagging_accuracy(gold, predicted, oov=None):
    """Token accuracy of ``predicted`` tags against ``gold``, overall and on OOV words.

    Args:
        gold, predicted: lists of tag lists, sentence by sentence, of equal lengths.
        oov: lists of booleans of the same shape, True for an out-of-vocabulary word.

    Returns:
        ``{"accuracy", "tokens"}`` and, with ``oov``, ``{"oov_accuracy", "oov_tokens"}``;
        accuracies in percent (``None`` for an empty set).

    Example:
        >>> tagging_accuracy([["DET", "NOUN"]], [["DET", "VERB"]], [[False, True]])
        {'accuracy': 50.0, 'tokens': 2, 'oov_accuracy': 0.0, 'oov_tokens': 1}
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted.")
    correct = total = oov_correct = oov_total = 0
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(
                f"Sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted."
            )
        flags = oov[index] if oov is not None else [False] * len(gold_tags)
        for g, p, is_oov in zip(gold_tags, predicted_tags, flags):
            total += 1
            correct += g == p
            oov_total += bool(is_oov)
            oov_correct += bool(is_oov) and g == p

    def percent(right, count):
        return 100.0 * right / count if count else None

    scores = {"accuracy": percent(correct, total), "tokens": total}
    if oov is not None:
        scores.update(oov_accuracy=percent(oov_correct, oov_total), oov_tokens=oov_total)
    return scores
