"""The translation task: any language pair, with the autoregressive translator.

Training pairs are the user's files (``--train``, streamed; by default the bundled Multi30k
En->De), with a joint SentencePiece vocabulary learned from a sample of them or given;
token-budget batches with teacher forcing; ``val_bleu`` validation; sacreBLEU evaluation.
"""

import os
import random
import sys
from dataclasses import replace

import keras
import sentencepiece

from zoo.artifacts import SENTENCEPIECE_FILE, SENTENCEPIECE_PREFIX
from zoo.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    ParallelCorpus,
    SentencePieceTokenizer,
    load_multi30k,
    make_translation_dataset,
    multi30k_files,
    train_sentencepiece,
)
from zoo.decoding.text import translate_sentences
from zoo.evaluation import corpus_bleu
# The module, not the package: the package leaves the task model out where TensorFlow was
# missing when it was first imported (a JAX process that imports TensorFlow later).
from zoo.models.translator.preprocessor import TranslatorPreprocessor
from zoo.models.translator.translator import Translator
from zoo.models.translator import build_translator, translator_search
from zoo.tasks.task import Task
from zoo.tasks.translation.config import PRESETS, TranslatorRun
from zoo.tasks.translation.evaluation import evaluate_translator
from zoo.tasks.translation.validation import ValidationScore
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.optimizer import make_optimizer

__all__ = ["LARGE_ALPHABET", "TranslationTask", "bleu_line"]

LARGE_ALPHABET = 1000  # distinct characters from which an alphabet is large (CJK's thousands)


def bleu_line(split, scores, output_dir):
    """The line that ``zoo evaluate`` prints for a split's BLEU scores (BLEU and chrF for
    files)."""
    if "chrf" in scores:
        return (f"{scores['split']}: BLEU {scores['bleu']:.2f} ({scores['bleu_signature']}), "
                f"chrF {scores['chrf']:.2f} ({scores['chrf_signature']}); hypotheses in "
                f"{output_dir}")  # fmt: skip
    return (
        f"{split}: BLEU {scores['bleu']:.2f} ({scores['bleu_signature']}), "
        f"lowercased BLEU {scores['bleu_lowercase']:.2f} "
        f"({scores['bleu_lowercase_signature']}); hypotheses in {output_dir}"
    )


class TranslationTask(Task):
    """Train, evaluate, export and run a :func:`~zoo.models.build_translator` model.

    ``train()`` options: ``bleu_sample_size`` (validation pairs greedy-decoded after each epoch
    for ``val_bleu``; 0 turns it off). ``evaluate``/``predict`` options: ``method``,
    ``beam_size`` (and the other arguments of :meth:`translate`).
    """

    name = "translator"
    config_class = TranslatorRun
    run_presets = PRESETS
    vocabulary_file = SENTENCEPIECE_FILE
    validation_split = "val"
    validation_search = {"method": "greedy"}  # the search behind val_bleu, after each epoch
    # val_bleu: the key of the scores' dict that is logged, and the function that scores.
    validation_metric, validation_scores = "bleu", staticmethod(corpus_bleu)
    evaluation_splits = ("val", "test2016")
    default_method = "beam"
    search = staticmethod(translator_search)  # (model, method, max_length, ...) -> ids search
    task_model = Translator  # what model.keras holds: keras-hub's shape

    def load_data(self, split):
        return load_multi30k(split)

    def training_data(self, config, files=None):
        """The corpus of ``files`` (``--train``: :class:`zoo.data.CorpusFiles` or
        ``(source, target[, weight])``), by default Multi30k's bundled training files; scanned
        now, streamed in training."""
        if files:
            return ParallelCorpus(files, flag="--train")
        return ParallelCorpus([multi30k_files(self.train_split)], flag="the bundled Multi30k")

    def validation_data(self, config, files=None):
        """The pairs of ``files`` (``--valid``), by default Multi30k's validation split."""
        if files:
            return ParallelCorpus(files, flag="--valid").read_pairs()
        return self.load_data(self.validation_split)

    def data_fingerprint(self, data):
        return data.fingerprint() if isinstance(data, ParallelCorpus) else None

    def languages(self, config):
        return {"source": config.source_lang, "target": config.target_lang}

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        """Learn the joint vocabulary from a uniform random sample of at most
        ``config.vocab_sample_size`` sentences of the training pairs (both sides). Its
        character coverage follows the alphabet: every character where the sample has few
        (:data:`LARGE_ALPHABET`), SentencePiece's 0.9995 for a large one (CJK)."""
        if isinstance(train_data, ParallelCorpus):
            texts = train_data.sample_sentences(config.vocab_sample_size)
        else:
            pairs = list(train_data)
            if 2 * len(pairs) > config.vocab_sample_size:
                pairs = random.Random(0).sample(pairs, max(1, config.vocab_sample_size // 2))
            texts = [text for pair in pairs for text in pair]
        characters = len(set().union(*map(set, texts)))
        coverage = 1.0 if characters < LARGE_ALPHABET else 0.9995
        if verbose:
            print(
                f"learning a {config.vocab_size}-piece SentencePiece vocabulary from "
                f"{len(texts)} sentences ({characters} distinct characters: character "
                f"coverage {coverage})", file=sys.stderr, flush=True,
            )
        train_sentencepiece(
            texts, os.path.join(workdir, SENTENCEPIECE_PREFIX), vocab_size=config.vocab_size,
            character_coverage=coverage,
        )

    def check_given_vocabulary(self, path):
        """A SentencePiece model with zoo's special ids (``--sentencepiece-model``)."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--sentencepiece-model {path}: no such file")
        tokenizer = SentencePieceTokenizer(path)  # its error names the file
        ids = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
        if ids != (PAD_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"--sentencepiece-model {path}: its pad, BOS and EOS ids are {ids}, zoo's are "
                f"{(PAD_ID, BOS_ID, EOS_ID)} (train it with zoo.data.train_sentencepiece, or "
                "with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)"
            )

    def adopt_vocabulary(self, config, vocabulary):
        return replace(config, vocab_size=vocabulary.vocab_size)

    def load_vocabulary(self, folder):
        return SentencePieceTokenizer(os.path.join(folder, SENTENCEPIECE_FILE))

    def same_vocabulary(self, folder, other):
        """The same pieces in the same order: two SentencePiece models learned alike from the
        same sentences differ in their bytes (what the trainer recorded), not in their pieces."""
        return _pieces(os.path.join(folder, self.vocabulary_file)) == _pieces(
            os.path.join(other, self.vocabulary_file)
        )

    def resolve_config(self, config, vocabulary):
        if vocabulary.vocab_size != config.vocab_size:
            raise ValueError(
                f"The vocabulary has {vocabulary.vocab_size} pieces, the config says "
                f"vocab_size={config.vocab_size}: use --vocab-size {vocabulary.vocab_size}."
            )
        return config

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None, counts=None, part=None):
        return make_translation_dataset(
            data,
            vocabulary,
            batch_tokens=config.batch_tokens // (part.replicas if part else 1),
            max_length=config.max_length,
            bucket_width=config.bucket_width,
            shuffle=training,
            seed=0,
            pad_to_bucket=jit_compile,  # few distinct shapes, so XLA compiles few programs
            batch_multiple=batch_multiple,
            epoch=epoch,
            shuffle_buffer=config.shuffle_buffer,
            long_pairs=config.long_pairs if training else "truncate",
            counts=counts,
            part=part[:2] if part else None,
            objective=self.objective(config, vocabulary),
        )

    def objective(self, config, vocabulary):
        """What each training pair becomes (the ``objective`` of ``make_translation_dataset``):
        None, the pipeline's teacher forcing."""
        return None

    def build_model(self, config):
        return build_translator(config)

    def compile_model(self, model, config, jit_compile=False):
        """:func:`~zoo.training.make_optimizer` and label-smoothed masked cross entropy."""
        model.compile(
            optimizer=make_optimizer(config),
            loss=MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=jit_compile,
        )
        return model

    def translate(self, model, tokenizer, sentences, method=None, beam_size=4, **options):
        """Sentences in, sentences out, by this task's search (``method``: ``"beam"`` by
        default, ``"greedy"``, ``"sample"``); ``options`` are those of
        :func:`zoo.decoding.translate_sentences` and of the search (``beam_size``,
        ``max_length``, ``batch_size``, ``verbose``, ``alpha``, ``seed``, ...)."""
        backbone = getattr(model, "backbone", None) or model
        preprocessor = getattr(model, "preprocessor", None)
        if preprocessor is None:  # a backbone in training: its run's vocabulary
            positions = self.task_model.source_positions(backbone)
            preprocessor = TranslatorPreprocessor(tokenizer, positions)
        return translate_sentences(
            backbone, preprocessor, sentences, self.search,
            method=method or self.default_method, beam_size=beam_size, **options,
        )  # fmt: skip

    def metric_callbacks(self, config, vocabulary, validation_data, bleu_sample_size=200):
        if not bleu_sample_size:
            return []

        def translate(model, sources):
            return self.translate(
                model, vocabulary, sources, max_length=config.max_length, **self.validation_search
            )

        return [ValidationScore(translate, validation_data, bleu_sample_size,
                                self.validation_metric, self.validation_scores)]  # fmt: skip

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False, method="beam",
                 beam_size=None, alpha=None):
        scores = evaluate_translator(
            self.translate, model, vocabulary, split, output_dir, method=method, verbose=verbose,
            **_beam_options(method, beam_size, alpha, default_beam_size=5),
        )
        return [bleu_line(split, scores, output_dir)]

    def predict(self, model, vocabulary, lines, verbose=False, method="beam", beam_size=None,
                alpha=None):
        return self.translate(
            model, vocabulary, lines, method=method, verbose=verbose,
            **_beam_options(method, beam_size, alpha, default_beam_size=4),
        )


def _pieces(path):
    """The pieces of a SentencePiece model file, in id order."""
    processor = sentencepiece.SentencePieceProcessor(model_file=path)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _beam_options(method, beam_size, alpha, default_beam_size):
    """The options of beam search: ``beam_size`` (None: ``default_beam_size``) and the length
    penalty ``alpha`` (None: the search's default, 0.6).

    Only beam search has beams and ranks hypotheses of different lengths; either option given
    to another search is refused rather than ignored.
    """
    if method != "beam":
        for name, what, value in (("beam_size", "the number of beams", beam_size),
                                  ("alpha", "the length penalty", alpha)):
            if value is not None:
                raise ValueError(f"{name} ({what}) applies to beam search only, not to "
                                 f"method={method!r}")
        return {}
    options = {"beam_size": default_beam_size if beam_size is None else beam_size}
    if alpha is not None:
        options["alpha"] = alpha
    return options
