"""The encoder-only part-of-speech tagger (UD English-EWT UPOS), built with the functional API.

A word is its (lowercased) word embedding plus a character feature (a convolution over its
characters, max-pooled), so that a word never seen in training still gets a good tag from its
spelling. A stack of transformer encoder blocks reads the sentence; a per-token head gives the
UPOS scores, as softmax logits or as the potentials of a linear-chain CRF (``zoo.layers.CRF``).
:class:`TaggerVocabulary` turns sentences into the model's inputs.
"""

import collections
import json
import os
from dataclasses import dataclass, replace

import keras
import numpy as np

from zoo.layers import (
    CRF,
    CharacterEmbedding,
    TokenAndPositionEmbedding,
    TransformerEncoderBlock,
    crf_decode,
)
from zoo.models.presets import from_presets

__all__ = [
    "BOW_ID",
    "EOW_ID",
    "OOV_ID",
    "PAD_ID",
    "PRESETS",
    "TaggerConfig",
    "TaggerVocabulary",
    "build_tagger",
    "get_config",
    "predict_tags",
]

POSITIONS = ("relative", "learned")
# len(zoo.data.UPOS_TAGS). zoo.data is imported only where labels are encoded: it loads TensorFlow,
# and the model must build on the JAX backend without it.
NUM_UPOS_TAGS = 17


def _upos_tags():
    from zoo.data.conllu import UPOS_TAGS

    return UPOS_TAGS


def _is_tagged(sentence):
    """A ``zoo.data.Sentence`` (anything with ``words``, ``upos``, ``xpos``), not a word list."""
    return hasattr(sentence, "words") and hasattr(sentence, "upos")


@dataclass(frozen=True)
class TaggerConfig:
    """Everything that defines a tagger and how it trains.

    Inputs (take the first three from the vocabulary: ``vocabulary.config_overrides()``):
        word_vocab_size: words in the word vocabulary, with the padding (0) and OOV (1) ids.
        char_vocab_size: characters in the character vocabulary, with its 4 special ids.
        max_word_length: C, characters per word, with the begin- and end-of-word markers.
        max_length: the longest sentence, in words, that ``position="learned"`` has positions
            for (EWT's longest training sentence has 159 words).
        num_tags: K, the UPOS tags (17, :data:`zoo.data.UPOS_TAGS`).
        num_xpos_tags: the XPOS tags of a second head (``vocabulary.num_xpos_tags``); 0 means
            no XPOS head.

    Model:
        d_model, num_heads, ff_dim, num_layers: sizes and depth of the encoder (pre-LN blocks
            with a final norm when ``normalize_first``).
        dropout, attention_dropout: residual (and embedding) dropout, attention-weight dropout.
        activation: the feed-forward activation.
        normalize_first: pre-LN blocks when True, post-LN when False.
        position: ``"relative"``: relative position attention (Shaw et al. 2018), clipped at
            ``max_relative_position``, and no absolute positions; ``"learned"``: a learned
            position embedding added to the words, and plain multi-head attention.
        max_relative_position: k of the relative attention.
        char_embedding_dim, char_filters, char_kernel_size: the character feature
            (``zoo.layers.CharacterEmbedding``): an embedding of each character, one convolution
            over the characters of a word, a max over them, a projection to ``d_model``.
        use_crf: a CRF head (the model outputs potentials ``(B, T, K, K)``; train with
            ``zoo.layers.CRFLoss``, decode with Viterbi) instead of softmax logits ``(B, T, K)``.

    Training (read by the tagger's trainer and vocabulary building):
        lowercase: lowercase words before the word-vocabulary lookup (characters keep case).
        min_word_count: words seen fewer times in training are OOV; the training singletons
            that become OOV teach the model to tag from characters alone.
        word_dropout: the probability with which the training pipeline replaces a word id by
            the OOV id (1), so that every word is also learned from its characters (Kiperwasser
            & Goldberg 2016, Plank et al. 2016). Not applied by the model.
        learning_rate (peak), warmup_steps, weight_decay, clipnorm: AdamW with warm-up.
        ema_momentum: nonzero keeps an exponential moving average of the weights (Polyak
            averaging), which is what is validated, checkpointed and shipped; 0 turns it off.
        label_smoothing: of the softmax head's cross entropy (the CRF has none).
        batch_tokens: the word budget of one batch.
        epochs: training epochs.
    """

    word_vocab_size: int = 10_000
    char_vocab_size: int = 200
    max_word_length: int = 20
    max_length: int = 256
    num_tags: int = NUM_UPOS_TAGS
    num_xpos_tags: int = 0
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 512
    num_layers: int = 3
    dropout: float = 0.3
    attention_dropout: float = 0.1
    activation: str = "gelu"
    normalize_first: bool = True
    position: str = "relative"
    max_relative_position: int = 16
    char_embedding_dim: int = 32
    char_filters: int = 256
    char_kernel_size: int = 3
    use_crf: bool = True
    lowercase: bool = True
    min_word_count: int = 2
    word_dropout: float = 0.25
    learning_rate: float = 2e-3
    warmup_steps: int = 400
    weight_decay: float = 1e-4
    clipnorm: float = 1.0
    ema_momentum: float = 0.998
    label_smoothing: float = 0.0
    batch_tokens: int = 1024
    epochs: int = 16

    def __post_init__(self):
        if self.position not in POSITIONS:
            raise ValueError(f"Unknown position {self.position!r}; expected one of {POSITIONS}.")
        if self.max_word_length < 3:
            raise ValueError("max_word_length counts both word-boundary markers; it must be >= 3.")


# `small` is the EWT model: it must reach >= 95% UPOS on the test split within 20 minutes of
# training on 2 CPU cores. Tagging is local (a word, its affixes and a few neighbours decide
# most tags) and EWT is small (205k training words), so the encoder is shallow and narrow, the
# regularisation strong, and the budget goes into epochs:
#   - d=128, 3 pre-LN blocks, 4 heads, ff=512: 0.6M encoder weights (1.9M with the 8.9k-word
#     embedding). Measured on the 2 cores, shared with another training run: 121 ms per step of
#     1024 words with the CRF (94 ms with softmax), ~30 s per epoch of training.
#   - relative positions (k=16) rather than learned ones: the cue is the distance to the
#     neighbours, not the absolute index, and every distance is trained in every sentence, while
#     learned positions past ~60 words are rarely seen in EWT (mean sentence 16 words).
#   - the character CNN sees the begin/end-of-word markers, so the suffixes (-ly, -ed, -s) and
#     the capitalisation that decide the tags of the ~10% of test words missing from the word
#     vocabulary (min count 2) are in the feature; word dropout 0.25 trains it on every word.
#   - a CRF head: label bigrams (DET ADJ NOUN, AUX VERB) for 323 extra weights.
#   - an exponential moving average of the weights (momentum 0.998, about two epochs), which
#     is what is validated and kept: the raw weights overfit after ~8 epochs.
# With `zoo train tagger` (the best dev epoch kept), measured on this machine while other jobs
# shared it: char_filters 128, word dropout 0.2, no averaging: dev 94.81, test 94.999 (best
# epoch 9 of 16, 22.6 min). These settings (char_filters 256, word dropout 0.25, averaging):
# dev 95.01, test 95.33 (best epoch 15 of 16, 25.1 min): the shipped model. See its MODEL_CARD.
# `tiny` is for tests and demos.
PRESETS = {"small": TaggerConfig()}
PRESETS["tiny"] = replace(
    PRESETS["small"],
    word_vocab_size=200,
    char_vocab_size=64,
    max_word_length=10,
    max_length=64,
    d_model=32,
    num_heads=2,
    ff_dim=64,
    num_layers=1,
    dropout=0.0,
    attention_dropout=0.0,
    max_relative_position=4,
    char_embedding_dim=8,
    char_filters=16,
    ema_momentum=0.0,  # a few hundred steps: the average would lag far behind
    warmup_steps=20,
    batch_tokens=256,
    epochs=2,
)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", use_crf=False)``."""
    return from_presets(PRESETS, preset, "tagger", **overrides)


# ---------------------------------------------------------------- the model
def _head(x, config, name, num_tags):
    scores = keras.layers.Dense(num_tags, name=f"{name}_logits")(x)  # (B, T, K)
    if config.use_crf:
        return CRF(name=f"{name}_crf")(scores)  # (B, T, K, K)
    return scores


def build_tagger(config):
    """A functional tagger: ``{"words", "chars"}`` ids -> per-token UPOS scores.

    Layer names are stable: ``word_embedding`` (a ``TokenAndPositionEmbedding``, with the
    learned positions when ``position="learned"``), ``char_embedding`` (a
    ``CharacterEmbedding``), ``word_and_char`` (their sum), ``embedding_dropout``,
    ``encoder_block_{i}``, ``encoder_norm``, ``upos_logits`` and, with ``use_crf``,
    ``upos_crf`` (likewise ``xpos_logits``/``xpos_crf``).

    Args:
        config: a :class:`TaggerConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"words": (B, T) int32, "chars": (B, T, C) int32}`` (0 is
        padding, word id 1 is OOV; see :class:`TaggerVocabulary`) to the UPOS logits
        ``(B, T, K)``, or with ``use_crf`` the CRF potentials ``(B, T, K, K)``. With an XPOS
        head the output is a dict ``{"upos": ..., "xpos": ...}``. The outputs carry the padding
        mask as their Keras implicit mask (losses and metrics read it): ``words != 0`` (or a
        word with characters; :class:`TaggerVocabulary` gives every word both, padding
        neither). Outputs at padding are meaningless (zero for the CRF).

    Example:
        >>> model = build_tagger(get_config("tiny"))
        >>> model.output_shape
        (None, None, 17, 17)
    """
    words = keras.Input((None,), dtype="int32", name="words")
    chars = keras.Input((None, config.max_word_length), dtype="int32", name="chars")

    x = TokenAndPositionEmbedding(
        config.word_vocab_size,
        config.d_model,
        max_length=config.max_length,
        position="learned" if config.position == "learned" else None,
        mask_zero=True,
        name="word_embedding",
    )(words)  # (B, T, D), masked where words == 0
    c = CharacterEmbedding(
        config.char_vocab_size,
        config.d_model,
        char_dim=config.char_embedding_dim,
        filters=config.char_filters,
        kernel_size=config.char_kernel_size,
        name="char_embedding",
    )(chars)  # (B, T, D), masked where a word has no characters
    # Merging keeps a mask only when every input has one; the two agree on padding words.
    x = keras.layers.Add(name="word_and_char")([x, c])  # (B, T, D)
    x = keras.layers.Dropout(config.dropout, name="embedding_dropout")(x)
    if config.position == "relative":
        attention = "relative"
        attention_kwargs = {"max_relative_position": config.max_relative_position}
    else:
        attention, attention_kwargs = "mha", None
    for i in range(config.num_layers):
        x = TransformerEncoderBlock(
            num_heads=config.num_heads,
            ff_dim=config.ff_dim,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation=config.activation,
            normalize_first=config.normalize_first,
            attention=attention,
            attention_kwargs=attention_kwargs,
            name=f"encoder_block_{i}",
        )(x)
    if config.normalize_first:
        x = keras.layers.LayerNormalization(epsilon=1e-5, name="encoder_norm")(x)

    outputs = _head(x, config, "upos", config.num_tags)
    if config.num_xpos_tags:
        outputs = {"upos": outputs, "xpos": _head(x, config, "xpos", config.num_xpos_tags)}
    return keras.Model({"words": words, "chars": chars}, outputs, name="tagger")


def _decode(scores, mask):
    scores = np.asarray(scores)
    if scores.ndim == 4:  # CRF potentials
        return np.asarray(crf_decode(scores, mask)[0])
    return np.where(mask, scores.argmax(-1), 0).astype("int32")


def predict_tags(model, inputs, batch_size=64):
    """The tag ids a tagger predicts: Viterbi for a CRF head, the argmax otherwise.

    Args:
        model: a model from :func:`build_tagger`.
        inputs: ``{"words": (N, T), "chars": (N, T, C)}`` arrays, as from
            :meth:`TaggerVocabulary.encode` (other keys are ignored).
        batch_size: sentences per model call.

    Returns:
        ``(N, T)`` int32 tag ids, 0 at padding; a dict of them when the model has an XPOS head.
    """
    words, chars = np.asarray(inputs["words"]), np.asarray(inputs["chars"])
    batches = []
    for start in range(0, len(words), batch_size):
        rows = slice(start, start + batch_size)
        batch = {"words": words[rows], "chars": chars[rows]}
        outputs = model(batch, training=False)
        mask = batch["words"] != 0
        if isinstance(outputs, dict):
            batches.append({name: _decode(scores, mask) for name, scores in outputs.items()})
        else:
            batches.append(_decode(outputs, mask))
    if batches and isinstance(batches[0], dict):
        return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    if not batches:
        return np.zeros(words.shape, "int32")
    return np.concatenate(batches)


# ---------------------------------------------------------------- the vocabulary
PAD_ID = 0  # padding, in both vocabularies
OOV_ID = 1  # an unknown word, or an unknown character
BOW_ID = 2  # the begin-of-word marker of the character sequences
EOW_ID = 3  # the end-of-word marker
_NUM_WORD_SPECIALS = 2
_NUM_CHAR_SPECIALS = 4
_FORMAT = "zoo.TaggerVocabulary"


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
        self._word_ids = {w: i + _NUM_WORD_SPECIALS for i, w in enumerate(self.words)}
        self._char_ids = {c: i + _NUM_CHAR_SPECIALS for i, c in enumerate(self.chars)}
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
        return len(self.words) + _NUM_WORD_SPECIALS

    @property
    def char_vocab_size(self):
        return len(self.chars) + _NUM_CHAR_SPECIALS

    @property
    def num_xpos_tags(self):
        return len(self.xpos_tags)

    def config_overrides(self):
        """The :class:`TaggerConfig` fields this vocabulary fixes: ``get_config("small", **it)``."""
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
            upos_ids = {tag: i for i, tag in enumerate(_upos_tags())}
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
