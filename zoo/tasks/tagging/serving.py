"""The tagger's SavedModel: :class:`TaggerServing` (whitespace tokens or given tokens, the
vocabulary lookups, the windows, the Viterbi decode and the lemma edit scripts, all in the graph)
and :func:`export_tagger`. The signatures and how to serve them: ``saved_models/README.md``.
"""

import numpy as np
import tensorflow as tf

from zoo.artifacts import SERVING_VERSION, TAGGER_VOCABULARY_FILE
from zoo.data.tagger_vocabulary import BOW_ID, EOW_ID, FIRST_CHAR_ID, FIRST_WORD_ID, OOV_ID, PAD_ID
from zoo.data.utf8 import repair_utf8
from zoo.export.folder import float32_model, save_serving, write_export
from zoo.layers import crf_decode
from zoo.models.tagger import tagger_heads
from zoo.tasks.tagging.search import tagger_window

__all__ = ["OUTPUT_NAMES", "PYTHON_WHITESPACE", "TaggerServing", "export_tagger", "window_plan"]

_SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
_TOKENS = tf.TensorSpec([None, None], tf.string, name="tokens")
_LENGTHS = tf.TensorSpec([None], tf.int32, name="lengths")
# The output of each head: UPOS tags keep the name of the first signature's only head.
OUTPUT_NAMES = {"upos": "tags", "xpos": "xpos_tags", "feats": "feats", "lemma": "lemmas"}
_CASINGS = "ltuk"  # the casing classes of zoo.data.lemma_scripts, by index
# The characters for which Python's str.isspace() is true: those that str.split() splits on.
PYTHON_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_WHITESPACE_RUN = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in PYTHON_WHITESPACE) + "]+"


class _Hidden:
    """A plain holder: a ``tf.Module`` tracks neither it nor the Keras model inside it, so the
    SavedModel holds the model's variables and traced ops, never Keras objects."""

    def __init__(self, model):
        self.model = model


def _lookup_table(keys, first_id):
    """A table from ``keys`` to ``first_id, first_id + 1, ...``; anything else is ``OOV_ID``."""
    keys = list(keys)
    values = list(range(first_id, first_id + len(keys)))
    if not keys:  # a table cannot be empty; "" is never a token, nor a character
        keys, values = [""], [OOV_ID]
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.string), tf.constant(values, tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=OOV_ID)


def _lowercase(words):
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


def _join_by_row(pieces, rows, count):
    """The strings of ``pieces`` joined per row: row ``r`` of ``count`` gets those with
    ``rows == r``, in order."""
    return tf.strings.unsorted_segment_join(pieces, rows, count)


def _apply_scripts(words, script_ids, table):
    """:func:`zoo.data.lemma_scripts.apply_lemma_script` in TensorFlow: the lemma that each
    word's predicted script makes of it, the word itself where the script does not apply.

    Args:
        words: ``tf.string`` ``(N,)``, valid UTF-8.
        script_ids: ``(N,)`` int32, indices of the vocabulary's lemma scripts.
        table: :func:`_script_table` of those scripts.
    """
    field = {name: tf.gather(values, script_ids) for name, values in table.items()}
    lowered = _lowercase(words)
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
    keep = _join_by_row(cased, row, tf.size(words))
    by_casing = tf.stack([result, title, upper, keep], axis=1)  # (N, 4)
    cased_result = tf.gather(by_casing, field["casing"], batch_dims=1)
    lemma = tf.where(applies, cased_result, words)
    return tf.where(field["absolute"], field["lemma"], lemma)


def window_plan(lengths, window):
    """The windows of sentences of ``lengths`` tokens: ``tagging_windows`` in TensorFlow.

    Args:
        lengths: ``(B,)`` int64, the number of tokens of each sentence.
        window: the most tokens per window, a Python ``int`` >= 1.

    Returns:
        ``(sentence, start, first, end)``, each ``(M,)`` int64, one entry per window, the
        windows of each sentence in order and the sentences in order (an empty sentence has
        none): window ``m`` reads tokens ``[start, start + min(window, length))`` of sentence
        ``sentence[m]`` and its tags are kept for tokens ``[first, end)``, exactly as
        :func:`zoo.tasks.tagging.search.tagging_windows` gives them.

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


class TaggerServing(tf.Module):
    """A tagger and its vocabulary as a ``tf.Module``: sentences in, tags out, in-graph.

    Its ``tag`` function is the ``serving_default`` signature of the SavedModel written by
    :meth:`save`, and ``tag_tokens`` the ``tag_tokens`` signature, for tokens given one by one
    (a UD FORM may hold a space); the contract is in ``saved_models/README.md``. It traces in plain
    TensorFlow graph mode. The module tracks the model's variables and the vocabulary's lookup
    tables, not the Keras model itself, so the SavedModel holds no Keras objects.

    Args:
        model: a tagger of :func:`zoo.models.build_tagger`.
        vocabulary: its :class:`zoo.data.TaggerVocabulary`.
        window: the most tokens per model call; longer sentences are tagged in overlapping
            windows. Defaults to the model's ``max_length``.
        name: the module name.

    Attributes:
        window: the setting above, an ``int``.
        heads: the model's heads, ``("upos",)`` and any of ``"xpos"``, ``"feats"``,
            ``"lemma"``; each gives the output :data:`OUTPUT_NAMES` names.
        model_variables: the model's variables, tracked for the SavedModel.
        word_table, char_table: the vocabulary's lookup tables (``tf.lookup.StaticHashTable``).

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models import build_tagger, tagger_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], 1, max_word_length=10)
        >>> model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
        >>> serving = TaggerServing(model, vocabulary)
        >>> outputs = serving.tag(tf.constant(["A cat .", ""]))
        >>> sorted(outputs), outputs["lengths"].numpy().tolist(), outputs["tags"].shape
        (['lengths', 'tags', 'tokens'], [3, 0], TensorShape([2, 3]))
    """

    def __init__(self, model, vocabulary, window=None, name="tagger_serving"):
        super().__init__(name=name)
        model = float32_model(model)  # a model trained in mixed precision serves in float32
        self.window = tagger_window(model, vocabulary, window)
        self._use_crf = {head: spec.use_crf for head, spec in tagger_heads(model).items()}
        self.heads = tuple(self._use_crf)
        self.model_variables = list(model.variables)
        self.word_table = _lookup_table(vocabulary.words, FIRST_WORD_ID)
        self.char_table = _lookup_table(vocabulary.chars, FIRST_CHAR_ID)
        self._tag_names = {head: tuple(vocabulary.classes(head)) for head in self.heads}
        if "lemma" in self.heads:
            self._scripts = _script_table(vocabulary.lemma_scripts)
        self._lowercase = vocabulary.lowercase
        self._max_word_length = vocabulary.max_word_length
        self._model = _Hidden(model)

    # ------------------------------------------------------------------ the signatures
    @tf.function(input_signature=[_SENTENCES], autograph=False)
    def tag(self, sentences):
        """``serving_default``: one tag per whitespace-separated token.

        Args:
            sentences: ``tf.string`` ``[None]``, the sentences (any bytes).

        Returns:
            ``{"tags": tf.string [B, T], "lengths": tf.int32 [B], "tokens": tf.string [B, T]}``
            and one output per other head (``"xpos_tags"``, ``"feats"``, ``"lemmas"``:
            :data:`OUTPUT_NAMES`): the UPOS tags and the tokens of each sentence, padded with
            ``""`` after its ``lengths[i]`` tokens.
        """
        texts = tf.strings.regex_replace(repair_utf8(sentences), _WHITESPACE_RUN, " ")
        return self._outputs(tf.strings.split(texts))  # splits on " ", drops empty tokens

    @tf.function(input_signature=[_TOKENS, _LENGTHS], autograph=False)
    def tag_tokens(self, tokens, lengths):
        """``tag_tokens``: one tag per given token, for text tokenized already (a CoNLL-U
        file's FORMs, which may hold spaces).

        Args:
            tokens: ``tf.string`` ``[B, T]``, the tokens of each sentence (any bytes; an
                invalid UTF-8 sequence becomes U+FFFD), padded after its length.
            lengths: ``tf.int32`` ``[B]``, the tokens of each sentence (0 to T).

        Returns:
            The outputs of ``serving_default``, for these tokens.
        """
        count = tf.cast(tf.shape(tokens)[1], tf.int32)
        checks = [
            tf.debugging.assert_equal(tf.shape(lengths)[0], tf.shape(tokens)[0],
                                      message="lengths needs one length per row of tokens"),
            tf.debugging.assert_non_negative(lengths, message="a length is negative"),
            tf.debugging.assert_less_equal(lengths, count,
                                           message="a length is more than the tokens given"),
        ]  # fmt: skip
        with tf.control_dependencies(checks):
            tokens = tf.RaggedTensor.from_tensor(repair_utf8(tokens), lengths=lengths)
        return self._outputs(tokens)

    def _outputs(self, tokens):
        lengths = tokens.row_lengths()  # (B,) int64
        words = tokens.flat_values  # (N,): every token of the request
        tag_ids = tf.cond(
            tf.size(words) > 0,
            lambda: self._tag_words(words, tokens.row_starts(), lengths),
            lambda: tuple(tf.zeros([0], tf.int32) for _ in self.heads),
        )  # per head (N,)
        outputs = {
            "tokens": tokens.to_tensor(default_value=""),
            "lengths": tf.cast(lengths, tf.int32),
        }
        for head, ids in zip(self.heads, tag_ids):
            if head == "lemma":
                names = _apply_scripts(words, ids, self._scripts)  # (N,)
            else:
                names = tf.gather(tf.constant(self._tag_names[head], tf.string), ids)  # (N,)
            tags = tf.RaggedTensor.from_row_lengths(names, lengths, validate=False)
            outputs[OUTPUT_NAMES[head]] = tags.to_tensor(default_value="")
        return outputs

    @property
    def signatures(self):
        """The SavedModel's signatures: ``serving_default`` (:meth:`tag`) and
        ``tag_tokens`` (:meth:`tag_tokens`)."""
        return {"serving_default": self.tag, "tag_tokens": self.tag_tokens}

    def save(self, path):
        """Write the SavedModel with its signatures to ``path``; return it."""
        return save_serving(self, path, self.signatures)

    def warmup_requests(self):
        """The requests of the export's warm-up file (:mod:`zoo.export.warmup`): each
        signature once."""
        tokens = ["A", "dog", "runs", "through", "the", "snow", "."]
        lengths = np.array([len(tokens)], "int32")
        return [("serving_default", {"sentences": [" ".join(tokens)]}),
                ("tag_tokens", {"tokens": [tokens], "lengths": lengths})]

    # ------------------------------------------------------------------ the graph
    def encode(self, words):
        """The model inputs of ``words``, as :meth:`zoo.data.TaggerVocabulary.encode` has them.

        Args:
            words: ``tf.string`` ``(N,)``, valid UTF-8.

        Returns:
            ``(word_ids, char_ids)``: ``(N,)`` and ``(N, C)`` int32.
        """
        keys = _lowercase(words) if self._lowercase else words
        word_ids = tf.cast(self.word_table.lookup(keys), tf.int32)  # (N,)
        chars = tf.strings.unicode_split(words, "UTF-8")  # (N, None): code points
        # A long word keeps its first `head` and last `tail` characters. Worked out on the flat
        # characters with ragged ranges: a ragged tensor's row ids (which broadcasting and
        # ragged.boolean_mask use) cost N x the longest word in TensorFlow, 16 GB for a
        # request of 20,000 words beside one word of 100,000 characters.
        room = self._max_word_length - 2
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
        char_ids = char_ids.to_tensor(PAD_ID, shape=[None, self._max_word_length])
        return word_ids, tf.cast(char_ids, tf.int32)  # (N,), (N, C)

    def _tag_words(self, words, row_starts, lengths):
        """The tag ids of every token ``(N,)`` of the request, per head."""
        sentence, start, first, end = window_plan(lengths, self.window)  # (M,) each
        size = tf.minimum(tf.gather(lengths, sentence), self.window)  # (M,): words read
        offsets = tf.range(tf.reduce_max(size))[tf.newaxis]  # (1, T)
        real = offsets < size[:, tf.newaxis]  # (M, T)
        position = start[:, tf.newaxis] + offsets  # (M, T): in the sentence
        kept = real & (position >= first[:, tf.newaxis]) & (position < end[:, tf.newaxis])

        word_ids, char_ids = self.encode(words)
        padding = tf.size(words, tf.int64)  # the index of an all-padding word
        index = tf.where(real, tf.gather(row_starts, sentence)[:, tf.newaxis] + position, padding)
        word_ids = tf.concat([word_ids, [PAD_ID]], axis=0)  # (N + 1,)
        char_ids = tf.concat([char_ids, tf.zeros_like(char_ids[:1])], axis=0)  # (N + 1, C)
        inputs = {"words": tf.gather(word_ids, index), "chars": tf.gather(char_ids, index)}
        outputs = self._model.model(inputs, training=False)  # (M, T, K[, K]) per head
        if not isinstance(outputs, dict):
            outputs = {"upos": outputs}
        tag_ids = []
        for head in self.heads:
            scores = outputs[head]
            if self._use_crf[head]:  # CRF potentials (M, T, K, K)
                ids, _ = crf_decode(scores, real)
            else:
                ids = tf.argmax(scores, axis=-1, output_type=tf.int32)
            # Window after window, each keeps its run of words: the tokens in order.
            tag_ids.append(tf.boolean_mask(tf.convert_to_tensor(ids), kept))  # (N,)
        return tuple(tag_ids)


def export_tagger(model, vocabulary, output_dir, window=None, verbose=False,
                  version=SERVING_VERSION, assets_extra=None):
    """Write ``model.keras``, ``vocabulary.json`` and the ``serving/<version>/`` SavedModel.

    The SavedModel's ``serving_default`` maps ``sentences`` (``tf.string [None]``) to ``tags``
    (``tf.string [B, T]``, padded with ``""``), ``lengths`` (``tf.int32 [B]``), ``tokens``
    (``tf.string [B, T]``) and one output per other head (``xpos_tags``, ``feats``,
    ``lemmas``); ``tag_tokens`` takes ``tokens`` (``tf.string [B, T]``) and ``lengths``
    (``tf.int32 [B]``) instead. ``saved_models/README.md`` states the contract (UTF-8 repair, whitespace tokens,
    windows for long sentences, no tags for an empty sentence). Everything is checked before
    anything is written.

    Args:
        model: a tagger of :func:`zoo.models.build_tagger`.
        vocabulary: its :class:`zoo.data.TaggerVocabulary`.
        output_dir: the folder to write (created if missing; files in it are overwritten).
        window: the most tokens per model call of the SavedModel; defaults to the model's
            ``max_length``.
        verbose: draw a progress bar on stderr over the export's stages.
        version: the SavedModel's version, written to ``serving/<version>/`` (TF Serving's
            layout: ``serving/`` is the model's base path).

    Returns:
        ``output_dir``, as a ``str``.

    Raises:
        ValueError: a model that is not a tagger, a vocabulary that does not fit it, or a
            window out of range (see :func:`zoo.tasks.tagging.search.tagger_window`).

    Example:
        >>> import os, tempfile
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models import build_tagger, tagger_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], 1, max_word_length=10)
        >>> model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
        >>> out = export_tagger(model, vocabulary, os.path.join(tempfile.mkdtemp(), "tagger"))
        >>> sorted(os.listdir(out))
        ['model.keras', 'serving', 'vocabulary.json']
        >>> serving = tf.saved_model.load(os.path.join(out, "serving", "1"))
        >>> outputs = serving.signatures["serving_default"](sentences=tf.constant(["A cat ."]))
        >>> outputs["tokens"].numpy().tolist(), outputs["lengths"].numpy().tolist()
        ([[b'A', b'cat', b'.']], [3])
    """
    model = float32_model(model)  # once: the serving module and write_export then keep it
    serving = TaggerServing(model, vocabulary, window=window)
    return write_export(
        output_dir, model, TAGGER_VOCABULARY_FILE, vocabulary.save, serving, verbose=verbose,
        version=version, assets_extra=assets_extra, warmup=serving.warmup_requests(),
    )
