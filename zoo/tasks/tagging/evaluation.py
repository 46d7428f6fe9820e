"""Score a tagger on a UD English-EWT split, per head (UPOS, XPOS, FEATS, lemma), overall and on
OOV words; or on any CoNLL-U file with the CoNLL 2018 shared task's figures."""

import json
import os
import tempfile

from zoo.data import load_ud_english_ewt
from zoo.data.conllu import iter_conllu
from zoo.data.tagger_vocabulary import HEAD_COLUMNS, HEAD_FIELDS
from zoo.evaluation.conll18 import conll18_scores
from zoo.evaluation.tagging import tagging_accuracy

__all__ = ["CONLL18_FIGURES", "evaluate_tagger", "evaluate_tagger_file"]


def evaluate_tagger(tagger, split, output_dir=None, sentences=None, heads=None, verbose=False):
    """Tag a UD English-EWT split and score every head, overall and on OOV words.

    A word is out of vocabulary when the model has no embedding for it (its word id is the
    OOV id: unseen in training, or seen fewer than ``min_word_count`` times), so that it is
    tagged from its characters and its context alone.

    Args:
        tagger: a :class:`zoo.models.Tagger`.
        split: ``"train"``, ``"dev"`` or ``"test"`` (the name in the report).
        output_dir: where to write ``{split}.json`` (the scores) and ``{split}.tags.tsv``
            (word, gold and predicted tags, a blank line between sentences); None writes
            nothing.
        sentences: the ``Sentence`` objects to tag; the EWT split by default.
        heads: the heads to score; by default all the model's (``"upos"``, and any of
            ``"xpos"``, ``"feats"``, ``"lemma"``).
        verbose: draw a progress bar of the tagging on stderr (every head in one pass).

    Returns:
        ``{head: scores}`` with the scores of :func:`tagging_accuracy`, plus ``"split"``.
    """
    sentences = load_ud_english_ewt(split) if sentences is None else sentences
    if heads is None:
        heads = tuple(tagger.heads)
    words = [list(s.words) for s in sentences]
    oov = tagger.out_of_vocabulary(words)
    report = {"split": split}
    predictions = tagger.tag_columns(words, verbose=verbose)
    for head in heads:
        gold = [list(getattr(s, HEAD_FIELDS[head])) for s in sentences]
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
                        columns += [getattr(sentence, HEAD_FIELDS[head])[t],
                                    predictions[head][i][t]]
                    f.write("\t".join([*columns, str(int(oov[i][t]))]) + "\n")
                f.write("\n")
    return report


# The CoNLL 2018 figures and the heads each needs; a figure whose head the model lacks is not
# reported (its column is blank in the predicted file, which would score nothing real).
CONLL18_FIGURES = {"UPOS": ("upos",), "XPOS": ("xpos",), "UFeats": ("feats",),
                   "AllTags": ("upos", "xpos", "feats"), "Lemmas": ("lemma",)}  # fmt: skip


def evaluate_tagger_file(tagger, path, output_dir=None, verbose=False):
    """Tag the words of a CoNLL-U file (gold tokenization) and score them as the CoNLL 2018
    shared task does (:func:`zoo.evaluation.conll18_scores`), plus UPOS on the words without an
    embedding (OOV) and on the words that training never had (unseen).

    The predicted file is the gold file with the model's columns filled and the tag columns
    it has no head for (XPOS, FEATS, LEMMA) blanked to ``_``, so that no gold value reaches the
    scores. Its name in ``output_dir`` is the gold file's stem with
    ``.predicted.conllu``; the scores go to ``.json`` beside it.

    Args:
        tagger: a :class:`zoo.models.Tagger`.
        path: the gold CoNLL-U file, plain or gzipped.
        output_dir: where to write the predicted file and the scores (None: a temporary
            folder, removed after).
        verbose: draw a progress bar of the tagging on stderr.

    Returns:
        ``{"file", "words", "figures": {name: accuracy}, "oov": {...}, "unseen": {...},
        "predicted"}``; the figures are those of :data:`CONLL18_FIGURES` whose heads the
        model has; ``"unseen"`` is None when the vocabulary does not list its training words
        (one saved before it did).
    """
    gold = list(iter_conllu(path))
    words = [list(sentence.words) for sentence in gold]
    predictions = tagger.tag_columns(words, verbose=verbose)
    stem = os.path.basename(os.fspath(path)).removesuffix(".gz").removesuffix(".conllu")
    with tempfile.TemporaryDirectory() as scratch:
        folder = output_dir or scratch
        os.makedirs(folder, exist_ok=True)
        predicted = os.path.join(folder, f"{stem}.predicted.conllu")
        with open(predicted, "w", encoding="utf-8", newline="") as f:
            for i, sentence in enumerate(gold):
                count = len(sentence.word_lines)
                columns = {column: ("_",) * count for column in ("XPOS", "FEATS", "LEMMA")}
                for head, values in predictions.items():
                    columns[HEAD_COLUMNS[head]] = values[i]
                f.write(sentence.filled(**columns).text())
        scores = conll18_scores(path, predicted)
        oov = tagger.out_of_vocabulary(words)
        upos = [list(sentence.column("UPOS")) for sentence in gold]
        report = {
            "file": os.fspath(path),
            "words": scores["words"],
            "figures": {name: scores[name] for name, needs in CONLL18_FIGURES.items()
                        if set(needs) <= set(predictions)},  # fmt: skip
            "oov": tagging_accuracy(upos, predictions["upos"], oov),
            "unseen": _unseen_accuracy(tagger.preprocessor.vocabulary, words, upos,
                                       predictions["upos"]),
            "predicted": predicted if output_dir else None,
        }
        if output_dir:
            with open(os.path.join(output_dir, f"{stem}.json"), "w") as f:
                json.dump(report, f, indent=2)
    return report


def _unseen_accuracy(vocabulary, words, gold, predicted):
    """UPOS accuracy on the words that the training data never had (None: not known)."""
    if vocabulary.rare_words is None:  # saved before the vocabulary kept them
        return None
    unseen = [[not vocabulary.seen_in_training(w) for w in sentence] for sentence in words]
    scores = tagging_accuracy(gold, predicted, unseen)
    return {"unseen_accuracy": scores["oov_accuracy"], "unseen_tokens": scores["oov_tokens"]}
