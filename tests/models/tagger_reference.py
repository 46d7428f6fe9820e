"""Slow, obviously correct references of the tagger's graph (zoo.models.tagger.preprocessor):
the word and character ids of a word in Python, the windows of a sentence by their rule, and
tagging through the task model with the arguments the tests read best."""

import numpy as np

from zoo.data.tagger_vocabulary import BOW_ID, EOW_ID, FIRST_CHAR_ID, FIRST_WORD_ID, OOV_ID
from zoo.models import Tagger


def encode(vocabulary, sentences, length=None):
    """The padded model inputs of ``sentences`` (``Sentence`` objects or lists of words), in
    Python, and their labels when every sentence is a ``Sentence``: ``{"words": (N, T),
    "chars": (N, T, C)}`` int32 (``"upos"`` and, with XPOS tags, ``"xpos"`` ``(N, T)``). A
    word's id is looked up after ``str.lower()`` (with ``lowercase``); its characters are
    ``[BOW] + ids + [EOW]``, a long word keeping its first and last characters (the prefix the
    odd one). A sentence longer than ``length`` is a ValueError."""
    word_ids = {w: i + FIRST_WORD_ID for i, w in enumerate(vocabulary.words)}
    char_ids = {c: i + FIRST_CHAR_ID for i, c in enumerate(vocabulary.chars)}
    sentences = list(sentences)
    tagged = bool(sentences) and all(hasattr(s, "upos") for s in sentences)
    forms = [list(s.words) if hasattr(s, "upos") else list(s) for s in sentences]
    longest = max((len(f) for f in forms), default=0)
    length = longest if length is None else length
    if longest > length:
        raise ValueError(f"A sentence has {longest} words, more than length={length}.")
    room = vocabulary.max_word_length - 2
    words = np.zeros((len(forms), length), "int32")
    chars = np.zeros((len(forms), length, vocabulary.max_word_length), "int32")
    for b, sentence in enumerate(forms):
        for t, form in enumerate(sentence):
            words[b, t] = word_ids.get(form.lower() if vocabulary.lowercase else form, OOV_ID)
            ids = [char_ids.get(c, OOV_ID) for c in form]
            if len(ids) > room:
                head = (room + 1) // 2
                ids = ids[:head] + ids[len(ids) - (room - head):]
            ids = [BOW_ID] + ids + [EOW_ID]
            chars[b, t, : len(ids)] = ids
    encoded = {"words": words, "chars": chars}
    for head in ("upos", "xpos") if tagged else ():
        if head == "xpos" and not vocabulary.xpos_tags:
            continue
        labels = np.zeros((len(sentences), length), "int32")
        for b, sentence in enumerate(sentences):
            for t, tag in enumerate(getattr(sentence, head)):
                labels[b, t] = vocabulary.class_id(head, tag)
        encoded[head] = labels
    return encoded


def tagging_windows(length, window):
    """The windows that tag a sentence of ``length`` words: ``[(start, first, end)]``, the
    window reading words ``[start, start + window)`` and keeping the tags of ``[first, end)``:
    windows start every ``max(window // 2, 1)`` words while they end before the sentence does,
    one last window ends with it, and each word takes the window whose centre is nearest (the
    earlier on a tie), found by trying every window."""
    if length <= window:
        return [(0, 0, length)] if length else []
    stride = max(window // 2, 1)
    starts = list(range(0, length - window, stride)) + [length - window]
    owner = [min((s for s in starts if s <= i < s + window),
                 key=lambda s: (abs(2 * (i - s) - (window - 1)), s)) for i in range(length)]
    return [(s, owner.index(s), len(owner) - owner[::-1].index(s)) for s in starts]


_TAGGERS = {}  # (model, vocabulary, window) ids -> (model, vocabulary, its Tagger): one trace


def tag_sentences(model, vocabulary, sentences, window=None, batch_size=64, head="upos",
                  verbose=False):  # fmt: skip
    """The ``head`` tags of ``sentences`` (lists of words) by the task model over the backbone
    ``model`` (Tagger.tag_columns), made once per model, vocabulary and window."""
    key = (id(model), id(vocabulary), window)
    if key not in _TAGGERS:  # the model and vocabulary kept too, so that no id is reused
        tagger = Tagger.from_backbone(model, vocabulary, window=window, copy=False)
        _TAGGERS[key] = (model, vocabulary, tagger)
    tagger = _TAGGERS[key][2]
    return tagger.tag_columns(sentences, batch_size=batch_size, verbose=verbose)[head]
