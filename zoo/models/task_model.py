"""What zoo's task models share, in keras-hub's shape: the backbone's graph with its
preprocessor beside it, saved and loaded as it was, and trained models by name."""

import re
import warnings

from zoo.decoding.text import forget_compiled
from zoo.models.presets import load_trained

__all__ = ["TaskModel"]


class TaskModel:
    """A mixin before keras-hub's ``Task`` (or ``Seq2SeqLM``) in a task model's bases.

    Attributes:
        backbone_cls: the backbone's class.
        shipped: the names of the trained models that ship with zoo, package data in
            ``presets_dir`` (each a link to its one copy in git, ``saved_models/NAME``).
    """

    backbone_cls = None
    shipped = ()
    presets_dir = None

    def __init__(self, backbone, preprocessor=None, **kwargs):
        self.backbone = backbone
        self.preprocessor = preprocessor
        inputs = backbone.input
        kwargs.setdefault("name", backbone.name)  # the task's name, as zoo.tasks reads it
        super().__init__(inputs=inputs, outputs=backbone(inputs), **kwargs)

    def get_config(self):
        # Loaded as it was saved: compiled (compile_from_config) only if it was, so that Keras
        # looks for no optimizer in a file without one; quantized if it was (below).
        config = {**super().get_config(), "compile": False}
        # Each quantized layer by its path: quantize(filters=...) may have left others float.
        quantized = {layer.path: layer.quantization_mode
                     for layer in self.backbone._flatten_layers() if layer.quantization_mode}
        if quantized:
            config["quantization"] = quantized
        return config

    @classmethod
    def from_config(cls, config):
        # A quantized model's layers are built as the architecture says (float) and quantized
        # before Keras loads the file's weights into them: their int8 weights and scales.
        config = dict(config)
        quantized = config.pop("quantization", None)
        model = super().from_config(config)
        if isinstance(quantized, str):  # a file that named one mode for every layer
            quantized = {layer.path: quantized for layer in model.backbone._flatten_layers()}
        for mode in sorted(set((quantized or {}).values())):
            paths = {path for path, its_mode in quantized.items() if its_mode == mode}
            with warnings.catch_warnings():  # "layer X has no quantize method": its norms...
                warnings.simplefilter("ignore", UserWarning)
                model.quantize(mode, filters=lambda layer, paths=paths: layer.path in paths)
        return model

    def compile_from_config(self, config):
        self.compile(**config)

    def quantize(self, mode=None, **kwargs):
        """Keras's ``quantize`` (``"int8"``: int8 weights, each with its scale, and int8
        matmuls) of the backbone's layers. The preprocessor holds no weights: it is left as
        it is. The searches compiled for the model before are dropped: they read the float
        weights. Keras warns once for each layer it leaves in float (every norm and dropout):
        one warning here names their kinds."""
        if self.preprocessor is not None:
            self.preprocessor.built = True  # nothing to build: Keras refuses unbuilt layers
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super().quantize(mode, **kwargs)
        kept = set()
        for warning in caught:
            found = re.match(r"Layer (\w+) does not have a `quantize` method", str(warning.message))
            if found:
                kept.add(found.group(1))
            else:  # anything else Keras said, as it said it
                warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                       warning.lineno)  # fmt: skip
        if kept:
            warnings.warn(f"quantize({mode!r}) left the layers of these kinds in float: "
                          f"{', '.join(sorted(kept))}", stacklevel=2)  # fmt: skip
        forget_compiled(self.backbone)

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A trained model, compiled to fine-tune as keras-hub's are: a shipped one's name
        (:attr:`shipped`), a ``.keras`` file, or a folder that holds ``model.keras``."""
        model = load_trained(cls, preset, **kwargs)
        if not model.compiled:
            model.compile()
        return model

    @classmethod
    def trained_backbone(cls, backbone, copy):
        """``backbone``, checked to be a :attr:`backbone_cls`; with ``copy``, a copy of it of
        the same weights (a training run's backbone carries its optimizer, whose config a
        loader would need)."""
        if not isinstance(backbone, cls.backbone_cls):
            raise ValueError(f"A {cls.__name__} needs a {cls.backbone_cls.__name__}, not the "
                             f"{type(backbone).__name__} {backbone.name!r}")  # fmt: skip
        if copy:
            backbone, trained = cls.backbone_cls.from_config(backbone.get_config()), backbone
            backbone.set_weights(trained.get_weights())
        return backbone
