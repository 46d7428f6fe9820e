"""The translator's preprocessor: raw text -> the backbone's inputs, its vocabulary inside.

A Keras layer in keras-hub's shape holding the SentencePiece model as an asset. It packs teacher
forcing (for the pipeline and ``fit`` on strings) and the text around every search (for
``generate`` and the SavedModel). TensorFlow code (tf-text), so outside the backbone.
"""

import os

import keras
import tensorflow as tf
from keras_hub.models import Preprocessor

from zoo.data.sentencepiece_vocab import SentencePieceTokenizer
from zoo.data.translation_pipeline import teacher_forcing
from zoo.data.utf8 import repair_utf8
from zoo.special_ids import EOS_ID, PAD_ID

__all__ = ["TranslatorPreprocessor"]

VOCABULARY_ASSET = "sentencepiece.model"  # the SentencePiece model in the .keras file's assets


@keras.saving.register_keras_serializable(package="zoo")
class TranslatorPreprocessor(Preprocessor):
    """Sentences -> ``{"source", "target_in"}`` ids (and ``target_out`` labels to train).

    Its tokenizer is zoo's :class:`~zoo.data.SentencePieceTokenizer` on tf-text, not
    keras-hub's: it rebuilds its op after ``tf.random.set_seed`` clears TensorFlow's kernel
    cache (tensorflow/text#570), which the searches and SavedModels traced around it rely on.

    Args:
        tokenizer: a :class:`~zoo.data.SentencePieceTokenizer`, the path of a SentencePiece
            ``.model`` file, or None (a model being loaded: the asset gives it).
        max_length: the most source tokens, and target tokens with BOS or EOS (the model's
            positions).

    Call arguments:
        x: ``(B,)`` source strings.
        y: ``(B,)`` target strings, or None.
        sample_weight: passed through; by default 1 on the labels' tokens, 0 on padding.

    Returns:
        ``{"source": (B, S)}`` int32 ids, 0-padded, without ``y``; with it
        ``({"source", "target_in": (B, T)}, target_out (B, T), sample_weight)``.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> path = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> preprocessor = TranslatorPreprocessor(path, max_length=16)
        >>> x, y, _ = preprocessor(["A dog."], ["Ein Hund."])
        >>> int(x["target_in"][0, 0]), int(y[0, -1])  # BOS first, EOS last
        (2, 3)
    """

    def __init__(self, tokenizer=None, max_length=128, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.set_tokenizer(tokenizer)

    def set_tokenizer(self, tokenizer):
        """Take a :class:`~zoo.data.SentencePieceTokenizer`, a ``.model`` path, or None."""
        if tokenizer is not None and not isinstance(tokenizer, SentencePieceTokenizer):
            tokenizer = SentencePieceTokenizer(tokenizer)
        self.tokenizer = tokenizer

    def _require_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError("This TranslatorPreprocessor has no vocabulary: give it a "
                             "SentencePiece model (tokenizer=PATH).")  # fmt: skip
        return self.tokenizer

    def tokenize(self, strings):
        """``(B,)`` strings -> ``(B, None)`` ragged ids, truncated to the source limit (any
        bytes: invalid UTF-8 is replaced by U+FFFD first)."""
        tokens = self._require_tokenizer().tokenize(repair_utf8(strings))
        return tokens[..., : self.max_length]

    def detokenize(self, ids):
        """``(B, L)`` output ids -> ``(B,)`` strings: cut after the first EOS, detokenized, and
        valid UTF-8 (byte pieces can spell invalid UTF-8, which is replaced)."""
        tokenizer = self._require_tokenizer()
        ids = tf.convert_to_tensor(ids)
        eos_id = tokenizer.eos_id if tokenizer.eos_id >= 0 else EOS_ID
        eos_seen = tf.cumsum(tf.cast(tf.equal(ids, eos_id), tf.int32), axis=1)
        ids = tf.where(tf.equal(eos_seen, 0), ids, tf.cast(PAD_ID, ids.dtype))
        return repair_utf8(tokenizer.detokenize(ids))

    def with_max_length(self, max_length=None):
        """A copy reading at most ``max_length`` source tokens (None: this one's), with a
        tf-text op of its own over the same vocabulary: an op dies when TensorFlow clears its
        kernel cache (``tf.random.set_seed`` does), so a graph to keep (a SavedModel) is
        traced over a new one."""
        tokenizer = SentencePieceTokenizer(self._require_tokenizer().model_proto)
        return type(self)(tokenizer, self.max_length if max_length is None else max_length)

    def pack(self, source_ids, target_ids):
        """Teacher forcing on ids (:func:`teacher_forcing`) with this vocabulary's BOS and EOS."""
        tokenizer = self._require_tokenizer()
        return teacher_forcing(source_ids, target_ids, self.max_length, self.max_length,
                               tokenizer.bos_id, tokenizer.eos_id)  # fmt: skip

    def call(self, x, y=None, sample_weight=None):
        x = tf.convert_to_tensor(x, tf.string)
        if y is None:
            return {"source": self.tokenize(x).to_tensor(default_value=PAD_ID)}
        tokenizer = self._require_tokenizer()
        target = tokenizer.tokenize(repair_utf8(tf.convert_to_tensor(y, tf.string)))
        features, labels = self.pack(self.tokenize(x), target)
        dense = {name: ids.to_tensor(default_value=PAD_ID) for name, ids in features.items()}
        labels = labels.to_tensor(default_value=PAD_ID)
        if sample_weight is None:  # the padding counts for nothing
            sample_weight = tf.cast(tf.not_equal(labels, PAD_ID), "float32")
        return keras.utils.pack_x_y_sample_weight(dense, labels, sample_weight)

    @property
    def vocabulary_size(self):
        return self._require_tokenizer().vocab_size

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, VOCABULARY_ASSET), "wb") as f:
            f.write(self._require_tokenizer().model_proto)

    def load_assets(self, dir_path):
        self.set_tokenizer(os.path.join(dir_path, VOCABULARY_ASSET))

    def get_config(self):
        # Not Preprocessor's: the tokenizer is an asset, not a serialized layer.
        config = keras.layers.Layer.get_config(self)
        config["max_length"] = self.max_length
        return config
