"""The NAT's SavedModel: :class:`NATServing` (Mask-Predict in the graph, over
:class:`zoo.export.text_serving.TextServing`) and :func:`export_nat`, in the folder layout of
the translator's export. The signatures and how to serve them: ``saved_models/README.md``.
"""

import numpy as np
import tensorflow as tf

from zoo.artifacts import SERVING_VERSION
from zoo.decoding.nat import MAX_ITERATIONS, MAX_LENGTH_BEAM
from zoo.export.folder import float32_model
from zoo.export.text_serving import STRINGS, TextServing, export_text_serving, positive_int
from zoo.models.nat import NATBackbone, nat_counts, nat_source_positions, nat_translator_search
from zoo.models.nat.translator import NATTranslator  # the module: see zoo/tasks/translation
from zoo.models.translator import translator_layers

__all__ = ["NAT_SIGNATURES", "NATServing", "export_nat"]

NAT_SIGNATURES = ("serving_default", "translate_refined", "translate_xla")

_ITERATIONS = tf.TensorSpec([], tf.int32, name="iterations")
_LENGTH_BEAM = tf.TensorSpec([], tf.int32, name="length_beam")


class NATServing(TextServing):
    """A non-autoregressive translator and its tokenizer as a ``tf.Module``: sentences in,
    sentences out, in-graph.

    Its ``tf.function`` methods are the signatures of the SavedModel written by
    :meth:`save` (see ``saved_models/README.md``). They trace in plain TensorFlow graph
    mode: the tf-text ops and the counts of a request do not compile with XLA;
    ``translate_xla`` compiles the stages of its search (fixed counts) inside that graph.

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        tokenizer: its :class:`zoo.data.SentencePieceTokenizer` (or the path or bytes of the
            ``.model`` file), with the model's size, pad id 0, a BOS and an EOS id.
        max_input_length: the most source tokens read per sentence; defaults to the model's
            source positions.
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
        >>> from zoo.models.nat import build_nat_translator, get_config
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> vocab = train_sentencepiece(texts, os.path.join(tempfile.mkdtemp(), "sp"), 400)
        >>> model = build_nat_translator(get_config("tiny", vocab_size=400, max_length=16))
        >>> serving = NATServing(model, vocab)
        >>> outputs = serving.translate_refined(
        ...     tf.constant(["A dog runs.", ""]), tf.constant(2), tf.constant(2))
        >>> outputs["translations"].shape
        TensorShape([2])
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_input_length=None,
        max_output_length=None,
        default_iterations=None,
        default_length_beam=None,
        name="nat_serving",
    ):
        if model.name != "nat":
            raise ValueError(
                f"NATServing serves a model of build_nat_translator (named 'nat'), not "
                f"{model.name!r}; a translator takes TranslatorServing."
            )
        layers = translator_layers(model)
        super().__init__(
            model, tokenizer, nat_translator_search, layers.vocab_size,
            nat_source_positions(model), layers.max_length, max_input_length, max_output_length,
            name=name,
        )  # fmt: skip
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


def export_nat(
    model,
    tokenizer,
    output_dir,
    max_input_length=None,
    max_output_length=None,
    default_iterations=None,
    default_length_beam=None,
    verbose=False,
    version=SERVING_VERSION,
    assets_extra=None,
    warmup_xla=False,
):
    """Write ``model.keras``, ``sentencepiece.model`` and the ``serving/<version>/`` SavedModel of a
    non-autoregressive translator.

    The SavedModel's signatures, ``serving_default`` and ``translate_refined`` (with
    ``iterations`` and ``length_beam`` inputs), map ``inputs`` (``tf.string [None]``) to
    ``translations`` (``tf.string [None]``); see :mod:`zoo.tasks.nat.serving`. Everything is
    checked before anything is written.

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        tokenizer: its :class:`zoo.data.SentencePieceTokenizer`, or the path of its ``.model``.
        output_dir: the folder to write (created if missing; files in it are overwritten).
        max_input_length: the most source tokens read per sentence; defaults to the model's
            ``max_length``.
        max_output_length: the longest translation; defaults to the model's ``max_length``.
        default_iterations: Mask-Predict's T in ``serving_default``; None: 4, or 1 for a
            copy model.
        default_length_beam: the candidate lengths per sentence in ``serving_default``;
            None: 3, or 1 for a max-length model.
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
        ValueError: a model that is not a NAT, a vocabulary that does not fit it, or a length
            or count out of range.
    """
    # once: the serving module and write_export then keep it
    model = float32_model(getattr(model, "backbone", None) or model)
    serving = NATServing(
        model,
        tokenizer,
        max_input_length=max_input_length,
        max_output_length=max_output_length,
        default_iterations=default_iterations,
        default_length_beam=default_length_beam,
    )
    nat = None  # a functional NAT of zoo 0.1.0 is written as it is
    if isinstance(model, NATBackbone):
        nat = NATTranslator.from_backbone(model, serving.tokenizer, nat_source_positions(model))
    return export_text_serving(model, serving, output_dir, verbose=verbose, version=version,
                               assets_extra=assets_extra, warmup_xla=warmup_xla, keras_model=nat)
