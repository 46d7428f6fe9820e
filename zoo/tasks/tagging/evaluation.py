"""Score a tagger on a UD English-EWT split, per head (UPOS, XPOS), overall and on OOV words."""

import json
import os

from zoo.data import load_ud_english_ewt
from zoo.data.tagger_vocabulary import OOV_ID
from zoo.evaluation.tagging import tagging_accuracy
from zoo.models.tagger import tagger_heads
from zoo.tasks.tagging.search import tag_sentences

__all__ = ["evaluate_tagger"]


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
