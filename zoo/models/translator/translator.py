"""The translator as a task model, in keras-hub's shape: a backbone and a preprocessor that
``generate``, ``fit`` on strings, ``from_preset`` and ``keras.models.load_model`` all know.

The search is zoo's (:func:`~zoo.models.translator.translator_search`), not keras-hub's samplers:
theirs cannot be traced into a SavedModel, and zoo's are faster (benchmarks/RESULTS.md).
"""

import os

import keras
from keras_hub.models import Seq2SeqLM

from zoo.artifacts import SENTENCEPIECE_FILE, SERVING_VERSION
from zoo.decoding.text import translate_sentences
from zoo.export.folder import float32_model, write_export
from zoo.models.translator.backbone import TranslatorBackbone
from zoo.models.task_model import TaskModel
from zoo.models.translator.config import get_config
from zoo.models.translator.inference import attention_weights
from zoo.models.translator.preprocessor import TranslatorPreprocessor
from zoo.models.translator.search import METHODS, translator_search
from zoo.models.translator.serving import TranslatorServing
from zoo.models.translator.stacks import translator_layers

__all__ = ["Translator"]


@keras.saving.register_keras_serializable(package="zoo")
class Translator(TaskModel, Seq2SeqLM):
    """An autoregressive translator: strings in, strings out.

    Args:
        backbone: a :class:`TranslatorBackbone`.
        preprocessor: a :class:`TranslatorPreprocessor` (its vocabulary), or None to feed ids.
        compile: compile with the defaults of :meth:`compile`.

    Example:
        >>> translator = Translator.from_preset("translator-en-de")  # doctest: +SKIP
        >>> translator.generate(["A dog runs in the snow."])  # doctest: +SKIP
        ['Ein Hund rennt im Schnee.']
    """

    backbone_cls = TranslatorBackbone
    preprocessor_cls = TranslatorPreprocessor
    # The trained models that ship with zoo, by name: package data in presets/, so that they
    # load from an installed zoo too; each a link to its one copy in git,
    # saved_models/NAME/model.keras.
    shipped = ("translator-en-de",)
    presets_dir = os.path.join(os.path.dirname(__file__), "presets")
    methods = METHODS  # the searches of generate
    search = staticmethod(translator_search)  # (backbone, method, max_length, ...) -> ids search
    serving_class = TranslatorServing  # the signatures of export_serving
    preset_config = staticmethod(get_config)  # an architecture preset's config

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # A preprocessor that reads more source tokens than the backbone has positions for
        # would hand it sources it cannot read (a silent wrong answer, not an error).
        positions = self.source_positions(backbone)
        if preprocessor is not None and positions is not None and (
                preprocessor.max_length is None or preprocessor.max_length > positions):
            raise ValueError(
                f"The preprocessor reads {preprocessor.max_length} source tokens, more than "
                f"the {positions} that {backbone.name!r} reads: pass a preprocessor of "
                f"max_length={positions} (preprocessor.with_max_length({positions})).")
        super().__init__(backbone, preprocessor, **kwargs)

    def compile(self, optimizer="auto", loss="auto", *, weighted_metrics="auto",
                sampler=None, **kwargs):  # fmt: skip
        """Keras's ``compile``, with defaults for fine-tuning, and the search of ``generate``.

        Args:
            optimizer: ``"auto"`` is Adam at 1e-4.
            loss: ``"auto"`` is the cross entropy over the logits (the preprocessor's sample
                weights leave the padding out).
            weighted_metrics: ``"auto"`` is the token accuracy.
            sampler: the search of :meth:`generate`: ``"beam"`` (None: the first of
                :attr:`methods`), ``"greedy"`` or ``"sample"``.
        """
        sampler = sampler or self.methods[0]
        if sampler not in self.methods:
            raise ValueError(f"sampler={sampler!r}: the {type(self).__name__}'s searches are "
                             f"{self.methods}")  # fmt: skip
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-4)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        keras.Model.compile(self, optimizer=optimizer, loss=loss,
                            weighted_metrics=weighted_metrics, **kwargs)  # fmt: skip
        self.sampler = sampler

    def get_compile_config(self):
        # Only the search: a loaded translator is compiled afresh with the defaults.
        return {"sampler": self.sampler} if self.compiled else None

    def generate(self, inputs, method=None, beam_size=4, max_length=None, batch_size=64,
                 verbose=False, **search_options):  # fmt: skip
        """Translate: a sentence, or a list of them.

        Args:
            inputs: a ``str`` or a list of ``str``.
            method: the search, by default the ``sampler`` of :meth:`compile` (``"beam"``).
            beam_size, max_length, batch_size, verbose, **search_options: those of
                :func:`zoo.decoding.translate_sentences` and of the search (``alpha``,
                ``seed``, ...).

        Returns:
            A ``str`` for a ``str``, else a list of ``str``.
        """
        if self.preprocessor is None:
            raise ValueError("generate() needs the preprocessor's vocabulary; this Translator "
                             "has none.")  # fmt: skip
        single = isinstance(inputs, str)
        outputs = translate_sentences(
            self.backbone, self.preprocessor, [inputs] if single else list(inputs), self.search,
            method=method or getattr(self, "sampler", None) or self.methods[0],
            beam_size=beam_size, max_length=max_length, batch_size=batch_size, verbose=verbose,
            **self.search_options(search_options),
        )  # fmt: skip
        return outputs[0] if single else outputs

    def attention_weights(self, source, target):
        """Every attention map of the model over one sentence and its translation.

        Args:
            source: the sentence (``str``).
            target: its translation (``str``), which the decoder reads after BOS.

        Returns:
            ``(weights, source_pieces, target_pieces)``: ``weights`` is
            ``{"encoder_self", "decoder_self", "cross"}``, one NumPy array per block, of shape
            ``(N, S, S)``, ``(N, T, T)`` and ``(N, T, S)`` (a row is where that position
            attends); the pieces label the axes, the target's starting with ``<s>``.
        """
        inputs, _, _ = self.preprocessor([source], [target])
        weights = attention_weights(self.backbone, inputs["source"], inputs["target_in"])
        pieces = [[piece.decode() for piece in
                   self.preprocessor.tokenizer.id_to_piece(inputs[name][0]).numpy()]
                  for name in ("source", "target_in")]  # fmt: skip
        arrays = {kind: [keras.ops.convert_to_numpy(w)[0] for w in maps]
                  for kind, maps in weights.items()}  # fmt: skip
        return arrays, pieces[0], pieces[1]

    def export_serving(self, output_dir, max_input_length=None, verbose=False,
                       version=SERVING_VERSION, assets_extra=None, warmup_xla=False,
                       **options):  # fmt: skip
        """Write the export folder that TF Serving serves as it is: ``model.keras``
        (uncompiled), ``sentencepiece.model`` and the SavedModel ``serving/<version>/``, whose
        signatures (:attr:`serving_class`; ``saved_models/README.md``) take sentences and give
        translations. Everything is checked before anything is written. Not Keras's
        ``export``, which writes the backbone's forward pass.

        Args:
            output_dir: the folder (created if missing; its files are replaced).
            max_input_length: the most source tokens read per sentence (longer sentences are
                truncated); by default the preprocessor's.
            verbose: draw a progress bar on stderr over the export's stages.
            version: the SavedModel's version, ``serving/<version>/`` (``serving/`` is TF
                Serving's base path).
            assets_extra: file name -> bytes for the SavedModel's ``assets.extra/`` (the
                languages: ``zoo export`` writes them).
            warmup_xla: the warm-up file also compiles every program of the ``_xla``
                signatures, for a server started with ``--xla_cpu_compilation_enabled=true``
                (the model then fails to load on one without it).
            **options: the signatures' settings (:attr:`serving_class`): ``max_output_length``,
                and a translator's ``default_beam_size`` and ``alpha``, a NAT's
                ``default_iterations`` and ``default_length_beam``.

        Returns:
            ``output_dir``, as a ``str``.
        """
        backbone = float32_model(self.backbone)  # a mixed-precision model serves in float32
        serving = self.serving_class(
            backbone, self.preprocessor.with_max_length(max_input_length), **options
        )
        model = self
        if self.compiled or backbone is not self.backbone:  # its file: no optimizer, float32
            model = type(self)(backbone, self.preprocessor, compile=False, name=self.name)

        def write_vocabulary(path):
            with open(path, "wb") as f:
                f.write(serving.tokenizer.model_proto)

        return write_export(
            output_dir, backbone, SENTENCEPIECE_FILE, write_vocabulary, serving, verbose=verbose,
            version=version, assets_extra=assets_extra,
            warmup=serving.warmup_requests(xla=warmup_xla), keras_model=model,
        )

    @staticmethod
    def source_positions(backbone):
        """The most source tokens ``backbone`` reads (None: unbounded)."""
        return translator_layers(backbone).max_source_length

    def search_options(self, options):
        """The search's options as :meth:`generate` passes them on (here: as given)."""
        return options

    @classmethod
    def from_backbone(cls, backbone, vocabulary, copy=True, **kwargs):
        """A translator of a trained backbone and its vocabulary (a
        :class:`~zoo.data.SentencePieceTokenizer` or a ``.model`` path), uncompiled, so that
        its file holds no optimizer; loading compiles it afresh. With ``copy``, over a copy of
        the backbone: a training run's backbone carries its optimizer, whose config a loader
        would need."""
        backbone = cls.trained_backbone(backbone, copy)
        preprocessor = TranslatorPreprocessor(vocabulary, cls.source_positions(backbone))
        return cls(backbone, preprocessor, **{"compile": False, **kwargs})

    @classmethod
    def from_architecture(cls, preset, vocabulary, name=None, **overrides):
        """A new, untrained translator: an architecture preset (``"tiny"``, ``"small"``,
        ``"base"``, ...) with any field overridden, and a SentencePiece ``.model`` file."""
        preprocessor = TranslatorPreprocessor(vocabulary)
        overrides.setdefault("vocab_size", preprocessor.vocabulary_size)
        config = cls.preset_config(preset, **overrides)
        backbone = cls.backbone_cls.from_architecture(config, name=name)
        preprocessor.max_length = cls.source_positions(backbone)
        return cls(backbone, preprocessor)
