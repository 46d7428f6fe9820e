"""The tagging task: UPOS, and optionally XPOS, FEATS and lemmas, on any UD treebank with the
encoder-only tagger.

CoNLL-U files (by default the bundled UD English-EWT) in word-budget batches with word dropout;
the vocabulary fixes the model's sizes; the epoch with the best dev UPOS accuracy (AllTags with
more heads) is kept. Evaluation gives accuracy overall and on OOV words, or the CoNLL 2018
figures of a file.
"""

import dataclasses
import os
import sys

from zoo.artifacts import TAGGER_VOCABULARY_FILE, written_atomically
from zoo.data import TaggerVocabulary, Treebank, batched, load_ud_english_ewt
from zoo.data.conllu import iter_conllu
from zoo.data.tagger_vocabulary import HEAD_COLUMNS, HEAD_FIELDS
from zoo.data.tagging_pipeline import make_tagging_dataset
from zoo.layers import CRFAccuracy, CRFLoss
from zoo.models.tagger import HEAD_SIZES, build_tagger
from zoo.models.tagger.preprocessor import TaggerPreprocessor
from zoo.models.tagger.tagger import Tagger  # the module: see zoo/tasks/translation
from zoo.tasks.tagging.config import PRESETS, TaggerRun
from zoo.tasks.tagging.evaluation import evaluate_tagger, evaluate_tagger_file
from zoo.tasks.tagging.validation import ValidationAllTags
from zoo.tasks.task import EvaluationFiles, Task
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.metrics import MaskedAccuracy
from zoo.training.optimizer import make_optimizer

__all__ = ["CONLLU_WINDOW", "TaggingTask"]

CONLLU_WINDOW = 2_000  # sentences of a CoNLL-U file tagged together (zoo tag --conllu)
HEAD_FLAGS = {"xpos": "--xpos", "feats": "--feats", "lemma": "--lemmas"}  # beyond UPOS


def _share(what, accuracy, words):
    return f"{what} {'-' if accuracy is None else f'{accuracy:.2f}'} ({words} words)"


class TaggingTask(Task):
    """Train, evaluate, export and run a :func:`~zoo.models.build_tagger` model.

    A config with a nonzero ``num_xpos_tags``, ``num_feats_tags`` or ``num_lemma_scripts`` asks
    for that head; the vocabulary sets the real counts. The tagger keeps the epoch with the
    best dev UPOS accuracy, or with more heads the best dev AllTags (``val_alltags``).
    """

    name = "tagger"
    config_class = TaggerRun
    run_presets = PRESETS
    vocabulary_file = TAGGER_VOCABULARY_FILE
    validation_split = "dev"
    evaluation_splits = ("dev", "test")
    task_model = Tagger  # what model.keras holds: keras-hub's shape

    def load_data(self, split):
        return load_ud_english_ewt(split)

    def training_data(self, config, files=None):
        """The sentences of ``files`` (``--train``: CoNLL-U paths or globs), read and checked
        now; by default EWT's training split."""
        if files:
            return Treebank(files, flag="--train")
        return self.load_data(self.train_split)

    def validation_data(self, config, files=None):
        """The sentences of ``files`` (``--valid``), by default EWT's dev split."""
        if files:
            return Treebank(files, flag="--valid").sentences
        return self.load_data(self.validation_split)

    def data_fingerprint(self, data):
        return data.fingerprint() if isinstance(data, Treebank) else None

    def languages(self, config):
        return {"language": config.language, "treebank": config.treebank}

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        """The vocabulary of the training sentences; a head asked of a column that they leave
        blank (``_`` throughout) is refused, naming the column."""
        for head in config.heads[1:]:
            if all(value == "_" for s in train_data for value in getattr(s, HEAD_FIELDS[head])):
                raise ValueError(
                    f"{HEAD_FLAGS[head]}: the training data's {HEAD_COLUMNS[head]} column is "
                    f"blank ('_' throughout): there is nothing for a {head} head to learn"
                )
        vocabulary = TaggerVocabulary.build(
            train_data,
            min_count=config.min_word_count,
            lowercase=config.lowercase,
            max_word_length=config.max_word_length,
            feats=bool(config.num_feats_tags),
            lemmas=bool(config.num_lemma_scripts),
        )
        with written_atomically(os.path.join(workdir, TAGGER_VOCABULARY_FILE)) as temporary:
            vocabulary.save(temporary)

    def load_vocabulary(self, folder):
        return TaggerVocabulary.load(os.path.join(folder, TAGGER_VOCABULARY_FILE))

    def resolve_config(self, config, vocabulary):
        """What the vocabulary fixes: the sizes of words, characters and each head's classes,
        and its lowercasing."""
        overrides = {**vocabulary.config_overrides(), "lowercase": vocabulary.lowercase}
        for head in config.heads[1:]:
            overrides[HEAD_SIZES[head]] = len(vocabulary.classes(head))
        return dataclasses.replace(config, **overrides)

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None, counts=None, part=None):
        """Training data must have only the vocabulary's classes (it was made from them);
        validation data may have tags that training never saw: each is scored as an error,
        and their count is said on stderr. With ``part``, this worker's share of the
        sentences, in batches of one replica's share of the word budget."""
        del counts  # nothing to count: a long sentence is split, and CoNLL-U has no empty one
        unseen = {}
        dataset = make_tagging_dataset(
            data,
            TaggerPreprocessor(vocabulary),
            batch_tokens=config.batch_tokens // (part.replicas if part else 1),
            max_length=config.max_length,
            shuffle=training,
            seed=0,
            word_dropout=config.word_dropout if training else 0.0,
            heads=config.heads,
            pad_to_bucket=jit_compile,
            batch_multiple=batch_multiple,
            epoch=epoch,
            unseen_tags="error" if not training else "raise",
            unseen_counts=unseen,
            part=part[:2] if part else None,
        )
        for head, count in unseen.items():
            if count:
                what = "lemma(s) whose edit script" if head == "lemma" else (
                    f"{HEAD_COLUMNS[head]} tag(s) that")  # fmt: skip
                print(f"the validation data has {count} {what} the training data never had: "
                      "each is scored as an error", file=sys.stderr, flush=True)
        return dataset

    def build_model(self, config):
        return build_tagger(config)

    def compile_model(self, model, config, jit_compile=False):
        """:func:`~zoo.training.make_optimizer`, and per head the CRF negative log-likelihood
        and Viterbi accuracy, or label-smoothed cross entropy and argmax accuracy (both
        accuracies count every real token once).

        Both read the padding mask from the model's outputs (their Keras implicit mask).
        """

        def loss_and_metric(head):
            if config.head_uses_crf(head):
                return CRFLoss(), CRFAccuracy(name="accuracy")
            # Every label id is a real tag (0 is ADJ): padding is known only from the mask.
            loss = MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing, pad_id=-1)
            return loss, MaskedAccuracy(name="accuracy")

        heads = config.heads
        pairs = {head: loss_and_metric(head) for head in heads}
        if len(heads) == 1:
            loss, metrics = pairs["upos"][0], [pairs["upos"][1]]
        else:
            loss = {head: pair[0] for head, pair in pairs.items()}
            metrics = {head: [pair[1]] for head, pair in pairs.items()}
        model.compile(
            optimizer=make_optimizer(config), loss=loss, metrics=metrics, jit_compile=jit_compile
        )
        return model

    def metric_callbacks(self, config, vocabulary, validation_data):
        if len(config.heads) == 1:
            return []
        return [ValidationAllTags(lambda model: self.as_task_model(model, vocabulary),
                                  validation_data)]  # fmt: skip

    def best_metric(self, config):
        return "val_alltags" if len(config.heads) > 1 else "val_accuracy"

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False):
        if isinstance(split, EvaluationFiles):  # zoo evaluate --gold F: the CoNLL 2018 figures
            report = evaluate_tagger_file(self.as_task_model(model, vocabulary), split.source,
                                          output_dir, verbose=verbose)  # fmt: skip
            figures = "  ".join(f"{name} {value:.2f}" for name, value in report["figures"].items())
            oov, unseen = report["oov"], report["unseen"]
            upos_on = [_share("OOV", oov["oov_accuracy"], oov["oov_tokens"])]
            if unseen is None:
                upos_on.append("words unseen in training: not recorded by this vocabulary")
            else:
                upos_on.append(_share("unseen in training", unseen["unseen_accuracy"],
                                      unseen["unseen_tokens"]))  # fmt: skip
            return [f"{split.source}: {figures} ({report['words']} words, gold tokenization); "
                    f"UPOS on words {'; on '.join(upos_on)}; predicted file "
                    f"{report['predicted']}"]  # fmt: skip
        report = evaluate_tagger(self.as_task_model(model, vocabulary), split, output_dir,
                                 verbose=verbose)  # fmt: skip
        lines = []
        for head in HEAD_COLUMNS:
            if head in report:
                scores = report[head]
                lines.append(
                    f"{split} {head.upper()}: accuracy {scores['accuracy']:.2f} "
                    f"({scores['tokens']} words), OOV accuracy {scores['oov_accuracy']:.2f} "
                    f"({scores['oov_tokens']} OOV words); scores and tags in {output_dir}"
                )
        return lines

    def predict_file(self, model, vocabulary, source, output, verbose=False):
        """Tag a CoNLL-U file (a path, or a binary stream) and write it to ``output`` with
        the columns of the model's heads filled (UPOS, and XPOS, FEATS, LEMMA): every other
        byte as it was, the columns to predict may be ``_``. Read in windows of :data:`CONLLU_WINDOW` sentences, so that
        memory stays bounded whatever the file's length."""
        tagger, done = self.as_task_model(model, vocabulary), 0
        for window in batched(iter_conllu(source, require_upos=False), CONLLU_WINDOW):
            tags = tagger.tag_columns([list(sentence.words) for sentence in window])
            for i, sentence in enumerate(window):
                columns = {HEAD_COLUMNS[head]: values[i] for head, values in tags.items()}
                output.write(sentence.filled(**columns).text().encode("utf-8"))
            output.flush()
            done += len(window)
            if verbose:
                print(f"{done} sentences tagged", file=sys.stderr, flush=True)

    def predict(self, model, vocabulary, lines, verbose=False):
        tagged = self.as_task_model(model, vocabulary).tag(lines, verbose=verbose)
        return [" ".join(f"{token['form']}/{token['upos']}" for token in sentence)
                for sentence in tagged]  # fmt: skip
