"""What zoo's task models share, in keras-hub's shape: the backbone's graph with its
preprocessor beside it, saved and loaded as it was, and trained models by name."""

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
        # looks for no optimizer in a file without one.
        return {**super().get_config(), "compile": False}

    def compile_from_config(self, config):
        self.compile(**config)

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
