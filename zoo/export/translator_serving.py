"""Export a translator for serving: the ``.keras`` model, its vocabulary, and a SavedModel.

:func:`export_translator` writes three things into one folder::

    output_dir/
      model.keras           the Keras model (``keras.models.load_model`` after ``import zoo``)
      sentencepiece.model   the SentencePiece vocabulary (the same bytes as the tokenizer's)
      serving/              a TensorFlow SavedModel: strings in, strings out

The SavedModel is built from :class:`TranslatorServing`, a ``tf.Module`` whose functions run the
whole translation in the graph, in the frame of :func:`zoo.decoding.translate_strings` (the one that
:func:`zoo.decoding.translate` runs too): UTF-8 repair, SentencePiece tokenization (tf-text, from
the model bytes of the vocabulary), truncation, the decoding loop of :mod:`zoo.decoding` with the KV
caches, the cut after EOS and detokenization. Loading it needs TensorFlow and the tf-text ops
(``import tensorflow_text``), not zoo and not Keras; TensorFlow Serving images that include the
tf-text ops serve it as it is.

The signatures (``saved_model_cli show --all --dir output_dir/serving/1`` lists them):

- ``serving_default``: ``inputs`` (``tf.string``, shape ``[None]``) -> ``translations``
  (``tf.string``, shape ``[None]``); beam search with the beam size given at export
  (``default_beam_size``).
- ``translate_greedy``: ``inputs`` -> ``translations``, as above; greedy search.
- ``translate_beam``: ``inputs`` and ``beam_size`` (``tf.int32`` scalar, shape ``[]``) ->
  ``translations``; beam search with the beam size of the request, clamped to
  ``[1, MAX_BEAM_SIZE]``.
- ``translate_xla`` and ``translate_greedy_xla``: as ``serving_default`` and
  ``translate_greedy``, the same translations, with the search compiled by XLA (the tf-text
  ops around it are not). At batch 1 they run a few times faster than the plain
  signatures, whose decoding loop pays TensorFlow's per-op cost at every step
  (``benchmarks/serving.py``). Each new input shape compiles on its first request (sources
  are padded to a power of two rows and a multiple of 8 tokens, so there are few), and TF
  Serving runs them only when started with ``--xla_cpu_compilation_enabled=true``; without
  that flag it fails their requests. The other three signatures run anywhere.

Beam search ranks hypotheses by the GNMT length penalty with the ``alpha`` given at export. For
every signature:

- ``inputs`` is a batch of sentences (B may be 0); ``translations[i]`` is the translation of
  ``inputs[i]``, always valid UTF-8.
- Invalid UTF-8 in an input is replaced by U+FFFD (``tf.strings.unicode_transcode`` with
  ``errors="replace"``) before tokenization, so a bad request never fails; SentencePiece's
  normalization then drops the U+FFFD, so invalid bytes are in effect ignored.
- Characters outside the vocabulary (emoji, other scripts) are tokenized as their UTF-8 bytes
  (SentencePiece byte fallback, for vocabularies of :func:`zoo.data.train_sentencepiece`).
- A sentence is truncated to its first ``max_input_length`` tokens (the export setting, by
  default the model's ``max_length``); the tokens after them are ignored, never an error.
- An input with no tokens (the empty string, only whitespace, only invalid bytes) translates
  to ``""`` and costs no decoding.
- A translation ends at the first EOS. It has at most ``max_output_length`` tokens when the
  export sets it; by default a request's search is sized from its widest source
  (:func:`zoo.decoding.output_length`: 1.2 times its tokens plus 10, at most the model's
  positions).

In Python::

    import tensorflow as tf
    import tensorflow_text  # registers the SentencePiece ops

    translator = tf.saved_model.load("output_dir/serving/1")
    translate = translator.signatures["translate_beam"]
    translate(inputs=tf.constant(["A dog runs."]), beam_size=tf.constant(5))["translations"]

With TensorFlow Serving's REST API, in the columnar ("inputs") format, since ``beam_size`` is
a scalar and not one value per sentence::

    POST /v1/models/translator:predict
    {"signature_name": "translate_beam", "inputs": {"inputs": ["A dog runs."], "beam_size": 5}}
    -> {"outputs": ["Ein Hund rennt."]}

References:
    Vaswani et al. 2017, "Attention Is All You Need" (the model); Wu et al. 2016, "Google's
    Neural Machine Translation System" (beam search with a length penalty); Kudo and Richardson
    2018, "SentencePiece" (the tokenizer).
"""

import math
import numbers

import tensorflow as tf

from zoo.artifacts import SERVING_VERSION
from zoo.export.folder import float32_model
from zoo.export.text_serving import STRINGS, TextServing, export_text_serving, positive_int

__all__ = ["MAX_BEAM_SIZE", "SIGNATURES", "TranslatorServing", "export_translator"]

MAX_BEAM_SIZE = 16  # the largest beam of `translate_beam`; larger requests are clamped to it
SIGNATURES = (
    "serving_default", "translate_greedy", "translate_beam", "translate_xla", "translate_greedy_xla"
)  # fmt: skip

_BEAM_SIZE = tf.TensorSpec([], tf.int32, name="beam_size")


class TranslatorServing(TextServing):
    """A translator and its tokenizer as a ``tf.Module``: sentences in, sentences out, in-graph.

    Its ``tf.function`` methods are the signatures of the SavedModel written by
    :meth:`save` (see the table of :mod:`zoo.export.translator_serving`). They trace in plain
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
        super().__init__(model, tokenizer, max_input_length, max_output_length, name=name)
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
):
    """Write ``model.keras``, ``sentencepiece.model`` and the ``serving/<version>/`` SavedModel.

    The SavedModel's signatures, ``serving_default`` (beam search with ``default_beam_size``),
    ``translate_greedy`` and ``translate_beam`` (with a ``beam_size`` input), map ``inputs``
    (``tf.string [None]``) to ``translations`` (``tf.string [None]``); the module docstring of
    :mod:`zoo.export.translator_serving` states the contract (UTF-8 repair, truncation to
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
        version: the SavedModel's version, written to ``serving/<version>/`` (TF Serving's
            layout: ``serving/`` is the model's base path).

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
    model = float32_model(model)  # once: the serving module and write_export then keep it
    serving = TranslatorServing(
        model,
        tokenizer,
        max_input_length=max_input_length,
        max_output_length=max_output_length,
        default_beam_size=default_beam_size,
        alpha=alpha,
    )

    return export_text_serving(model, serving, output_dir, verbose=verbose, version=version)
