"""The CoNLL 2018 shared task's tagging figures on gold tokenization: UPOS, XPOS, UFeats, AllTags
and Lemmas, as its ``conll18_ud_eval.py`` defines them (Zeman et al. 2018).

With the gold tokenization every gold word is aligned to the system word at its place, so each
figure (the script's F1, equal then to its aligned accuracy) is the share of words whose
columns match. UFeats compares the universal features only; AllTags is UPOS, XPOS and UFeats
all correct; a gold lemma ``_`` counts as correct whatever the system says.
"""

import unicodedata

from zoo.data.conllu import iter_conllu

__all__ = ["CONLL18_TAG_FIGURES", "UNIVERSAL_FEATURES", "conll18_scores", "universal_features"]

CONLL18_TAG_FIGURES = ("UPOS", "XPOS", "UFeats", "AllTags", "Lemmas")
# The features that the shared task's UFeats compares (a layered one, Number[psor], is not).
UNIVERSAL_FEATURES = frozenset((
    "PronType", "NumType", "Poss", "Reflex", "Foreign", "Abbr", "Gender", "Animacy", "Number",
    "Case", "Definite", "Degree", "VerbForm", "Mood", "Tense", "Aspect", "Voice", "Evident",
    "Polarity", "Person", "Polite",
))  # fmt: skip


def universal_features(feats):
    """A FEATS value reduced to its universal features, sorted: what UFeats compares.

    Example:
        >>> universal_features("Number=Sing|Gender=Fem|Number[psor]=Plur")
        'Gender=Fem|Number=Sing'
        >>> universal_features("_")
        ''
    """
    kept = (f for f in feats.split("|") if f.split("=", 1)[0] in UNIVERSAL_FEATURES)
    return "|".join(sorted(kept))


def _form(text):
    return "".join(c for c in text if unicodedata.category(c) != "Zs")


def _words(sentence):
    """(FORM, LEMMA, UPOS, XPOS, universal FEATS) of each word of a ConlluSentence."""
    columns = [sentence.column(name) for name in ("FORM", "LEMMA", "UPOS", "XPOS", "FEATS")]
    return [(form, lemma, upos, xpos, universal_features(feats))
            for form, lemma, upos, xpos, feats in zip(*columns)]  # fmt: skip


def conll18_scores(gold, system):
    """Score a system CoNLL-U file against the gold one, both with the gold tokenization.

    Args:
        gold, system: paths of CoNLL-U files (plain or gzipped): the same sentences and words,
            in order; the system's tag columns may be ``_``.

    Returns:
        ``{"words": N, "UPOS": percent, "XPOS": ..., "UFeats": ..., "AllTags": ...,
        "Lemmas": ..., "correct": {figure: count}}``.

    Raises:
        ValueError: a malformed file, or files whose sentences or words differ (the first
            difference named): their tokenizations are not the same.
    """
    names = (str(gold), str(system))
    correct = dict.fromkeys(CONLL18_TAG_FIGURES, 0)
    words = 0
    system_sentences = iter_conllu(system, require_upos=False)
    for number, gold_sentence in enumerate(iter_conllu(gold), start=1):
        system_sentence = next(system_sentences, None)
        where = f"sentence {number} (line {gold_sentence.line_number} of {names[0]})"
        if system_sentence is None:
            raise ValueError(f"{names[1]} ends before {where}: not the gold tokenization")
        gold_words, system_words = _words(gold_sentence), _words(system_sentence)
        if [_form(w[0]) for w in gold_words] != [_form(w[0]) for w in system_words]:
            raise ValueError(f"{names[1]}, line {system_sentence.line_number}: its words differ "
                             f"from {where}: not the gold tokenization")  # fmt: skip
        for (_, lemma, upos, xpos, feats), (_, s_lemma, s_upos, s_xpos, s_feats) in zip(
                gold_words, system_words):
            words += 1
            correct["UPOS"] += upos == s_upos
            correct["XPOS"] += xpos == s_xpos
            correct["UFeats"] += feats == s_feats
            correct["AllTags"] += (upos, xpos, feats) == (s_upos, s_xpos, s_feats)
            correct["Lemmas"] += lemma == "_" or lemma == s_lemma
    extra = next(system_sentences, None)
    if extra is not None:
        raise ValueError(f"{names[1]}, line {extra.line_number}: a sentence after the last of "
                         f"{names[0]}: not the gold tokenization")  # fmt: skip
    if not words:
        raise ValueError(f"{names[0]}: no words to score")
    scores = {name: 100.0 * count / words for name, count in correct.items()}
    return {"words": words, **scores, "correct": correct}
