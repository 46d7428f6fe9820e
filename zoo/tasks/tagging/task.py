"""The tagging task: UPOS (and optionally XPOS) on UD English-EWT with the encoder-only tagger.

Vocabulary: words and characters of the training sentences (:class:`TaggerVocabulary`), which
fix the model's input sizes. Data: word-budget batches with word dropout. Model:
:func:`zoo.models.build_tagger` with a CRF or softmax head per tag set; the epoch with the best
dev accuracy is kept. Evaluation: accuracy overall and on OOV words. Export: ``model.keras``,
``vocabulary.json`` and a sentences-to-tags SavedModel.
"""

import dataclasses
import os

from zoo.artifacts import TAGGER_VOCABULARY_FILE, written_atomically
from zoo.data import TaggerVocabulary, load_ud_english_ewt
from zoo.data.tagging_pipeline import make_tagging_dataset
from zoo.layers import CRFAccuracy, CRFLoss
from zoo.models.tagger import PRESETS, TaggerConfig, build_tagger
from zoo.tasks.tagging.evaluation import evaluate_tagger
from zoo.tasks.tagging.search import tag_sentences
from zoo.tasks.tagging.serving import export_tagger
from zoo.tasks.task import Task
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.metrics import MaskedAccuracy
from zoo.training.optimizer import make_optimizer

__all__ = ["TaggingTask"]


class TaggingTask(Task):
    """Train, evaluate, export and run a :func:`~zoo.models.build_tagger` model.

    A config with a nonzero ``num_xpos_tags`` asks for an XPOS head; the vocabulary sets the
    real count. The tagger keeps the epoch with the best dev UPOS accuracy.
    """

    name = "tagger"
    config_class = TaggerConfig
    presets = PRESETS
    vocabulary_file = TAGGER_VOCABULARY_FILE
    validation_split = "dev"
    evaluation_splits = ("dev", "test")
    exporter = staticmethod(export_tagger)
    splits = ("train", "dev", "test")
    predict_verb = "tag"

    def load_data(self, split):
        return load_ud_english_ewt(split)

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        vocabulary = TaggerVocabulary.build(
            train_data,
            min_count=config.min_word_count,
            lowercase=config.lowercase,
            max_word_length=config.max_word_length,
        )
        with written_atomically(os.path.join(workdir, TAGGER_VOCABULARY_FILE)) as temporary:
            vocabulary.save(temporary)

    def load_vocabulary(self, folder):
        return TaggerVocabulary.load(os.path.join(folder, TAGGER_VOCABULARY_FILE))

    def resolve_config(self, config, vocabulary):
        """The sizes that the vocabulary fixes: words, characters and, for an XPOS head, tags."""
        overrides = vocabulary.config_overrides()
        if config.num_xpos_tags:
            overrides["num_xpos_tags"] = vocabulary.num_xpos_tags
        return dataclasses.replace(config, **overrides)

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None):
        return make_tagging_dataset(
            data,
            vocabulary,
            batch_tokens=config.batch_tokens,
            max_length=config.max_length,
            shuffle=training,
            seed=0,
            word_dropout=config.word_dropout if training else 0.0,
            xpos=bool(config.num_xpos_tags),
            pad_to_bucket=jit_compile,
            batch_multiple=batch_multiple,
            epoch=epoch,
        )

    def build_model(self, config):
        return build_tagger(config)

    def compile_model(self, model, config, jit_compile=False):
        """:func:`~zoo.training.make_optimizer`, and per head the CRF negative log-likelihood
        and Viterbi accuracy, or label-smoothed cross entropy and argmax accuracy (both
        accuracies count every real token once).

        Both read the padding mask from the model's outputs (their Keras implicit mask).
        """

        def loss_and_metric():
            if config.use_crf:
                return CRFLoss(), CRFAccuracy(name="accuracy")
            # Every label id is a real tag (0 is ADJ): padding is known only from the mask.
            loss = MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing, pad_id=-1)
            return loss, MaskedAccuracy(name="accuracy")

        heads = ["upos", "xpos"] if config.num_xpos_tags else ["upos"]
        pairs = {head: loss_and_metric() for head in heads}
        if len(heads) == 1:
            loss, metrics = pairs["upos"][0], [pairs["upos"][1]]
        else:
            loss = {head: pair[0] for head, pair in pairs.items()}
            metrics = {head: [pair[1]] for head, pair in pairs.items()}
        model.compile(
            optimizer=make_optimizer(config), loss=loss, metrics=metrics, jit_compile=jit_compile
        )
        return model

    def best_metric(self, config):
        return "val_upos_accuracy" if config.num_xpos_tags else "val_accuracy"

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False):
        report = evaluate_tagger(model, vocabulary, split, output_dir, verbose=verbose)
        lines = []
        for head in ("upos", "xpos"):
            if head in report:
                scores = report[head]
                lines.append(
                    f"{split} {head.upper()}: accuracy {scores['accuracy']:.2f} "
                    f"({scores['tokens']} words), OOV accuracy {scores['oov_accuracy']:.2f} "
                    f"({scores['oov_tokens']} OOV words); scores and tags in {output_dir}"
                )
        return lines

    def predict(self, model, vocabulary, lines, verbose=False):
        sentences = [line.split() for line in lines]
        tags = tag_sentences(model, vocabulary, sentences, verbose=verbose)
        return [
            " ".join(f"{word}/{tag}" for word, tag in zip(words, sentence_tags))
            for words, sentence_tags in zip(sentences, tags)
        ]
