"""The NAT's SavedModel: :class:`NATServing`, its signatures (Mask-Predict in the graph) over
:class:`zoo.models.translator.serving.TextServing`, which :meth:`NATTranslator.export_serving`
writes in the translator's folder layout. The signatures and how to serve them:
``saved_models/README.md``.
"""

import numpy as np
import tensorflow as tf

from zoo.decoding.nat import MAX_ITERATIONS, MAX_LENGTH_BEAM
from zoo.models.nat.inference import nat_source_positions
from zoo.models.nat.search import nat_counts, nat_translator_search
from zoo.models.translator.serving import STRINGS, TextServing, positive_int

__all__ = ["NAT_SIGNATURES", "NATServing"]

NAT_SIGNATURES = ("serving_default", "translate_refined", "translate_xla")

_ITERATIONS = tf.TensorSpec([], tf.int32, name="iterations")
_LENGTH_BEAM = tf.TensorSpec([], tf.int32, name="length_beam")


class NATServing(TextServing):
    """A non-autoregressive translator's signatures: sentences in, sentences out, in-graph.

    Its ``tf.function`` methods are the SavedModel's signatures (``saved_models/README.md``),
    traced in plain graph mode (tf-text ops and a request's counts do not compile with XLA);
    ``translate_xla`` compiles the stages of its search (fixed counts) inside that graph.

    Args:
        model: a :class:`~zoo.models.nat.NATBackbone`.
        preprocessor: its :class:`~zoo.models.TranslatorPreprocessor` (see
            :class:`~zoo.models.translator.serving.TextServing`).
        max_output_length: the longest translation (EOS included), the width of the
            refinement; defaults to the model's target positions.
        default_iterations: Mask-Predict's T in ``serving_default``, at most
            :data:`~zoo.decoding.nat.MAX_ITERATIONS`; None: 4, or 1 for a copy model.
        default_length_beam: the candidate lengths per sentence in ``serving_default``, at
            most :data:`~zoo.decoding.nat.MAX_LENGTH_BEAM`; None: 3, or 1 for a max-length
            model.
        name: the module name.

    Example:
        >>> import os, tempfile
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> from zoo.models.nat import NATTranslator
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> vocab = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> nat = NATTranslator.from_architecture("tiny", vocab, name="nat", max_length=16)
        >>> serving = NATServing(nat.backbone, nat.preprocessor.with_max_length())
        >>> outputs = serving.translate_refined(
        ...     tf.constant(["A dog runs.", ""]), tf.constant(2), tf.constant(2))
        >>> outputs["translations"].shape
        TensorShape([2])
    """

    def __init__(self, model, preprocessor, max_output_length=None, default_iterations=None,
                 default_length_beam=None, name="nat_serving"):  # fmt: skip
        super().__init__(model, preprocessor, nat_translator_search, nat_source_positions(model),
                         max_output_length, name=name)  # fmt: skip
        for value, name_, maximum in (
            (default_iterations, "default_iterations", MAX_ITERATIONS),
            (default_length_beam, "default_length_beam", MAX_LENGTH_BEAM),
        ):
            if value is not None and positive_int(value, name_) > maximum:
                raise ValueError(f"{name_} must be at most {maximum}, got {value}.")
        self.default_iterations, self.default_length_beam = nat_counts(
            model, default_iterations, default_length_beam
        )

    # ------------------------------------------------------------------ signatures
    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate(self, inputs):
        """``serving_default``: Mask-Predict with the default iterations and length beam.

        Args:
            inputs: ``tf.string`` ``[None]``, the sentences (any bytes).

        Returns:
            ``{"translations": tf.string [None]}``, one UTF-8 translation per input.
        """
        return {
            "translations": self._refined(
                inputs, self.default_iterations, self.default_length_beam
            )
        }

    @tf.function(input_signature=[STRINGS, _ITERATIONS, _LENGTH_BEAM], autograph=False)
    def translate_refined(self, inputs, iterations, length_beam):
        """``translate_refined``: Mask-Predict with the settings of the request.

        Args:
            inputs: ``tf.string`` ``[None]``, the sentences (any bytes).
            iterations: ``tf.int32`` scalar, clamped to ``[1, MAX_ITERATIONS]`` (to 1 for a
                copy model).
            length_beam: ``tf.int32`` scalar, clamped to ``[1, MAX_LENGTH_BEAM]`` (to 1 for a
                max-length model).

        Returns:
            ``{"translations": tf.string [None]}``, one UTF-8 translation per input.
        """
        return {"translations": self._refined(inputs, iterations, length_beam)}

    @tf.function(input_signature=[STRINGS], autograph=False)
    def translate_xla(self, inputs):
        """``translate_xla``: ``serving_default`` (the same inputs and outputs) with the
        stages of its search compiled by XLA."""
        return {
            "translations": self._refined(
                inputs, self.default_iterations, self.default_length_beam, xla=True
            )
        }

    @property
    def signatures(self):
        """The SavedModel's signatures, name -> ``tf.function`` (:data:`NAT_SIGNATURES`)."""
        return {
            "serving_default": self.translate,
            "translate_refined": self.translate_refined,
            "translate_xla": self.translate_xla,
        }

    def warmup_inputs(self, name):
        inputs = super().warmup_inputs(name)
        if name == "translate_refined":
            return {**inputs, "iterations": np.int32(4), "length_beam": np.int32(3)}
        return inputs

    # ------------------------------------------------------------------ the graph
    def _refined(self, inputs, iterations, length_beam, xla=False):
        # The search clamps tensor counts (zoo.models.nat.nat_counts).
        return self.translate_with(
            inputs, "mask_predict", xla=xla, iterations=iterations, length_beam=length_beam
        )
