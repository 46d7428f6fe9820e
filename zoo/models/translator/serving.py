"""The SavedModel of the text-to-text models: :class:`TextServing`, the frame of their serving
modules, and :class:`TranslatorServing`, the translator's signatures over it, which
:meth:`Translator.export_serving` writes. The signatures and how to serve them:
``saved_models/README.md``.
"""

import math
import numbers

import numpy as np
import tensorflow as tf

from zoo.decoding.text import BUCKETS, bucketed, translate_strings, xla_compiled
from zoo.export.folder import float32_model, save_serving
from zoo.models.translator.search import translator_search
from zoo.models.translator.stacks import translator_layers
from zoo.special_ids import PAD_ID

__all__ = ["MAX_BEAM_SIZE", "SIGNATURES", "STRINGS", "TextServing", "TranslatorServing",
           "positive_int"]  # fmt: skip

STRINGS = tf.TensorSpec([None], tf.string, name="inputs")  # the ``inputs`` of every signature
WARMUP_SENTENCE = "A dog runs through the snow."  # what the warm-up file translates


def positive_int(value, name):
    """``value``, a Python int >= 1, or a ValueError."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


class TextServing(tf.Module):
    """A translator and its preprocessor as a ``tf.Module``: sentences in, sentences out,
    in-graph.

    The base of the translators' serving modules: a subclass defines its ``tf.function``
    methods (``autograph=False``) and :attr:`signatures`, each calling :meth:`translate_with`.
    The text goes through the model's preprocessor, as in ``generate``. The module tracks the
    variables and the tokenizer's resource, not the Keras objects, so the SavedModel holds none.

    Args:
        model: the trained backbone (its vocabulary size and target positions are read from
            it).
        preprocessor: its :class:`~zoo.models.TranslatorPreprocessor`, with a tf-text op of
            its own (``with_max_length``); its ``max_length`` is the most source tokens read
            per sentence (longer sentences are truncated). The vocabulary must have the
            model's size, pad id 0, a BOS and an EOS id.
        make_search: ``make_search(model, method, max_length, **kwargs)`` -> an ids -> ids
            search (the model's: :func:`zoo.models.translator.translator_search`, ...).
        source_positions: the most source tokens the model reads (None: unbounded).
        max_output_length: the most target tokens per translation (EOS included). By
            default each request's search is sized from its source
            (:func:`zoo.decoding.output_length`, at most the model's target positions; a NAT
            spans its predicted lengths, at most its positions).
        name: the module name.

    Attributes:
        tokenizer: the preprocessor's tokenizer (a ``tf.Module``).
        model_variables: the model's variables, tracked for the SavedModel.
        max_input_length, max_output_length: the settings above.
    """

    def __init__(self, model, preprocessor, make_search, source_positions,
                 max_output_length=None, name=None):  # fmt: skip
        super().__init__(name=name)
        tokenizer, max_input_length = preprocessor.tokenizer, preprocessor.max_length
        layers = translator_layers(model)
        vocab_size, target_positions = layers.vocab_size, layers.max_length
        model = float32_model(model)  # a model trained in mixed precision serves in float32
        if tokenizer.pad_id != PAD_ID or tokenizer.bos_id < 0 or tokenizer.eos_id < 0:
            raise ValueError(
                f"The vocabulary needs pad id {PAD_ID}, a BOS and an EOS id; it has pad id "
                f"{tokenizer.pad_id}, BOS {tokenizer.bos_id}, EOS {tokenizer.eos_id}."
            )
        if tokenizer.vocab_size != vocab_size:
            raise ValueError(
                f"The vocabulary has {tokenizer.vocab_size} pieces but the model "
                f"{model.name!r} has vocab_size={vocab_size}: not its vocabulary."
            )
        if max_input_length is None:
            raise ValueError("The model's embedding has no max_length: pass max_input_length.")
        positive_int(max_input_length, "max_input_length")
        if max_output_length is not None:
            positive_int(max_output_length, "max_output_length")
        if source_positions is not None and max_input_length > source_positions:
            raise ValueError(
                f"max_input_length={max_input_length} is more than the model's "
                f"{source_positions} source positions."
            )
        if (
            max_output_length is not None
            and target_positions is not None
            and max_output_length > target_positions
        ):
            raise ValueError(
                f"max_output_length={max_output_length} is more than the model's "
                f"{target_positions} target positions."
            )

        self.tokenizer = tokenizer
        self.model_variables = list(model.variables)
        self.max_input_length = max_input_length
        self.max_output_length = max_output_length
        ids = {"bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
        # Plain functions, not tracked: the SavedModel holds the variables and the tokenizer,
        # not the Keras objects.
        self._search = lambda method, **kwargs: make_search(
            model, method, max_output_length, **ids, **kwargs
        )
        self._frame = lambda inputs, search: translate_strings(inputs, preprocessor, search)

    @property
    def signatures(self):
        """The SavedModel's signatures, name -> ``tf.function``."""
        raise NotImplementedError

    def save(self, path):
        """Write the SavedModel with :attr:`signatures` to ``path``; return ``path``."""
        return save_serving(self, path, self.signatures)

    def warmup_requests(self, xla=False):
        """The requests of the export's warm-up file (:mod:`zoo.export.warmup`): each plain
        signature once, a sentence at batch 1. The ``_xla`` ones compile per shape and fail
        on a server started without XLA, which would fail the model's load: only with
        ``xla``, one request per program they compile: each of the batch buckets of
        :data:`zoo.decoding.text.BUCKETS` at each padded source length up to
        ``max_input_length``."""
        requests = [(name, self.warmup_inputs(name)) for name in self.signatures
                    if not name.endswith("_xla")]  # fmt: skip
        if xla:
            texts = self.bucket_sentences()
            requests += [(name, {**self.warmup_inputs(name), "inputs": [text] * rows})
                         for name in self.signatures if name.endswith("_xla")
                         for rows in BUCKETS.rows for text in texts]  # fmt: skip
        return requests

    def bucket_sentences(self):
        """One sentence per padded source length of :func:`zoo.decoding.bucketed`, shortest
        first: the warm-up sentence's words, repeated, as many as fit the length."""
        limit = self.max_input_length
        words, texts = WARMUP_SENTENCE.split(), {}
        for count in range(1, 4 * limit + 1):
            text = " ".join(words[i % len(words)] for i in range(count))
            length = int(self.tokenizer.tokenize(tf.constant([text])).row_lengths()[0])
            if length > limit:
                break
            texts.setdefault(BUCKETS.padded_length(length, limit), text)
        widths = BUCKETS.widths(limit)
        missing = [width for width in widths if width not in texts]
        if missing:
            raise ValueError(f"No warm-up sentence pads to {missing} tokens.")
        return [texts[width] for width in widths]

    def warmup_inputs(self, name):
        """The inputs of signature ``name``'s warm-up request (a subclass adds its own)."""
        return {"inputs": [WARMUP_SENTENCE]}

    def translate_with(self, inputs, method, xla=False, **kwargs):
        """``inputs`` (``tf.string`` ``[None]``) translated in the graph by the search
        ``method`` of the task's search, with ``kwargs``.

        The sources are padded to the widths of :func:`zoo.decoding.bucketed`, as in
        :func:`zoo.decoding.translate_sentences`, so a translation that never ends is as long
        here as in process. With ``xla`` the rows are padded too (more than 64 sentences go in
        parts of 64) and the search runs under XLA, each new shape compiled on its first request
        (TF Serving needs ``--xla_cpu_compilation_enabled=true``).
        """
        if xla:
            # The stages that translate() compiles: the whole search of an autoregressive
            # translator, the two stages of Mask-Predict.
            search = self._search(method, compile_stage=xla_compiled, **kwargs)
        else:
            search = self._search(method, **kwargs)
        return self._frame(inputs, bucketed(search, self.max_input_length, rows=xla))


MAX_BEAM_SIZE = 16  # the largest beam of `translate_beam`; larger requests are clamped to it
SIGNATURES = (
    "serving_default", "translate_greedy", "translate_beam", "translate_xla", "translate_greedy_xla"
)  # fmt: skip

_BEAM_SIZE = tf.TensorSpec([], tf.int32, name="beam_size")


class TranslatorServing(TextServing):
    """A translator's signatures: sentences in, sentences out, the search in the graph.

    Its ``tf.function`` methods are the SavedModel's signatures (``saved_models/README.md``),
    traced in plain graph mode (tf-text ops and a request's beam size do not compile with XLA);
    the ``_xla`` ones compile their search (a fixed beam size) with XLA inside that graph.

    Args:
        model: a :class:`~zoo.models.TranslatorBackbone`.
        preprocessor: its :class:`~zoo.models.TranslatorPreprocessor` (see
            :class:`TextServing`).
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
        positions = translator_layers(model).max_source_length
        super().__init__(model, preprocessor, translator_search, positions, max_output_length,
                         name=name)  # fmt: skip
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
