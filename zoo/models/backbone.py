"""The base of zoo's backbones: a keras-hub ``Backbone`` whose config is its architecture."""

import dataclasses

from keras_hub.models import Backbone

__all__ = ["ArchitectureBackbone"]


class ArchitectureBackbone(Backbone):
    """A keras-hub backbone whose config is its architecture: the fields of the model's config,
    :attr:`config_class`, whose checks name a bad argument and whose defaults fill the
    others. A subclass makes its layers and its graph in :meth:`build_graph`, and reads the
    layers it returns (:attr:`parts`) by role, never by name. A Functional model's weights are
    saved by its graph's layers, in the order they are called, so the weights files of zoo
    0.1.0's functional models, whose layers and calls were the same, load as they are.
    """

    config_class = None
    default_name = None

    def __init__(self, name=None, dtype=None, **kwargs):
        architecture = {field: kwargs.pop(field) for field in self.architecture_fields()
                        if field in kwargs}  # fmt: skip
        inputs, outputs, parts = self.build_graph(self.config_class(**architecture))
        super().__init__(inputs=inputs, outputs=outputs, name=name or self.default_name,
                         dtype=dtype, **kwargs)  # fmt: skip
        self.parts = parts
        self._architecture = architecture

    @staticmethod
    def build_graph(config):
        """``(inputs, outputs, parts)`` on symbolic inputs: ``parts`` holds the layers by
        role (the subclass's own dataclass)."""
        raise NotImplementedError

    @classmethod
    def architecture_fields(cls):
        """The backbone's arguments: the names of its model config's fields."""
        return tuple(field.name for field in dataclasses.fields(cls.config_class))

    @property
    def architecture(self):
        """The model config (:attr:`config_class`) that this backbone was built from."""
        return self.config_class(**self._architecture)

    @classmethod
    def from_architecture(cls, config, name=None):
        """The backbone of a config's architecture: a model config, or a run's config, which
        holds one."""
        return cls(**{field: getattr(config, field) for field in cls.architecture_fields()},
                   name=name)  # fmt: skip

    @classmethod
    def from_functional(cls, model, config):
        """The backbone of a functional model saved by zoo 0.1.0, with its weights: those of
        the same layers, in the same order, by the same paths (a one-line error otherwise).

        Args:
            model: the ``keras.Model`` of its ``model.keras`` file.
            config: the training config of its workdir's ``config.json``.
        """
        backbone = cls.from_architecture(config, name=model.name)
        old = [weight.path for weight in model.weights]
        new = [weight.path for weight in backbone.weights]
        if old != new:
            raise ValueError(f"{model.name!r} does not have the weights of its config.json's "
                             f"{backbone.name}: {len(old)} weights against {len(new)}")  # fmt: skip
        backbone.set_weights(model.get_weights())
        return backbone

    def get_config(self):
        architecture = {field: list(value) if isinstance(value, tuple) else value
                        for field, value in self._architecture.items()}  # fmt: skip
        return {**super().get_config(), **architecture}
