"""The tagger's vocabulary: words, characters and each head's classes, as ids.

:class:`TaggerVocabulary` is built from training sentences and saved as JSON beside the model;
the tagger's preprocessor (:mod:`zoo.models.tagger.preprocessor`) holds it as an asset and
encodes sentences with its ids in TensorFlow ops.
"""

import collections
import json
import os

from zoo.data.conllu import UPOS_TAGS
from zoo.data.lemma_scripts import lemma_script

__all__ = [
    "BOW_ID",
    "HEAD_COLUMNS",
    "HEAD_FIELDS",
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
# What each head predicts: the Sentence field of its gold values, its CoNLL-U column, and the
# vocabulary field of its classes (UPOS has the fixed 17 of UD; the lemma's are edit scripts).
HEAD_FIELDS = {"upos": "upos", "xpos": "xpos", "feats": "feats", "lemma": "lemmas"}
HEAD_COLUMNS = {"upos": "UPOS", "xpos": "XPOS", "feats": "FEATS", "lemma": "LEMMA"}
_CLASS_FIELDS = {"xpos": "xpos_tags", "feats": "feats_tags", "lemma": "lemma_scripts"}


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
        feats_tags: the FEATS bundles (``"Case=Nom|Number=Sing"``, ``"_"``), in id order;
            empty when unused.
        lemma_scripts: the lemma edit scripts (``zoo.data.lemma_scripts``), in id order;
            empty when unused.
        rare_words: the training words seen too rarely for an id (after lowercasing, with
            ``lowercase``), so that the vocabulary knows every word of training
            (:meth:`seen_in_training`); None for a vocabulary saved before it kept them.
        lowercase: lowercase words before the lookup.
        max_word_length: C, characters per word with both markers (>= 3).

    Example:
        >>> sentences = [["The", "cat", "sat"], ["the", "dog"]]
        >>> vocabulary = TaggerVocabulary.build(sentences, min_count=2)
        >>> vocabulary.words, vocabulary.word_vocab_size
        (('the',), 3)
    """

    def __init__(self, words, chars, xpos_tags=(), lowercase=True, max_word_length=20,
                 feats_tags=(), lemma_scripts=(), rare_words=None):
        if max_word_length < 3:
            raise ValueError("max_word_length counts both word-boundary markers; it must be >= 3.")
        self.words = tuple(words)
        self.chars = tuple(chars)
        self.xpos_tags = tuple(xpos_tags)
        self.feats_tags = tuple(feats_tags)
        self.lemma_scripts = tuple(lemma_scripts)
        self.rare_words = None if rare_words is None else tuple(rare_words)
        self.lowercase = bool(lowercase)
        self.max_word_length = int(max_word_length)
        for name in ("words", "chars", "xpos_tags", "feats_tags", "lemma_scripts"):
            items = getattr(self, name)
            if len(set(items)) != len(items):
                raise ValueError(f"TaggerVocabulary: {name} has duplicates.")
        if any(len(c) != 1 for c in self.chars):
            raise ValueError("TaggerVocabulary: every entry of chars must be one character.")
        self._word_ids = {w: i + FIRST_WORD_ID for i, w in enumerate(self.words)}
        self._rare = None  # the set of rare_words, made on first use
        self._class_ids = {
            head: {name: i for i, name in enumerate(self.classes(head))} for head in HEAD_FIELDS
        }

    @classmethod
    def build(cls, sentences, min_count=2, min_char_count=1, lowercase=True, max_word_length=20,
              feats=False, lemmas=False):
        """The vocabulary of training ``sentences`` (:class:`~zoo.data.Sentence` or word lists).

        Words seen at least ``min_count`` times (after lowercasing) and characters seen at
        least ``min_char_count`` times get ids; the XPOS tags of ``Sentence`` inputs are kept
        in sorted order, and with ``feats`` and ``lemmas`` their FEATS bundles and the edit
        scripts of their lemmas (:func:`zoo.data.lemma_scripts.lemma_script`), sorted too.
        """
        word_counts, char_counts, xpos = collections.Counter(), collections.Counter(), set()
        bundles, scripts = set(), set()
        for sentence in sentences:
            forms = sentence.words if _is_tagged(sentence) else sentence
            if _is_tagged(sentence):
                xpos.update(sentence.xpos)
                if feats:
                    bundles.update(sentence.feats)
                if lemmas:
                    scripts.update(map(lemma_script, sentence.words, sentence.lemmas))
            for form in forms:
                word_counts[form.lower() if lowercase else form] += 1
                char_counts.update(form)

        def ranked(counts, minimum):
            kept = [item for item, count in counts.items() if count >= minimum]
            return sorted(kept, key=lambda item: (-counts[item], item))

        rare = sorted(word for word, count in word_counts.items() if count < min_count)

        return cls(
            ranked(word_counts, min_count),
            ranked(char_counts, min_char_count),
            sorted(xpos),
            lowercase=lowercase,
            max_word_length=max_word_length,
            feats_tags=sorted(bundles),
            lemma_scripts=sorted(scripts),
            rare_words=rare,
        )

    # ------------------------------------------------------------ heads
    def classes(self, head):
        """The class names of a tagger head, in id order: UPOS tags for ``"upos"``, the
        vocabulary's XPOS tags, FEATS bundles or lemma edit scripts for ``"xpos"``,
        ``"feats"`` and ``"lemma"``."""
        if head == "upos":
            return UPOS_TAGS
        if head not in _CLASS_FIELDS:
            raise ValueError(f"Unknown tagger head {head!r}; expected one of {tuple(HEAD_FIELDS)}.")
        return getattr(self, _CLASS_FIELDS[head])

    def gold_classes(self, head, sentence):
        """The class name of each word of a :class:`~zoo.data.Sentence` for ``head``: its tag,
        or for ``"lemma"`` the edit script from its form to its lemma."""
        values = getattr(sentence, HEAD_FIELDS[head])
        return tuple(map(lemma_script, sentence.words, values)) if head == "lemma" else values

    def class_id(self, head, name):
        """The id of class ``name`` of ``head``, or None when the vocabulary lacks it."""
        return self._class_ids[head].get(name)

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
        }

    # ------------------------------------------------------------ lookups
    def seen_in_training(self, word):
        """Whether ``word`` (lowercased, with ``lowercase``) was in the training sentences;
        None when the vocabulary does not know (saved before it kept its rare words)."""
        if self.rare_words is None:
            return None
        key = word.lower() if self.lowercase else word
        if self._rare is None:
            self._rare = frozenset(self.rare_words)
        return key in self._word_ids or key in self._rare

    # ------------------------------------------------------------ saving
    def get_config(self):
        """Everything that defines the vocabulary, JSON-ready."""
        return {
            "words": list(self.words),
            "chars": list(self.chars),
            "xpos_tags": list(self.xpos_tags),
            "feats_tags": list(self.feats_tags),
            "lemma_scripts": list(self.lemma_scripts),
            "rare_words": None if self.rare_words is None else list(self.rare_words),
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
