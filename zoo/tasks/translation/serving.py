"""The translator's SavedModel: :class:`TranslatorServing` (its signatures, over
:class:`zoo.export.text_serving.TextServing`) and :func:`export_translator`, which writes
``model.keras``, ``sentencepiece.model`` and ``serving/N``. The signatures and how to serve
them: ``saved_models/README.md``.
"""

import math
import numbers

import numpy as np
import tensorflow as tf

from zoo.artifacts import SERVING_VERSION
from zoo.export.folder import float32_model
from zoo.export.text_serving import STRINGS, TextServing, export_text_serving, positive_int
# The module, not the package: the package leaves the task model out where TensorFlow was
# missing when it was first imported (a JAX process that imports TensorFlow later).
from zoo.models.translator.translator import Translator
from zoo.models.translator import (
    TranslatorBackbone,
    translator_layers,
    translator_search,
)

__all__ = ["MAX_BEAM_SIZE", "SIGNATURES", "TranslatorServing", "export_translator"]

MAX_BEAM_SIZE = 16  # the largest beam of `translate_beam`; larger requests are clamped to it
SIGNATURES = (
    "serving_default", "translate_greedy", "translate_beam", "translate_xla", "translate_greedy_xla"
)  # fmt: skip

_BEAM_SIZE = tf.TensorSpec([], tf.int32, name="beam_size")


class TranslatorServing(TextServing):
    """A translator and its tokenizer as a ``tf.Module``: sentences in, sentences out, in-graph.

    Its ``tf.function`` methods are the signatures of the SavedModel written by
    :meth:`save` (see ``saved_models/README.md``). They trace in plain
    TensorFlow graph mode: the tf-text tokenizer ops and a beam size that comes with the
    request do not compile with XLA. The ``_xla`` ones compile their search (a fixed beam
    size) with XLA inside that graph. The module tracks the model's variables and the
    tokenizer's resource, not the Keras model itself, so the SavedModel holds no Keras objects.

    Args:
        model: a translator of :func:`zoo.models.build_translator`.
        tokenizer: its :class:`zoo.data.SentencePieceTokenizer` (or the path or bytes of the
            ``.model`` file). The vocabulary must have the model's size, pad id 0, a BOS and an
            EOS id; BOS starts every target and EOS ends it.
        max_input_length: the most source tokens read per sentence; longer sentences are
            truncated. Defaults to the model's source positions (``config.max_length``).
        max_output_length: the most target tokens per translation (EOS included). By default
            each request's search is sized from its source (:func:`zoo.decoding.output_length`).
        default_beam_size: the beam size of ``serving_default``.
        alpha: the length-penalty exponent of beam search.
        name: the module name.

    Attributes:
        tokenizer: the tokenizer (a ``tf.Module``).
        model_variables: the model's variables, tracked for the SavedModel.
        max_input_length, max_output_length, default_beam_size, alpha: the settings above.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> from zoo.models import build_translator, translator_config
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> vocab = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> model = build_translator(translator_config("tiny", vocab_size=400))
        >>> serving = TranslatorServing(model, vocab, max_output_length=8)
        >>> serving.translate_greedy(tf.constant(["A dog runs.", ""]))["translations"].shape
        TensorShape([2])
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_input_length=None,
        max_output_length=None,
        default_beam_size=4,
        alpha=0.6,
        name="translator_serving",
    ):
        layers = translator_layers(model)
        super().__init__(
            model, tokenizer, translator_search, layers.vocab_size, layers.max_source_length,
            layers.max_length, max_input_length, max_output_length, name=name,
        )  # fmt: skip
        positive_int(default_beam_size, "default_beam_size")
        if default_beam_size > MAX_BEAM_SIZE:
            raise ValueError(f"default_beam_size must be at most {MAX_BEAM_SIZE}.")

        self.default_beam_size = default_beam_size
        if not (isinstance(alpha, numbers.Real) and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite number, got {alpha!r}.")
        self.alpha = float(alpha)

    # ------------------------------------------------------------------ signatures
    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate(self, inputs):
        """``serving_default``: beam search with ``default_beam_size``.

        Args:
            inputs: ``tf.string`` ``[None]``, the sentences (any bytes).

        Returns:
            ``{"translations": tf.string [None]}``, one UTF-8 translation per input.
        """
        return {"translations": self._translate(inputs, "beam", self.default_beam_size)}

    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate_greedy(self, inputs):
        """``translate_greedy``: greedy search.

        Args:
            inputs: ``tf.string`` ``[None]``, the sentences (any bytes).

        Returns:
            ``{"translations": tf.string [None]}``, one UTF-8 translation per input.
        """
        return {"translations": self._translate(inputs, "greedy", None)}

    @tf.function(input_signature=[STRINGS, _BEAM_SIZE], autograph=False)
    def translate_beam(self, inputs, beam_size):
        """``translate_beam``: beam search with the beam size of the request.

        Args:
            inputs: ``tf.string`` ``[None]``, the sentences (any bytes).
            beam_size: ``tf.int32`` scalar, clamped to ``[1, MAX_BEAM_SIZE]``.

        Returns:
            ``{"translations": tf.string [None]}``, one UTF-8 translation per input.
        """
        beam_size = tf.clip_by_value(beam_size, 1, MAX_BEAM_SIZE)
        return {"translations": self._translate(inputs, "beam", beam_size)}

    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate_xla(self, inputs):
        """``translate_xla``: ``serving_default`` (the same inputs and outputs) with the
        search compiled by XLA."""
        return {"translations": self._translate(inputs, "beam", self.default_beam_size, True)}

    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate_greedy_xla(self, inputs):
        """``translate_greedy_xla``: ``translate_greedy`` (the same inputs and outputs)
        with the search compiled by XLA."""
        return {"translations": self._translate(inputs, "greedy", None, True)}

    @property
    def signatures(self):
        """The SavedModel's signatures, name -> ``tf.function`` (:data:`SIGNATURES`)."""
        return {
            "serving_default": self.translate,
            "translate_greedy": self.translate_greedy,
            "translate_beam": self.translate_beam,
            "translate_xla": self.translate_xla,
            "translate_greedy_xla": self.translate_greedy_xla,
        }

    def warmup_inputs(self, name):
        inputs = super().warmup_inputs(name)
        return {**inputs, "beam_size": np.int32(4)} if name == "translate_beam" else inputs

    # ------------------------------------------------------------------ the graph
    def _translate(self, inputs, method, beam_size, xla=False):
        if method == "greedy":
            return self.translate_with(inputs, "greedy", xla=xla)
        return self.translate_with(
            inputs, "beam", xla=xla, beam_size=beam_size, alpha=self.alpha
        )


def export_translator(
    model,
    tokenizer,
    output_dir,
    max_input_length=None,
    max_output_length=None,
    default_beam_size=4,
    alpha=0.6,
    verbose=False,
    version=SERVING_VERSION,
    assets_extra=None,
    warmup_xla=False,
):
    """Write ``model.keras``, ``sentencepiece.model`` and the ``serving/<version>/`` SavedModel.

    The SavedModel's signatures, ``serving_default`` (beam search with ``default_beam_size``),
    ``translate_greedy`` and ``translate_beam`` (with a ``beam_size`` input), map ``inputs``
    (``tf.string [None]``) to ``translations`` (``tf.string [None]``); the module docstring of
    :mod:`zoo.tasks.translation.serving` states the contract (UTF-8 repair, truncation to
    ``max_input_length`` tokens, empty input to empty output). Everything is checked before
    anything is written.

    Args:
        model: a translator of :func:`zoo.models.build_translator`.
        tokenizer: its :class:`zoo.data.SentencePieceTokenizer`, or the path of its ``.model``.
        output_dir: the folder to write (created if missing; files in it are overwritten).
        max_input_length: the most source tokens read per sentence (longer sentences are
            truncated); defaults to the model's ``max_length``.
        max_output_length: the most target tokens per translation; by default each request's
            search is sized from its source (:func:`zoo.decoding.output_length`).
        default_beam_size: the beam size of ``serving_default``, at most :data:`MAX_BEAM_SIZE`.
        alpha: the exponent of the GNMT length penalty of beam search.
        verbose: draw a progress bar on stderr over the export's stages.
        assets_extra: file name -> bytes for the SavedModel's ``assets.extra/`` (the
            languages: ``zoo export`` writes them).
        version: the SavedModel's version, written to ``serving/<version>/`` (TF Serving's
            layout: ``serving/`` is the model's base path).
        warmup_xla: the warm-up file (``assets.extra/tf_serving_warmup_requests``) also
            compiles every program of the ``_xla`` signatures, for a server started with
            ``--xla_cpu_compilation_enabled=true`` (the model then fails to load on one
            without it).

    Returns:
        ``output_dir``, as a ``str``.

    Raises:
        ValueError: a model that is not a translator, a vocabulary that does not fit it, or a
            length or beam size out of range.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
        >>> from zoo.models import build_translator, translator_config
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> vocab = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> model = build_translator(translator_config("tiny", vocab_size=400))
        >>> out = os.path.join(tempfile.mkdtemp(), "translator")
        >>> out = export_translator(model, SentencePieceTokenizer(vocab), out)
        >>> sorted(os.listdir(out))
        ['model.keras', 'sentencepiece.model', 'serving']
        >>> import tensorflow_text  # registers the SentencePiece ops
        >>> serving = tf.saved_model.load(os.path.join(out, "serving", "1"))
        >>> translate = serving.signatures["translate_beam"]
        >>> outputs = translate(inputs=tf.constant(["A dog runs.", ""]), beam_size=tf.constant(2))
        >>> list(outputs), outputs["translations"].shape, outputs["translations"][1].numpy()
        (['translations'], TensorShape([2]), b'')
    """
    # once: the serving module and write_export then keep it
    model = float32_model(getattr(model, "backbone", None) or model)
    serving = TranslatorServing(
        model,
        tokenizer,
        max_input_length=max_input_length,
        max_output_length=max_output_length,
        default_beam_size=default_beam_size,
        alpha=alpha,
    )

    translator = None  # a functional translator of zoo 0.1.0 is written as it is
    if isinstance(model, TranslatorBackbone):
        layers = translator_layers(model)
        translator = Translator.from_backbone(
            model, serving.tokenizer, layers.max_source_length or layers.max_length
        )
    return export_text_serving(model, serving, output_dir, verbose=verbose, version=version,
                               assets_extra=assets_extra, warmup_xla=warmup_xla,
                               keras_model=translator)
