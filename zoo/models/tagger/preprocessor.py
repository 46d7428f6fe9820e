"""The tagger's preprocessor: sentences or tokens -> the backbone's inputs, and its scores -> tags.

A Keras layer in keras-hub's shape holding the :class:`~zoo.data.TaggerVocabulary` as an asset,
and the one implementation of the tagger's text processing, in TensorFlow ops (the training
pipeline, ``Tagger.tag`` and the SavedModel all run it). It lowercases with
``tf.strings.lower``, which equals ``str.lower`` on context-dependent letters too (the tests
check them), with NULs kept.
"""

import os

import keras
import tensorflow as tf
from keras_hub.models import Preprocessor

from zoo.data.conllu import UPOS_TAGS
from zoo.data.tagger_vocabulary import (
    BOW_ID,
    EOW_ID,
    FIRST_CHAR_ID,
    FIRST_WORD_ID,
    OOV_ID,
    PAD_ID,
    TaggerVocabulary,
)
from zoo.data.utf8 import repair_utf8
from zoo.layers import crf_decode

__all__ = ["OUTPUT_NAMES", "PYTHON_WHITESPACE", "TaggerPreprocessor", "tag_graph", "window_plan"]

VOCABULARY_ASSET = "vocabulary.json"  # the TaggerVocabulary in the .keras file's assets
# The output of each head: UPOS tags keep the name of the first signature's only head.
OUTPUT_NAMES = {"upos": "tags", "xpos": "xpos_tags", "feats": "feats", "lemma": "lemmas"}
_CASINGS = "ltuk"  # the casing classes of zoo.data.lemma_scripts, by index
# The characters for which Python's str.isspace() is true: those that str.split() splits on.
PYTHON_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_WHITESPACE_RUN = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in PYTHON_WHITESPACE) + "]+"


@keras.saving.register_keras_serializable(package="zoo")
class TaggerPreprocessor(Preprocessor):
    """Tokens -> ``{"words", "chars"}`` windows for the backbone; its scores -> tags.

    Args:
        vocabulary: a :class:`~zoo.data.TaggerVocabulary`, the path of its JSON file, or None
            (a model being loaded: the asset gives it).
        window: the most words per backbone call (its positions); a longer sentence is tagged
            in overlapping windows (:func:`window_plan`).

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> vocabulary = TaggerVocabulary.build([["The", "cat", "sat"], ["the", "dog"]])
        >>> preprocessor = TaggerPreprocessor(vocabulary, window=8)
        >>> tokens = preprocessor.split(tf.constant(["The  cow sat", ""]))
        >>> tokens.to_list()
        [[b'The', b'cow', b'sat'], []]
        >>> word_ids, char_ids = preprocessor.encode(tokens.flat_values)
        >>> word_ids.numpy().tolist(), char_ids.shape
        ([2, 1, 1], TensorShape([3, 20]))
    """

    def __init__(self, vocabulary=None, window=256, **kwargs):
        super().__init__(**kwargs)
        self.window = window
        self.set_vocabulary(vocabulary)

    def set_vocabulary(self, vocabulary):
        """Take a :class:`~zoo.data.TaggerVocabulary`, the path of its JSON file, or None."""
        if vocabulary is not None and not isinstance(vocabulary, TaggerVocabulary):
            vocabulary = TaggerVocabulary.load(vocabulary)
        self.vocabulary = vocabulary
        if vocabulary is None:
            return
        self.word_table = _lookup_table(vocabulary.words, FIRST_WORD_ID)
        self.char_table = _lookup_table(vocabulary.chars, FIRST_CHAR_ID)
        self._names = {"upos": tuple(UPOS_TAGS), "xpos": vocabulary.xpos_tags,
                       "feats": vocabulary.feats_tags}  # fmt: skip
        self._class_ids = {head: _lookup_table(names, 0, default=-1)
                           for head, names in self._names.items()}  # fmt: skip
        self._scripts = _script_table(vocabulary.lemma_scripts)

    def with_window(self, window, backbone):
        """A copy for ``backbone``, whose sizes the vocabulary must have, reading at most
        ``window`` tokens per call (None: the backbone's positions), with lookup tables of its
        own (a SavedModel tracks them)."""
        vocabulary, heads = self.vocabulary, backbone.heads
        found = (backbone.word_embedding.vocab_size, backbone.char_embedding.vocab_size,
                 backbone.input["chars"].shape[-1])  # fmt: skip
        expected = (vocabulary.word_vocab_size, vocabulary.char_vocab_size,
                    vocabulary.max_word_length)  # fmt: skip
        if found != expected:
            raise ValueError(
                f"The vocabulary has (word_vocab_size, char_vocab_size, max_word_length) = "
                f"{expected} but the model {backbone.name!r} has {found}: not its vocabulary."
            )
        for head, spec in heads.items():
            if spec.num_tags != len(vocabulary.classes(head)):
                raise ValueError(
                    f"The model's {head.upper()} head has {spec.num_tags} classes but the "
                    f"vocabulary {len(vocabulary.classes(head))}: not its vocabulary."
                )
        positions = backbone.word_embedding.max_length
        if window is None:
            if positions is None:
                raise ValueError("The model's word embedding has no max_length: pass window.")
            window = positions
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}.")
        if positions is not None and window > positions:
            raise ValueError(f"window={window} is more than the model's max_length={positions}.")
        return type(self)(vocabulary, window=window)

    # ------------------------------------------------------------------ text -> tokens
    @staticmethod
    def split(sentences):
        """``(B,)`` sentences (any bytes) -> ``(B, None)`` ragged tokens: Python's
        ``str.split()`` on valid UTF-8 (an invalid sequence becomes U+FFFD)."""
        texts = tf.strings.regex_replace(repair_utf8(sentences), _WHITESPACE_RUN, " ")
        return tf.strings.split(texts)  # splits on " ", drops empty tokens

    @staticmethod
    def given_tokens(tokens, lengths):
        """``(B, T)`` tokens (any bytes) padded after each row's ``lengths`` ``(B,)`` -> ``(B,
        None)`` ragged tokens of valid UTF-8; a length out of range fails the request."""
        count = tf.cast(tf.shape(tokens)[1], lengths.dtype)
        checks = [
            tf.debugging.assert_equal(tf.shape(lengths)[0], tf.shape(tokens)[0],
                                      message="lengths needs one length per row of tokens"),
            tf.debugging.assert_non_negative(lengths, message="a length is negative"),
            tf.debugging.assert_less_equal(lengths, count,
                                           message="a length is more than the tokens given"),
        ]  # fmt: skip
        with tf.control_dependencies(checks):
            return tf.RaggedTensor.from_tensor(repair_utf8(tokens), lengths=lengths)

    # ------------------------------------------------------------------ tokens -> ids
    def encode(self, words):
        """The ids of ``words`` ``(N,)`` (valid UTF-8): ``(word_ids (N,), char_ids (N, C))``
        int32. A word is looked up lowercased (with the vocabulary's ``lowercase``); its
        characters are ``[BOW] + chars + [EOW]``, a long word keeping its first and last ones.
        """
        vocabulary = self.vocabulary
        keys = lowercase(words) if vocabulary.lowercase else words
        word_ids = tf.cast(self.word_table.lookup(keys), tf.int32)  # (N,)
        chars = tf.strings.unicode_split(words, "UTF-8")  # (N, None): code points
        # A long word keeps its first `head` and last `tail` characters. Worked out on the flat
        # characters with ragged ranges: a ragged tensor's row ids (which broadcasting and
        # ragged.boolean_mask use) cost N x the longest word in memory in TensorFlow.
        room = vocabulary.max_word_length - 2
        head = (room + 1) // 2
        tail = room - head
        lengths = chars.row_lengths()  # (N,)
        position = tf.ragged.range(lengths).flat_values  # each character's index in its word
        from_end = tf.ragged.range(lengths - 1, -1, -1).flat_values  # and counted from its end
        keep = tf.logical_or(position < head, from_end < tail)
        kept = tf.boolean_mask(self.char_table.lookup(chars.flat_values), keep)
        char_ids = tf.RaggedTensor.from_row_lengths(kept, tf.minimum(lengths, room), validate=False)
        markers = tf.ones_like(tf.expand_dims(lengths, 1))  # (N, 1)
        char_ids = tf.concat([markers * BOW_ID, char_ids, markers * EOW_ID], axis=1)
        char_ids = char_ids.to_tensor(PAD_ID, shape=[None, vocabulary.max_word_length])
        return word_ids, tf.cast(char_ids, tf.int32)  # (N,), (N, C)

    def unknown(self, words):
        """Whether each of ``words`` ``(N,)`` has no word embedding (its id is the OOV id)."""
        return tf.equal(self.encode(words)[0], OOV_ID)

    def windows(self, tokens):
        """The backbone's inputs of ``tokens`` ``(B, None)`` ragged: ``(inputs, real, kept)``,
        ``inputs = {"words": (M, T), "chars": (M, T, C)}`` over the M windows of
        :func:`window_plan`, ``real`` ``(M, T)`` the words read, ``kept`` ``(M, T)`` those
        whose tags the window gives (in order, window after window: the tokens in order)."""
        lengths = tokens.row_lengths()  # (B,) int64
        sentence, start, first, end = window_plan(lengths, self.window)  # (M,) each
        size = tf.minimum(tf.gather(lengths, sentence), self.window)  # (M,): words read
        offsets = tf.range(tf.reduce_max(size))[tf.newaxis]  # (1, T)
        real = offsets < size[:, tf.newaxis]  # (M, T)
        position = start[:, tf.newaxis] + offsets  # (M, T): in the sentence
        kept = real & (position >= first[:, tf.newaxis]) & (position < end[:, tf.newaxis])
        words = tokens.flat_values
        word_ids, char_ids = self.encode(words)
        padding = tf.size(words, tf.int64)  # the index of an all-padding word
        row_starts = tokens.row_starts()
        index = tf.where(real, tf.gather(row_starts, sentence)[:, tf.newaxis] + position, padding)
        word_ids = tf.concat([word_ids, [PAD_ID]], axis=0)  # (N + 1,)
        char_ids = tf.concat([char_ids, tf.zeros_like(char_ids[:1])], axis=0)  # (N + 1, C)
        inputs = {"words": tf.gather(word_ids, index), "chars": tf.gather(char_ids, index)}
        return inputs, real, kept

    def call(self, x, y=None, sample_weight=None):
        """What ``fit`` feeds the backbone: sentences (``(B,)`` strings, split as :meth:`split`
        does) or ``(B, None)`` ragged tokens -> ``{"words", "chars"}``, each sentence cut to the
        window; with ``y`` (``{head: (B, None) ragged tags}``, or the UPOS tags alone) their
        class ids too, 0 at padding (the outputs' mask leaves it out). A lemma head's classes
        are edit scripts that ``zoo train tagger`` derives from the lemmas: refused here."""
        if not isinstance(x, tf.RaggedTensor):
            x = self.split(tf.convert_to_tensor(x, tf.string))
        tokens = x[:, : self.window]
        word_ids, char_ids = self.encode(tokens.flat_values)
        inputs = {"words": tokens.with_flat_values(word_ids).to_tensor(PAD_ID),
                  "chars": tokens.with_flat_values(char_ids).to_tensor(PAD_ID)}  # fmt: skip
        if y is None:
            return inputs
        labels = {}
        for head, tags in (y if isinstance(y, dict) else {"upos": y}).items():
            if head not in self._class_ids:
                raise ValueError(f"fit() on strings takes the tags of UPOS, XPOS and FEATS, not "
                                 f"{head!r}: a lemma head's edit scripts come from `zoo train "
                                 "tagger` (zoo.training.train)")  # fmt: skip
            ids = self._class_ids[head].lookup(tags[:, : self.window].flat_values)
            known = tf.debugging.assert_non_negative(
                ids, message=f"a {head} tag that the vocabulary lacks")
            with tf.control_dependencies([known]):
                ids = tf.cast(ids, tf.int32)
            labels[head] = tokens.with_flat_values(ids).to_tensor(0)  # (B, T)
        labels = labels if len(labels) > 1 else labels["upos"]
        return keras.utils.pack_x_y_sample_weight(inputs, labels, sample_weight)

    # ------------------------------------------------------------------ scores -> tags
    def decode(self, head, ids, words):
        """The names of class ``ids`` ``(N,)`` of ``head`` for ``words`` ``(N,)``: its tags,
        or for ``"lemma"`` the lemmas that the edit scripts make of the words."""
        if head == "lemma":
            return _apply_scripts(words, ids, self._scripts)
        return tf.gather(tf.constant(self._names[head] or ("",), tf.string), ids)

    # ------------------------------------------------------------------ the .keras file
    def save_assets(self, dir_path):
        self.vocabulary.save(os.path.join(dir_path, VOCABULARY_ASSET))

    def load_assets(self, dir_path):
        self.set_vocabulary(os.path.join(dir_path, VOCABULARY_ASSET))

    def get_config(self):
        # Not Preprocessor's: the vocabulary is an asset, not a serialized layer.
        return {**keras.layers.Layer.get_config(self), "window": self.window}


def tag_graph(backbone, preprocessor, tokens):
    """Tag ``tokens`` ``(B, None)`` ragged with ``backbone``, in TensorFlow ops: ``{"tokens":
    (B, T), "lengths": (B,)}`` and one ``(B, T)`` output per head of the backbone
    (:data:`OUTPUT_NAMES`), padded with ``""``."""
    heads = backbone.heads
    lengths = tokens.row_lengths()  # (B,) int64
    words = tokens.flat_values  # (N,): every token of the request

    def tag_ids():  # per head (N,)
        inputs, real, kept = preprocessor.windows(tokens)
        outputs = backbone(inputs, training=False)  # (M, T, K[, K]) per head
        outputs = outputs if isinstance(outputs, dict) else {"upos": outputs}
        found = []
        for head, spec in heads.items():
            if spec.use_crf:  # CRF potentials (M, T, K, K)
                ids, _ = crf_decode(outputs[head], real)
            else:
                ids = tf.argmax(outputs[head], axis=-1, output_type=tf.int32)
            # Window after window, each keeps its run of words: the tokens in order.
            found.append(tf.boolean_mask(tf.convert_to_tensor(ids), kept))  # (N,)
        return tuple(found)

    ids = tf.cond(tf.size(words) > 0, tag_ids,
                  lambda: tuple(tf.zeros([0], tf.int32) for _ in heads))  # fmt: skip
    outputs = {"tokens": tokens.to_tensor(default_value=""), "lengths": tf.cast(lengths, tf.int32)}
    for head, head_ids in zip(heads, ids):
        names = preprocessor.decode(head, head_ids, words)  # (N,)
        tags = tf.RaggedTensor.from_row_lengths(names, lengths, validate=False)
        outputs[OUTPUT_NAMES[head]] = tags.to_tensor(default_value="")
    return outputs


def window_plan(lengths, window):
    """The windows that tag sentences of ``lengths`` tokens, and the tokens each one tags.

    A sentence of at most ``window`` tokens is one window; a longer one is read in windows of
    ``window`` tokens that start every ``stride = max(window // 2, 1)`` tokens while they end
    before the sentence does, and one last window that ends with it. Each token takes its tag
    from the window whose centre is nearest to it (on a tie, the earlier one): each window
    keeps a contiguous run of its tokens, and the runs tile the sentence. An empty sentence has
    no windows.

    Args:
        lengths: ``(B,)`` int64, the number of tokens of each sentence.
        window: the most tokens per window, a Python ``int`` >= 1.

    Returns:
        ``(sentence, start, first, end)``, each ``(M,)`` int64, one entry per window, the
        windows of each sentence in order and the sentences in order: window ``m`` reads
        tokens ``[start, start + min(window, length))`` of sentence ``sentence[m]`` and its
        tags are kept for tokens ``[first, end)``.

    Example:
        >>> [t.numpy().tolist() for t in window_plan(tf.constant([10, 0, 2], tf.int64), 4)]
        [[0, 0, 0, 0, 2], [0, 2, 4, 6, 0], [0, 3, 5, 7, 0], [3, 5, 7, 10, 2]]
    """
    lengths = tf.convert_to_tensor(lengths, tf.int64)
    stride = max(window // 2, 1)
    several = (lengths - window + stride - 1) // stride + 1
    count = tf.where(lengths > window, several, tf.minimum(lengths, 1))  # (B,)
    sentence = tf.repeat(tf.range(tf.size(lengths, tf.int64)), count)  # (M,)
    k = tf.ragged.range(count).flat_values  # (M,): the window's index in its sentence
    length = tf.gather(lengths, sentence)  # (M,)
    latest = tf.maximum(length - window, 0)  # the start of the last window

    def start_of(index):
        return tf.minimum(index * stride, latest)

    start = start_of(k)
    # Token i is nearer the centre of window k than of window k + 1 (or as near) exactly when
    # 2 i <= start_k + start_{k+1} + window - 1.
    first = tf.where(k == 0, tf.zeros_like(k), (start_of(k - 1) + start + window - 1) // 2 + 1)
    last = tf.equal(k, tf.gather(count, sentence) - 1)
    end = tf.where(last, length, (start + start_of(k + 1) + window - 1) // 2 + 1)
    return sentence, start, first, end


def lowercase(words):
    """``str.lower()`` of each word of ``words`` ``(N,)``, with NULs kept.

    ``tf.strings.lower`` stops at a NUL, so each word is lowercased piece by piece between its
    NULs, and the NULs are put back.
    """
    pieces = tf.strings.split(words, sep="\x00")  # (N, None)
    lowered = tf.strings.lower(pieces, encoding="utf-8")
    # 0 at each word's last piece; a ragged range, not a comparison with an (N, 1) tensor,
    # which would broadcast to N x the most pieces of a word (see encode).
    from_end = tf.ragged.range(pieces.row_lengths() - 1, -1, -1).flat_values
    joined = tf.strings.join([lowered.flat_values, tf.where(from_end == 0, "", "\x00")])
    # A segment join by row, not a ragged reduce_join, whose row ids are as costly.
    row = tf.searchsorted(pieces.row_splits[1:], tf.range(tf.size(joined, tf.int64)), "right")
    return tf.strings.unsorted_segment_join(joined, row, tf.size(words))  # (N,)


def _lookup_table(keys, first_id, default=OOV_ID):
    """A table from ``keys`` to ``first_id, first_id + 1, ...``; anything else is
    ``default``."""
    keys = list(keys)
    values = list(range(first_id, first_id + len(keys)))
    if not keys:  # a table cannot be empty; "" is never a token, nor a character, nor a tag
        keys, values = [""], [default]
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.string), tf.constant(values, tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=default)


def _script_table(scripts):
    """The fields of each lemma edit script (``zoo.data.lemma_scripts``), as constants indexed
    by script id: absolute or not, the absolute lemma, the casing, the cuts, prefix, suffix."""
    fields = {"absolute": [], "lemma": [], "casing": [], "start": [], "end": [], "prefix": [],
              "suffix": []}  # fmt: skip
    for script in scripts or ["="]:
        absolute = script.startswith("=")
        if absolute:
            casing, start, end, prefix_length, rest = "l", 0, 0, 0, ""
        else:
            casing, start, end, prefix_length, rest = script.split(":", 4)
        values = (absolute, script[1:] if absolute else "", _CASINGS.index(casing), int(start),
                  int(end), rest[: int(prefix_length)], rest[int(prefix_length):])  # fmt: skip
        for name, value in zip(fields, values):
            fields[name].append(value)
    return {name: tf.constant(values) for name, values in fields.items()}


def _apply_scripts(words, script_ids, table):
    """:func:`zoo.data.lemma_scripts.apply_lemma_script` in TensorFlow: the lemma that each
    word's predicted script makes of it, the word itself where the script does not apply.

    Args:
        words: ``tf.string`` ``(N,)``, valid UTF-8.
        script_ids: ``(N,)`` int32, indices of the vocabulary's lemma scripts.
        table: :func:`_script_table` of those scripts.
    """
    field = {name: tf.gather(values, script_ids) for name, values in table.items()}
    lowered = lowercase(words)
    length = tf.strings.length(lowered, unit="UTF8_CHAR")
    applies = field["start"] + field["end"] < length
    # substr fails on a position past the end: where the script does not apply, cut nothing.
    kept = tf.strings.substr(lowered, tf.where(applies, field["start"], 0),
                             tf.maximum(length - field["start"] - field["end"], 0),
                             unit="UTF8_CHAR")  # fmt: skip
    result = tf.strings.join([field["prefix"], kept, field["suffix"]])  # (N,), lowercase
    upper = tf.strings.upper(result, encoding="utf-8")
    result_length = tf.strings.length(result, unit="UTF8_CHAR")
    zeros, ones = tf.zeros_like(result_length), tf.ones_like(result_length)
    title = tf.strings.join([
        tf.strings.upper(tf.strings.substr(result, zeros, ones, unit="UTF8_CHAR"),
                         encoding="utf-8"),
        tf.strings.substr(result, tf.minimum(ones, result_length), result_length,
                          unit="UTF8_CHAR"),
    ])  # fmt: skip
    # Keep: a character upper where the form's character at its position is upper (one whose
    # lowercase differs), on the flat characters (see encode for why not ragged broadcasting).
    chars = tf.strings.unicode_split(result, "UTF-8")  # (N, None)
    form_chars = tf.strings.unicode_split(words, "UTF-8")
    form_upper = tf.not_equal(tf.strings.lower(form_chars.flat_values, encoding="utf-8"),
                              form_chars.flat_values)  # fmt: skip
    position = tf.ragged.range(chars.row_lengths()).flat_values
    row = tf.searchsorted(chars.row_splits[1:], tf.range(tf.size(position, tf.int64)), "right")
    in_form = position < tf.gather(form_chars.row_lengths(), row)
    where = tf.where(in_form, tf.gather(form_chars.row_starts(), row) + position, 0)
    flag = in_form & tf.gather(tf.concat([form_upper, [False]], 0), where)
    cased = tf.where(flag, tf.strings.upper(chars.flat_values, encoding="utf-8"),
                     chars.flat_values)  # fmt: skip
    keep = tf.strings.unsorted_segment_join(cased, row, tf.size(words))
    by_casing = tf.stack([result, title, upper, keep], axis=1)  # (N, 4)
    cased_result = tf.gather(by_casing, field["casing"], batch_dims=1)
    lemma = tf.where(applies, cased_result, words)
    return tf.where(field["absolute"], field["lemma"], lemma)
