"""The tagger's vocabulary: words and characters to the ids a tagger of ``zoo.models`` reads.

:class:`TaggerVocabulary` is built from training sentences, saved as JSON beside the model, and
encodes sentences into the tagger's inputs (and labels). The serving SavedModel of
:mod:`zoo.tasks.tagging.serving` does the same encoding in TensorFlow ops, with these ids.
"""

import collections
import json
import os

import numpy as np

from zoo.data.conllu import UPOS_TAGS

__all__ = [
    "BOW_ID",
    "EOW_ID",
    "FIRST_CHAR_ID",
    "FIRST_WORD_ID",
    "OOV_ID",
    "PAD_ID",
    "TaggerVocabulary",
]

PAD_ID = 0  # padding, in both vocabularies
OOV_ID = 1  # an unknown word, or an unknown character
BOW_ID = 2  # the begin-of-word marker of the character sequences
EOW_ID = 3  # the end-of-word marker
FIRST_WORD_ID = 2  # the first vocabulary word: word ids 0 and 1 are PAD_ID and OOV_ID
FIRST_CHAR_ID = 4  # the first vocabulary character: ids 0-3 are PAD_ID, OOV_ID, BOW_ID, EOW_ID
_FORMAT = "zoo.TaggerVocabulary"


def _is_tagged(sentence):
    """A ``zoo.data.Sentence`` (anything with ``words``, ``upos``, ``xpos``), not a word list."""
    return hasattr(sentence, "words") and hasattr(sentence, "upos")


class TaggerVocabulary:
    """The word and character vocabularies of a tagger, and the encoding of sentences.

    Word ids: 0 is padding, 1 is OOV, then the vocabulary words from 2, most frequent first (ties
    in alphabetical order). With ``lowercase`` (the default), words are lowercased before lookup:
    "The" and "the" share one embedding, and case, which tells proper nouns apart, reaches the
    model through the characters, which always keep it.

    Character ids: 0 is padding, 1 an unknown character, 2 and 3 the begin- and end-of-word
    markers, then the characters from 4, most frequent first. A word becomes
    ``[BOW] + chars + [EOW]``, padded to ``max_word_length``; a longer word keeps its first and
    last characters (half of the room each, the prefix taking the odd one), because prefixes and
    suffixes carry its part of speech.

    Args:
        words: the vocabulary words, in id order (ids from 2), already lowercased if
            ``lowercase``.
        chars: the vocabulary characters, in id order (ids from 4).
        xpos_tags: the XPOS tags, in id order (ids from 0); empty when unused.
        lowercase: lowercase words before the lookup.
        max_word_length: C, characters per word with both markers (>= 3).

    Example:
        >>> sentences = [["The", "cat", "sat"], ["the", "dog"]]
        >>> vocabulary = TaggerVocabulary.build(sentences, min_count=2)
        >>> vocabulary.words, vocabulary.word_vocab_size
        (('the',), 3)
        >>> encoded = vocabulary.encode([["The", "cow"]])
        >>> encoded["words"].tolist()
        [[2, 1]]
        >>> encoded["chars"].shape
        (1, 2, 20)
    """

    def __init__(self, words, chars, xpos_tags=(), lowercase=True, max_word_length=20):
        if max_word_length < 3:
            raise ValueError("max_word_length counts both word-boundary markers; it must be >= 3.")
        self.words = tuple(words)
        self.chars = tuple(chars)
        self.xpos_tags = tuple(xpos_tags)
        self.lowercase = bool(lowercase)
        self.max_word_length = int(max_word_length)
        for name in ("words", "chars", "xpos_tags"):
            items = getattr(self, name)
            if len(set(items)) != len(items):
                raise ValueError(f"TaggerVocabulary: {name} has duplicates.")
        if any(len(c) != 1 for c in self.chars):
            raise ValueError("TaggerVocabulary: every entry of chars must be one character.")
        self._word_ids = {w: i + FIRST_WORD_ID for i, w in enumerate(self.words)}
        self._char_ids = {c: i + FIRST_CHAR_ID for i, c in enumerate(self.chars)}
        self._xpos_ids = {t: i for i, t in enumerate(self.xpos_tags)}

    @classmethod
    def build(cls, sentences, min_count=2, min_char_count=1, lowercase=True, max_word_length=20):
        """The vocabulary of training ``sentences`` (:class:`~zoo.data.Sentence` or word lists).

        Words seen at least ``min_count`` times (after lowercasing) and characters seen at
        least ``min_char_count`` times get ids; the XPOS tags of ``Sentence`` inputs are kept
        in sorted order.
        """
        word_counts, char_counts, xpos = collections.Counter(), collections.Counter(), set()
        for sentence in sentences:
            forms = sentence.words if _is_tagged(sentence) else sentence
            if _is_tagged(sentence):
                xpos.update(sentence.xpos)
            for form in forms:
                word_counts[form.lower() if lowercase else form] += 1
                char_counts.update(form)

        def ranked(counts, minimum):
            kept = [item for item, count in counts.items() if count >= minimum]
            return sorted(kept, key=lambda item: (-counts[item], item))

        return cls(
            ranked(word_counts, min_count),
            ranked(char_counts, min_char_count),
            sorted(xpos),
            lowercase=lowercase,
            max_word_length=max_word_length,
        )

    # ------------------------------------------------------------ sizes
    @property
    def word_vocab_size(self):
        return len(self.words) + FIRST_WORD_ID

    @property
    def char_vocab_size(self):
        return len(self.chars) + FIRST_CHAR_ID

    @property
    def num_xpos_tags(self):
        return len(self.xpos_tags)

    def config_overrides(self):
        """The ``zoo.models.TaggerConfig`` fields it fixes: ``tagger_config("small", **it)``."""
        return {
            "word_vocab_size": self.word_vocab_size,
            "char_vocab_size": self.char_vocab_size,
            "max_word_length": self.max_word_length,
            "lowercase": self.lowercase,
        }

    # ------------------------------------------------------------ lookups
    def word_id(self, word):
        """The id of ``word``: its vocabulary id, or ``OOV_ID``."""
        return self._word_ids.get(word.lower() if self.lowercase else word, OOV_ID)

    def char_ids(self, word):
        """``[BOW] + character ids + [EOW]`` of ``word``, unpadded, at most ``max_word_length``."""
        ids = [self._char_ids.get(c, OOV_ID) for c in word]
        room = self.max_word_length - 2
        if len(ids) > room:
            head = (room + 1) // 2
            ids = ids[:head] + ids[len(ids) - (room - head) :]
        return [BOW_ID] + ids + [EOW_ID]

    def encode(self, sentences, length=None):
        """Padded model inputs (and labels) of ``sentences``.

        Args:
            sentences: :class:`~zoo.data.Sentence` objects or lists of word strings.
            length: pad to this many words; default the longest sentence. A longer sentence
                is a ``ValueError`` (nothing is truncated silently).

        Returns:
            A dict of int32 arrays: ``"words"`` ``(N, T)`` and ``"chars"`` ``(N, T, C)`` (the
            model inputs), and, when every sentence is a ``Sentence``, ``"upos"`` ``(N, T)``
            (indices in :data:`~zoo.data.UPOS_TAGS`) and, when the vocabulary has XPOS tags,
            ``"xpos"`` ``(N, T)``. Labels are 0 at padding (the model's mask hides them).
        """
        sentences = list(sentences)
        forms = [s.words if _is_tagged(s) else list(s) for s in sentences]
        longest = max((len(f) for f in forms), default=0)
        length = longest if length is None else length
        if longest > length:
            raise ValueError(f"A sentence has {longest} words, more than length={length}.")
        words = np.zeros((len(forms), length), "int32")
        chars = np.zeros((len(forms), length, self.max_word_length), "int32")
        for b, sentence in enumerate(forms):
            for t, form in enumerate(sentence):
                words[b, t] = self.word_id(form)
                ids = self.char_ids(form)
                chars[b, t, : len(ids)] = ids
        encoded = {"words": words, "chars": chars}
        if sentences and all(_is_tagged(s) for s in sentences):
            upos_ids = {tag: i for i, tag in enumerate(UPOS_TAGS)}
            encoded["upos"] = self._labels(sentences, "upos", upos_ids, length)
            if self.xpos_tags:
                encoded["xpos"] = self._labels(sentences, "xpos", self._xpos_ids, length)
        return encoded

    @staticmethod
    def _labels(sentences, field, ids, length):
        labels = np.zeros((len(sentences), length), "int32")
        for b, sentence in enumerate(sentences):
            for t, tag in enumerate(getattr(sentence, field)):
                if tag not in ids:
                    raise ValueError(
                        f"Sentence {getattr(sentence, 'sent_id', None)!r}: {field} tag {tag!r} "
                        "is not in the vocabulary."
                    )
                labels[b, t] = ids[tag]
        return labels

    # ------------------------------------------------------------ saving
    def get_config(self):
        """Everything that defines the vocabulary, JSON-ready."""
        return {
            "words": list(self.words),
            "chars": list(self.chars),
            "xpos_tags": list(self.xpos_tags),
            "lowercase": self.lowercase,
            "max_word_length": self.max_word_length,
        }

    def __eq__(self, other):
        return isinstance(other, TaggerVocabulary) and self.get_config() == other.get_config()

    def save(self, path):
        """Write the vocabulary as UTF-8 JSON to ``path``."""
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "version": 1, **self.get_config()}, f, ensure_ascii=False)

    @classmethod
    def load(cls, path):
        """Read a vocabulary written by :meth:`save`."""
        with open(os.fspath(path), encoding="utf-8") as f:
            data = json.load(f)
        if data.pop("format", None) != _FORMAT or data.pop("version", None) != 1:
            raise ValueError(
                f"{path} is not a TaggerVocabulary file (format {_FORMAT!r}, version 1)."
            )
        return cls(**data)
