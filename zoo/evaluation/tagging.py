"""Tagging accuracy: overall and on out-of-vocabulary words, per head (UPOS, XPOS)."""

import json
import os

from zoo.data import load_ud_english_ewt
from zoo.data.tagger_vocabulary import OOV_ID
from zoo.models.tagger import tagger_heads


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


def evaluate_tagger(
    model, vocabulary, split, output_dir=None, sentences=None, heads=None, verbose=False
):
    """Tag a UD English-EWT split and score every head, overall and on OOV words.

    A word is out of vocabulary when the model has no embedding for it (its word id is the
    OOV id: unseen in training, or seen fewer than ``min_word_count`` times), so that it is
    tagged from its characters and its context alone.

    Args:
        model: a tagger from ``zoo.models.build_tagger``.
        vocabulary: its ``zoo.data.TaggerVocabulary``.
        split: ``"train"``, ``"dev"`` or ``"test"`` (the name in the report).
        output_dir: where to write ``{split}.json`` (the scores) and ``{split}.tags.tsv``
            (word, gold and predicted tags, a blank line between sentences); None writes
            nothing.
        sentences: the ``Sentence`` objects to tag; the EWT split by default.
        heads: the heads to score; ``("upos", "xpos")`` when the model has an XPOS head.
        verbose: draw a progress bar of the tagging on stderr (one per head).

    Returns:
        ``{head: scores}`` with the scores of :func:`tagging_accuracy`, plus ``"split"``.
    """
    from zoo.decoding import tag_sentences  # decoding needs the trained model, not the reverse

    sentences = load_ud_english_ewt(split) if sentences is None else sentences
    if heads is None:
        heads = tuple(tagger_heads(model))
    words = [list(s.words) for s in sentences]
    oov = [[vocabulary.word_id(w) == OOV_ID for w in sentence] for sentence in words]
    report, predictions = {"split": split}, {}
    for head in heads:
        predictions[head] = tag_sentences(model, vocabulary, words, head=head, verbose=verbose)
        gold = [list(getattr(s, head)) for s in sentences]
        report[head] = tagging_accuracy(gold, predictions[head], oov)
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        with open(os.path.join(output_dir, f"{split}.json"), "w") as f:
            json.dump(report, f, indent=2)
        with open(os.path.join(output_dir, f"{split}.tags.tsv"), "w", encoding="utf-8") as f:
            f.write("\t".join(["word", *(f"gold_{h}\tpredicted_{h}" for h in heads), "oov"]))
            f.write("\n")
            for i, sentence in enumerate(sentences):
                for t, word in enumerate(sentence.words):
                    columns = [word]
                    for head in heads:
                        columns += [getattr(sentence, head)[t], predictions[head][i][t]]
                    f.write("\t".join([*columns, str(int(oov[i][t]))]) + "\n")
                f.write("\n")
    return report
