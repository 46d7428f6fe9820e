"""The NAT as a task model, in keras-hub's shape: the translator's task model over a
:class:`~zoo.models.nat.NATBackbone`, decoded in parallel (Mask-Predict, or a CTC decoder's one
pass)."""

import os

import keras

from zoo.models.nat.backbone import NATBackbone
from zoo.models.nat.config import get_config
from zoo.models.nat.inference import nat_source_positions
from zoo.models.nat.search import METHODS, nat_counts, nat_translator_search
from zoo.models.nat.serving import NATServing
from zoo.models.translator.translator import Translator

__all__ = ["NATTranslator"]


@keras.saving.register_keras_serializable(package="zoo")
class NATTranslator(Translator):
    """A non-autoregressive translator: strings in, strings out, every position at once.

    Args:
        backbone: a :class:`~zoo.models.nat.NATBackbone`.
        preprocessor: a :class:`~zoo.models.TranslatorPreprocessor` (its vocabulary).

    Example:
        >>> nat = NATTranslator.from_preset("nat-en-de")  # doctest: +SKIP
        >>> nat.generate(["A dog runs in the snow."])  # doctest: +SKIP
        ['Ein Hund rennt im Schnee.']
    """

    backbone_cls = NATBackbone
    shipped = ("nat-en-de",)
    presets_dir = os.path.join(os.path.dirname(__file__), "presets")
    methods = METHODS
    search = staticmethod(nat_translator_search)
    serving_class = NATServing
    preset_config = staticmethod(get_config)
    # The most source tokens the NAT reads (a CTC decoder's upsampled source fits).
    source_positions = staticmethod(nat_source_positions)

    def search_options(self, options):
        """``iterations`` and ``length_beam`` (None: the model's defaults, :func:`nat_counts`)."""
        iterations, length_beam = nat_counts(
            self.backbone, options.pop("iterations", None), options.pop("length_beam", None)
        )
        return {**options, "iterations": iterations, "length_beam": length_beam}

    def preprocess_samples(self, x, y=None, sample_weight=None):
        raise NotImplementedError(
            "fit() on string pairs packs a left-to-right translator's targets; a NAT's "
            "masked targets come from `zoo train nat` (zoo.training.train)"
        )
