"""The tagger as a task model in keras-hub's shape: ``tag`` (sentences in, a dict per token
out), ``fit``, ``from_preset``, ``export_serving``; the ``.keras`` file holds the vocabulary."""

import functools
import os

import keras
import numpy as np
import tensorflow as tf
from keras_hub.models import Task

from zoo.artifacts import SERVING_VERSION, TAGGER_VOCABULARY_FILE
from zoo.export.folder import float32_model, write_export
from zoo.layers import CRFAccuracy, CRFLoss
from zoo.models.task_model import TaskModel
from zoo.models.tagger.backbone import TaggerBackbone
from zoo.models.tagger.preprocessor import OUTPUT_NAMES, TaggerPreprocessor
from zoo.models.tagger.serving import TaggerServing
from zoo.progress import Progress

__all__ = ["Tagger"]


@keras.saving.register_keras_serializable(package="zoo")
class Tagger(TaskModel, Task):
    """A tagger of UD columns: sentences in, UPOS (and XPOS, FEATS, lemmas) out.

    Args:
        backbone: a :class:`~zoo.models.tagger.TaggerBackbone`.
        preprocessor: a :class:`~zoo.models.tagger.TaggerPreprocessor` (its vocabulary).

    Example:
        >>> tagger = Tagger.from_preset("tagger-en-ewt")  # doctest: +SKIP
        >>> tagger.tag(["The cat sat ."])[0][1]  # doctest: +SKIP
        {'form': 'cat', 'upos': 'NOUN', 'xpos': 'NN', 'feats': 'Number=Sing', 'lemma': 'cat'}
    """

    backbone_cls = TaggerBackbone
    preprocessor_cls = TaggerPreprocessor
    shipped = ("tagger-en-ewt",)
    presets_dir = os.path.join(os.path.dirname(__file__), "presets")
    serving_class = TaggerServing  # the signatures of export_serving

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs):
        """Keras's ``compile``, with defaults for fine-tuning: Adam at 1e-3, and per head the
        CRF's negative log-likelihood and Viterbi accuracy, or the cross entropy over the
        logits and the argmax accuracy; the outputs' mask leaves the padding out of both."""
        heads = self.heads

        def per_head(crf, softmax):
            chosen = {head: crf() if spec.use_crf else softmax() for head, spec in heads.items()}
            return chosen if len(chosen) > 1 else chosen["upos"]

        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-3)
        if loss == "auto":
            loss = per_head(CRFLoss, lambda: keras.losses.SparseCategoricalCrossentropy(
                from_logits=True))  # fmt: skip
        if metrics == "auto":
            metrics = per_head(lambda: [CRFAccuracy(name="accuracy")],
                               lambda: [keras.metrics.SparseCategoricalAccuracy("accuracy")])
        keras.Model.compile(self, optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        return {} if self.compiled else None  # a loaded tagger is compiled with the defaults

    @property
    def heads(self):
        """The backbone's heads, ``{head: TaggerHead}``."""
        return self.backbone.heads

    # ------------------------------------------------------------------ tagging
    def tag(self, sentences, batch_size=64, verbose=False):
        """Tag sentences: whitespace-separated ``str`` (Python's ``str.split()``) or lists of
        tokens (a token may hold spaces).

        Returns:
            One list per sentence of one dict per token: ``form``, ``upos``, and a key for
            each further head of the model (``xpos``, ``feats``, ``lemma``).
        """
        if isinstance(sentences, str):
            raise TypeError("tag() takes a list of sentences; wrap a single one in a list.")
        tokens = [sentence.split() if isinstance(sentence, str) else list(sentence)
                  for sentence in sentences]  # fmt: skip
        columns = self.tag_columns(tokens, batch_size=batch_size, verbose=verbose)
        return [[{"form": form, **{head: columns[head][i][t] for head in columns}}
                 for t, form in enumerate(words)] for i, words in enumerate(tokens)]  # fmt: skip

    def tag_columns(self, sentences, batch_size=64, verbose=False):
        """Every head on ``sentences`` (lists of tokens): ``{head: [[tag, ...], ...]}``, one
        tag (a lemma for ``"lemma"``) per token, sentences of similar lengths together."""
        if isinstance(sentences, str):
            raise TypeError("tag_columns() takes a list of sentences, each a list of words.")
        sentences = [_tokens(sentence) for sentence in sentences]
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        columns = {head: [None] * len(sentences) for head in self.heads}
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        progress = Progress(len(sentences), enabled=verbose, unit="sentences")
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            width = max(len(sentences[i]) for i in chunk)
            tokens = np.array([sentences[i] + [""] * (width - len(sentences[i])) for i in chunk],
                              dtype=object).reshape(len(chunk), width)  # fmt: skip
            lengths = np.array([len(sentences[i]) for i in chunk], "int32")
            outputs = self._serving.tag_tokens(tf.constant(tokens, tf.string), lengths)
            for head in self.heads:
                tags = outputs[OUTPUT_NAMES[head]].numpy()
                for row, i in enumerate(chunk):
                    columns[head][i] = [tag.decode("utf-8") for tag in tags[row, : lengths[row]]]
            progress.add(len(chunk))
        return columns

    def attention_weights(self, tokens):
        """The encoder's self-attention maps of one sentence (a list of tokens, at most the
        preprocessor's window): one ``(N, T, T)`` NumPy array per block, a row being where that
        token attends."""
        if len(tokens) > self.preprocessor.window:
            raise ValueError(f"{len(tokens)} tokens: at most {self.preprocessor.window} (one "
                             "window) have one attention map")  # fmt: skip
        inputs, _, _ = self.preprocessor.windows(tf.ragged.constant([_tokens(tokens)]))
        parts = self.backbone.parts
        x = parts.word_and_char([parts.word_embedding(inputs["words"]),
                                 parts.char_embedding(inputs["chars"])])  # (1, T, D)
        weights = []
        for block in parts.encoder_blocks:
            x, w = block(x, return_attention_scores=True)  # (1, T, D), (1, N, T, T)
            weights.append(keras.ops.convert_to_numpy(w)[0])
        return weights

    def out_of_vocabulary(self, sentences):
        """For each token of ``sentences`` (lists of tokens), whether the model has no
        embedding for it: its word id is the OOV id (unseen in training, or too rare), so that
        it is tagged from its characters and its context alone."""
        flat = [token for sentence in sentences for token in _tokens(sentence)]
        unknown = self.preprocessor.unknown(tf.constant(flat, tf.string)).numpy() if flat else []
        oov, start = [], 0
        for sentence in sentences:
            oov.append([bool(flag) for flag in unknown[start : start + len(sentence)]])
            start += len(sentence)
        return oov

    @functools.cached_property
    def _serving(self):
        # tag_columns runs the SavedModel's tag_tokens signature (traced once): what is served
        # is what runs here. The module is kept, as its signatures hold it only weakly.
        return self.serving_class(self.backbone, self.preprocessor)

    # ------------------------------------------------------------------ files
    def export_serving(self, output_dir, window=None, verbose=False, version=SERVING_VERSION,
                       assets_extra=None):  # fmt: skip
        """Write the export folder that TF Serving serves as it is: ``model.keras`` (this
        model, uncompiled), ``vocabulary.json`` and the SavedModel ``serving/<version>/``,
        whose signatures (``serving_default`` for sentences, ``tag_tokens`` for given tokens;
        ``saved_models/README.md``) run the preprocessor, the backbone and the decoding in the
        graph. Everything is checked before anything is written.

        Args:
            output_dir: the folder (created if missing; its files are replaced).
            window: the most tokens per backbone call; by default the preprocessor's.
            verbose: draw a progress bar on stderr over the export's stages.
            version: the SavedModel's version, ``serving/<version>/``.
            assets_extra: file name -> bytes for the SavedModel's ``assets.extra/``.

        Returns:
            ``output_dir``, as a ``str``.
        """
        backbone = float32_model(self.backbone)  # a mixed-precision model serves in float32
        preprocessor = self.preprocessor.with_window(window, backbone)
        model = type(self)(backbone, preprocessor, compile=False, name=self.name)
        serving = self.serving_class(backbone, preprocessor)
        return write_export(
            output_dir, backbone, TAGGER_VOCABULARY_FILE, preprocessor.vocabulary.save, serving,
            verbose=verbose, version=version, assets_extra=assets_extra,
            warmup=serving.warmup_requests(), keras_model=model,
        )  # fmt: skip

    @classmethod
    def from_backbone(cls, backbone, vocabulary, window=None, copy=True, **kwargs):
        """A tagger of a trained backbone and its vocabulary (a
        :class:`~zoo.data.TaggerVocabulary` or its JSON path), uncompiled; with ``copy``, over a
        copy of the backbone (a training run's carries its optimizer). ``window``: the most
        tokens per backbone call, by default its positions."""
        backbone = cls.trained_backbone(backbone, copy)
        preprocessor = TaggerPreprocessor(vocabulary).with_window(window, backbone)
        return cls(backbone, preprocessor, **{"compile": False, **kwargs})


def _tokens(sentence):
    if isinstance(sentence, (str, bytes)):
        raise TypeError(
            f"A sentence must be a list of words, got the string {sentence[:40]!r}; "
            "split it into words first (str.split())."
        )
    words = list(sentence)
    for word in words:
        if not isinstance(word, str):
            raise TypeError(f"A word must be a str, got {type(word).__name__}: {word!r}.")
    return words

