"""The non-autoregressive translation task: any corpus (Multi30k En->De bundled) with the NAT of
:func:`zoo.models.nat.build_nat_translator`.

The data, vocabulary and workdir are the translation task's; the batches and the loss are the
NAT's own objective's (:func:`zoo.models.nat.objectives.nat_objective`): masked tokens plus
``length_loss_weight`` times the length loss, or the CTC loss.
"""

import keras

from zoo.models.nat import (
    MASK_ID,
    build_nat_translator,
    nat_counts,
    nat_translator_search,
)
from zoo.models.nat.objectives import nat_objective
from zoo.models.nat.translator import NATTranslator  # the module: see zoo/tasks/translation
from zoo.tasks.loading import load_trained
from zoo.tasks.nat.config import PRESETS, NATRun
from zoo.tasks.translation.evaluation import evaluate_translator
from zoo.tasks.translation.task import TranslationTask, bleu_line
from zoo.training.losses import CTCLoss, MaskedSparseCrossEntropy
from zoo.training.optimizer import make_optimizer

__all__ = ["NATTask"]


class NATTask(TranslationTask):
    """Train, evaluate and run the non-autoregressive translator (CMLM) on Multi30k.

    ``evaluate``/``predict`` options: ``iterations`` (Mask-Predict's T) and ``length_beam``
    (the candidate lengths per sentence); 1 and 1 are the one-pass decoder. By default 4 and
    3, or 1 where the model takes one (:func:`zoo.models.nat.nat_counts`).
    ``rescore_with``: the folder of an autoregressive translator of the same vocabulary that
    picks among the length candidates (Gu et al. 2018).
    """

    name = "nat"
    config_class = NATRun
    run_presets = PRESETS
    # val_bleu decodes with the defaults: T=4 l=3, or 1 where the model takes one.
    validation_search = {"method": "mask_predict", "iterations": None, "length_beam": None}
    default_method = "mask_predict"
    search = staticmethod(nat_translator_search)
    task_model = NATTranslator

    def objective(self, config, vocabulary):
        """The NAT's own: masked targets and the length label, or a CTC decoder's targets."""
        return nat_objective(config, vocabulary.eos_id)

    def build_model(self, config):
        return build_nat_translator(config)

    def compile_model(self, model, config, jit_compile=False):
        """The masked tokens' mean cross entropy plus the weighted length cross entropy (with
        glancing, the tokens not revealed); for a CTC decoder, the CTC loss per target token."""
        if config.decoder == "ctc":
            model.compile(optimizer=make_optimizer(config), loss={"tokens": CTCLoss(MASK_ID)},
                          jit_compile=jit_compile)  # fmt: skip
            return model
        # Glancing training labels every position; the logits' mask says which count.
        mean_over = "tokens" if config.glancing_ratio else "labels"
        model.compile(
            optimizer=make_optimizer(config),
            loss={
                "tokens": MaskedSparseCrossEntropy(
                    label_smoothing=config.label_smoothing, mean_over=mean_over
                ),
                "length": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            },
            loss_weights={"tokens": 1.0, "length": config.length_loss_weight},
            metrics={"length": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]},
            jit_compile=jit_compile,
        )
        return model

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False, iterations=None,
                 length_beam=None, rescore_with=None):
        iterations, length_beam = nat_counts(model, iterations, length_beam)
        scores = evaluate_translator(
            self.translate, model, vocabulary, split, output_dir, method="mask_predict",
            verbose=verbose,
            iterations=iterations, length_beam=length_beam,
            rescorer=self._rescorer(rescore_with, vocabulary),
        )
        return [bleu_line(split, scores, output_dir)]

    def predict(self, model, vocabulary, lines, verbose=False, iterations=None,
                length_beam=None, rescore_with=None):
        iterations, length_beam = nat_counts(model, iterations, length_beam)
        return self.translate(
            model, vocabulary, lines, method="mask_predict", iterations=iterations,
            length_beam=length_beam, verbose=verbose,
            rescorer=self._rescorer(rescore_with, vocabulary),
        )

    @staticmethod
    def _rescorer(folder, vocabulary):
        """The autoregressive translator in ``folder`` (a workdir or an export folder), which
        must share the NAT's vocabulary; None without a folder."""
        if folder is None:
            return None
        teacher, teacher_vocabulary = load_trained(folder, TranslationTask())
        if teacher_vocabulary.model_proto != vocabulary.model_proto:
            raise ValueError(
                f"{folder}: its vocabulary is not the NAT's; a rescorer must share it (train the "
                "NAT on the translator's distilled data, or both on one vocabulary)."
            )
        return teacher
