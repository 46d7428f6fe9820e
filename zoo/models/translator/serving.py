"""The translator's SavedModel: :class:`TranslatorServing`, its signatures over
:class:`zoo.export.text_serving.TextServing`, which :meth:`Translator.export_serving` writes.
The signatures and how to serve them: ``saved_models/README.md``.
"""

import math
import numbers

import numpy as np
import tensorflow as tf

from zoo.export.text_serving import STRINGS, TextServing, positive_int
from zoo.models.translator.search import translator_search
from zoo.models.translator.stacks import translator_layers

__all__ = ["MAX_BEAM_SIZE", "SIGNATURES", "TranslatorServing"]

MAX_BEAM_SIZE = 16  # the largest beam of `translate_beam`; larger requests are clamped to it
SIGNATURES = (
    "serving_default", "translate_greedy", "translate_beam", "translate_xla", "translate_greedy_xla"
)  # fmt: skip

_BEAM_SIZE = tf.TensorSpec([], tf.int32, name="beam_size")


class TranslatorServing(TextServing):
    """A translator's signatures: sentences in, sentences out, the search in the graph.

    Its ``tf.function`` methods are the signatures of the SavedModel (see
    ``saved_models/README.md``). They trace in plain TensorFlow graph mode: the tf-text ops
    and a beam size that comes with the request do not compile with XLA. The ``_xla`` ones
    compile their search (a fixed beam size) with XLA inside that graph.

    Args:
        model: a :class:`~zoo.models.TranslatorBackbone`.
        preprocessor: its :class:`~zoo.models.TranslatorPreprocessor` (see
            :class:`~zoo.export.text_serving.TextServing`).
        max_output_length: the most target tokens per translation (EOS included). By default
            each request's search is sized from its source (:func:`zoo.decoding.output_length`).
        default_beam_size: the beam size of ``serving_default``, at most :data:`MAX_BEAM_SIZE`.
        alpha: the length-penalty exponent of beam search.
        name: the module name.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> from zoo.models import Translator
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> vocab = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> translator = Translator.from_architecture("tiny", vocab)
        >>> serving = TranslatorServing(translator.backbone,
        ...                             translator.preprocessor.with_max_length(),
        ...                             max_output_length=8)
        >>> serving.translate_greedy(tf.constant(["A dog runs.", ""]))["translations"].shape
        TensorShape([2])
    """

    def __init__(self, model, preprocessor, max_output_length=None, default_beam_size=4,
                 alpha=0.6, name="translator_serving"):  # fmt: skip
        layers = translator_layers(model)
        super().__init__(
            model, preprocessor, translator_search, layers.vocab_size, layers.max_source_length,
            layers.max_length, max_output_length, name=name,
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
