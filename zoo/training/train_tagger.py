"""Training a tagger: ``train_tagger(config, workdir)``, importable from notebooks and tests."""

import dataclasses
import os

import keras

from zoo.data import TaggerVocabulary, load_ud_english_ewt
from zoo.data.tagging_pipeline import make_tagging_dataset
from zoo.layers import CRFAccuracy, CRFLoss
from zoo.models.tagger import TaggerConfig, build_tagger
from zoo.training.callbacks import BestCheckpoint
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.metrics import MaskedAccuracy
from zoo.training.strategy import get_strategy
from zoo.training.train import (
    check_config,
    make_optimizer,
    standard_callbacks,
    training_dtype_policy,
)

VOCABULARY_FILE = "vocabulary.json"
BEST_FILE = "best.keras"


def prepare_tagger_vocabulary(config, workdir, sentences):
    """Build (once) the workdir's :class:`TaggerVocabulary` from the training sentences."""
    path = os.path.join(workdir, VOCABULARY_FILE)
    if os.path.exists(path):
        return TaggerVocabulary.load(path)
    vocabulary = TaggerVocabulary.build(
        sentences,
        min_count=config.min_word_count,
        lowercase=config.lowercase,
        max_word_length=config.max_word_length,
    )
    vocabulary.save(path)
    return vocabulary


def resolve_tagger_config(config, vocabulary):
    """``config`` with the sizes that the vocabulary fixes (words, characters, XPOS tags).

    A nonzero ``num_xpos_tags`` asks for an XPOS head; it becomes the vocabulary's count.
    """
    overrides = vocabulary.config_overrides()
    if config.num_xpos_tags:
        overrides["num_xpos_tags"] = vocabulary.num_xpos_tags
    return dataclasses.replace(config, **overrides)


def compile_tagger(model, config, jit_compile=False):
    """:func:`~zoo.training.train.make_optimizer`, and per head the CRF negative log-likelihood
    and Viterbi accuracy, or label-smoothed cross entropy and argmax accuracy (both accuracies
    count every real token once).

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


def train_tagger(
    config,
    workdir,
    strategy="auto",
    jit_compile=False,
    mixed_precision=False,
    time_limit=None,
    train_sentences=None,
    dev_sentences=None,
    callbacks=(),
    verbose="auto",
):
    """Train a tagger with Keras ``fit``, keep the best epoch on dev; resumable after a crash.

    The workdir receives ``config.json`` (the config resolved with the vocabulary's sizes),
    ``vocabulary.json``, ``checkpoint.keras`` (after every epoch), ``best.keras`` (the epoch
    with the best dev UPOS accuracy so far), ``backup/`` (rerunning the same command resumes
    from the last finished epoch), ``logs/`` (TensorBoard) and finally ``model.keras``: the
    best dev epoch.

    Args:
        config: a ``TaggerConfig`` (its vocabulary sizes are replaced by the vocabulary's).
        workdir: the folder of this run (created if missing).
        strategy: a name for ``zoo.training.strategy.get_strategy``.
        jit_compile: compile the train step with XLA (batches are then padded to their
            bucket's bound, so that XLA compiles few shapes).
        mixed_precision: train under ``mixed_bfloat16``.
        time_limit: stop after this many seconds (the best model is still saved).
        train_sentences, dev_sentences: ``zoo.data.Sentence`` lists; UD English-EWT train and
            dev by default.
        callbacks: more Keras callbacks.
        verbose: ``fit``'s verbosity; "auto" shows the progress bar.

    Returns:
        ``(model, history, vocabulary)``, the model being the best dev epoch.
    """
    if not isinstance(config, TaggerConfig):
        raise TypeError(f"config must be a TaggerConfig, got {type(config).__name__}.")
    os.makedirs(workdir, exist_ok=True)
    train_sentences = load_ud_english_ewt("train") if train_sentences is None else train_sentences
    dev_sentences = load_ud_english_ewt("dev") if dev_sentences is None else dev_sentences
    vocabulary = prepare_tagger_vocabulary(config, workdir, train_sentences)
    config = resolve_tagger_config(config, vocabulary)
    check_config(config, workdir)

    def dataset(sentences, training):
        return make_tagging_dataset(
            sentences,
            vocabulary,
            batch_tokens=config.batch_tokens,
            max_length=config.max_length,
            shuffle=training,
            seed=0,
            word_dropout=config.word_dropout if training else 0.0,
            xpos=bool(config.num_xpos_tags),
            pad_to_bucket=jit_compile,
        )

    monitor = "val_upos_accuracy" if config.num_xpos_tags else "val_accuracy"
    best_path = os.path.join(workdir, BEST_FILE)
    best = BestCheckpoint(best_path, monitor)
    with training_dtype_policy(mixed_precision):
        with get_strategy(strategy).scope():
            model = compile_tagger(build_tagger(config), config, jit_compile)
        history = model.fit(
            dataset(train_sentences, training=True),
            validation_data=dataset(dev_sentences, training=False),
            epochs=config.epochs,
            callbacks=standard_callbacks(
                workdir, time_limit, [best, *callbacks], ema=bool(config.ema_momentum)
            ),
            verbose=verbose,
        )
    if os.path.exists(best_path):
        model.load_weights(best_path)
    model.save(os.path.join(workdir, "model.keras"))
    return model, history, vocabulary
