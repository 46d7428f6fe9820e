"""The SavedModel frame of text-to-text models: the tokenizer, the checks of the lengths, a
search (the task's) in the frame of :func:`zoo.decoding.translate_strings`, and the export folder.

:class:`TextServing` is the base of a task's serving module (the translator's, the NAT's); a
subclass passes its model's search and sizes and adds its signatures.
"""

import tensorflow as tf

from zoo.artifacts import SENTENCEPIECE_FILE, SERVING_VERSION
from zoo.special_ids import PAD_ID
from zoo.decoding.text import BUCKETS, bucketed, translate_strings, xla_compiled
from zoo.export.folder import float32_model, save_serving, write_export

__all__ = ["STRINGS", "TextServing", "export_text_serving", "positive_int"]

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

    The base of the serving modules of the translators; a subclass defines its ``tf.function``
    methods (``autograph=False``, plain graph mode) and the :attr:`signatures` property, each
    signature calling :meth:`translate_with`. The text goes through the model's preprocessor,
    as ``generate``'s does. The module tracks the model's variables and the tokenizer's
    resource, not the Keras objects, so the SavedModel holds none.

    Args:
        model: the trained backbone.
        preprocessor: its :class:`~zoo.models.TranslatorPreprocessor`, with a tf-text op of
            its own (``with_max_length``); its ``max_length`` is the most source tokens read
            per sentence (longer sentences are truncated). The vocabulary must have the
            model's size, pad id 0, a BOS and an EOS id.
        make_search: ``make_search(model, method, max_length, **kwargs)`` -> an ids -> ids
            search (the model's: :func:`zoo.models.translator.translator_search`, ...).
        vocab_size: the model's vocabulary size (the tokenizer's must match).
        source_positions, target_positions: the model's positions (None: unbounded).
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

    def __init__(self, model, preprocessor, make_search, vocab_size, source_positions,
                 target_positions, max_output_length=None, name=None):
        super().__init__(name=name)
        tokenizer, max_input_length = preprocessor.tokenizer, preprocessor.max_length
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

        The search runs on sources padded to the widths of :func:`zoo.decoding.bucketed`, as
        :func:`zoo.decoding.translate_sentences` runs it: its output length follows the
        padded width, so a translation that never ends is as long through every signature as
        in process. With ``xla``, the rows are padded too (a request of more than 64
        sentences goes through in parts of 64), and the search (not the
        tf-text ops around it) runs in ``tf.function(jit_compile=True)``: each new shape
        compiles once, on its first request. TF Serving runs such a function only when
        started with ``--xla_cpu_compilation_enabled=true``.
        """
        if xla:
            # The stages that translate() compiles: the whole search of an autoregressive
            # translator, the two stages of Mask-Predict.
            search = self._search(method, compile_stage=xla_compiled, **kwargs)
        else:
            search = self._search(method, **kwargs)
        return self._frame(inputs, bucketed(search, self.max_input_length, rows=xla))


def export_text_serving(model, serving, output_dir, verbose=False, version=SERVING_VERSION,
                        assets_extra=None, warmup_xla=False, keras_model=None):
    """Write ``model.keras``, ``sentencepiece.model`` (the tokenizer of ``serving``) and the
    SavedModel of ``serving`` (a :class:`TextServing`) as ``version`` into ``output_dir``,
    with its warm-up file (every ``_xla`` program too with ``warmup_xla``: for a server
    started with XLA on); return its path. ``keras_model``: what ``model.keras`` holds
    (:func:`~zoo.export.folder.write_export`)."""

    def write_vocabulary(path):
        with open(path, "wb") as f:
            f.write(serving.tokenizer.model_proto)

    return write_export(
        output_dir, model, SENTENCEPIECE_FILE, write_vocabulary, serving, verbose=verbose,
        version=version, assets_extra=assets_extra,
        warmup=serving.warmup_requests(xla=warmup_xla), keras_model=keras_model,
    )
