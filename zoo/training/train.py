"""Training: ``train(config, workdir)``, importable from notebooks and tests; the CLI only parses."""

import contextlib
import dataclasses
import json
import os

import keras

from zoo.data import SentencePieceTokenizer, load_multi30k, make_translation_dataset, train_sentencepiece
from zoo.models.translator import TranslatorConfig, build_translator
from zoo.training.callbacks import TimeLimit, ValidationBleu
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.schedules import InverseSquareRootSchedule
from zoo.training.strategy import get_strategy

VOCAB_PREFIX = "sentencepiece"
_RESUMABLE_FIELDS = ("epochs",)


def check_config(config, workdir):
    """Save the config in the workdir; refuse to resume a workdir made with another config."""
    path = os.path.join(workdir, "config.json")
    fields = dataclasses.asdict(config)
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        # Training longer is a legitimate resume; anything else would mix two models.
        changed = sorted(
            k for k in set(saved) | set(fields)
            if k not in _RESUMABLE_FIELDS and saved.get(k) != fields.get(k)
        )
        if changed:
            raise ValueError(
                f"{path} was written with another config (fields {changed} differ); "
                "use a new --workdir, or the same config to resume."
            )
    else:
        with open(path, "w") as f:
            json.dump(fields, f, indent=2)


@contextlib.contextmanager
def training_dtype_policy(mixed_precision):
    """Build and train under ``mixed_bfloat16`` when asked; restore the global policy after."""
    previous_policy = keras.config.dtype_policy()
    if mixed_precision:
        keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous_policy)


def standard_callbacks(workdir, time_limit=None, extra=(), ema=False):
    """The callbacks of every zoo training run, then ``extra``.

    BackupAndRestore state in ``backup/`` (rerunning the same command resumes from the last
    finished epoch; with more epochs, a finished run trains on), ``checkpoint.keras`` after
    every epoch, TensorBoard logs in ``logs/``, the metrics of every epoch in ``history.csv``,
    and a :class:`TimeLimit` when ``time_limit`` (seconds) is set. With ``ema`` (an optimizer
    with ``use_ema``), validation, ``checkpoint.keras`` and the ``extra`` callbacks see the
    averaged weights; the backup keeps the raw ones, so that a resumed run goes on exactly.
    """
    callbacks = [
        # Kept after the last epoch, so that a longer rerun (more --epochs) goes on from there.
        keras.callbacks.BackupAndRestore(os.path.join(workdir, "backup"), delete_checkpoint=False),
        keras.callbacks.ModelCheckpoint(os.path.join(workdir, "checkpoint.keras")),
        keras.callbacks.TensorBoard(os.path.join(workdir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(workdir, "history.csv"), append=True),
        *extra,
    ]
    if ema:
        # After the backup, before the checkpoints: the weights are swapped at each epoch's end.
        callbacks.insert(1, keras.callbacks.SwapEMAWeights(swap_on_epoch=True))
    if time_limit:
        callbacks.append(TimeLimit(time_limit))
    return callbacks


def prepare_vocabulary(config, workdir, pairs):
    """Learn (once) the joint SentencePiece model of the workdir; return its path."""
    path = os.path.join(workdir, VOCAB_PREFIX + ".model")
    if not os.path.exists(path):
        texts = [text for pair in pairs for text in pair][: config.vocab_sample_size]
        train_sentencepiece(texts, os.path.join(workdir, VOCAB_PREFIX), vocab_size=config.vocab_size)
    return path


def make_optimizer(config):
    """AdamW with the inverse-sqrt warm-up schedule and gradient clipping, from ``config``.

    Reads ``learning_rate`` (the peak), ``warmup_steps``, ``weight_decay``, ``clipnorm`` and,
    where the config has it, ``ema_momentum`` (nonzero: keep an exponential moving average of
    the weights; :func:`standard_callbacks` then evaluates and checkpoints the average).
    """
    ema_momentum = getattr(config, "ema_momentum", 0.0)
    optimizer = keras.optimizers.AdamW(
        learning_rate=InverseSquareRootSchedule(config.learning_rate, config.warmup_steps),
        weight_decay=config.weight_decay,
        clipnorm=config.clipnorm,
        beta_2=0.98,
        use_ema=bool(ema_momentum),
        ema_momentum=ema_momentum or 0.99,
    )
    # No decay on norms, biases and embeddings.
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias", "embeddings"])
    return optimizer


def compile_translator(model, config, jit_compile=False):
    """:func:`make_optimizer` and label-smoothed masked cross entropy."""
    model.compile(
        optimizer=make_optimizer(config),
        loss=MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return model


def train(
    config,
    workdir,
    strategy="auto",
    jit_compile=False,
    mixed_precision=False,
    time_limit=None,
    train_pairs=None,
    val_pairs=None,
    callbacks=(),
    bleu_sample_size=200,
    verbose="auto",
):
    """Train a translator with Keras ``fit``; resumable after a crash.

    The workdir receives ``config.json``, the SentencePiece model, ``checkpoint.keras``
    (after every epoch), ``backup/`` (BackupAndRestore state: rerunning the same command
    resumes from the last finished epoch), ``logs/`` (TensorBoard) and finally
    ``model.keras``.

    Args:
        config: a ``TranslatorConfig``.
        workdir: the folder of this run (created if missing).
        strategy: a name for ``zoo.training.strategy.get_strategy``.
        jit_compile: compile the train step with XLA.
        mixed_precision: train under ``mixed_bfloat16``.
        time_limit: stop after this many seconds (the model is still saved).
        train_pairs, val_pairs: (source, target) string pairs; Multi30k En->De by default.
        callbacks: more Keras callbacks.
        bleu_sample_size: validation pairs greedy-decoded after each epoch for ``val_bleu``
            (0 turns it off).
        verbose: ``fit``'s verbosity; "auto" shows the progress bar.

    Returns:
        ``(model, history, tokenizer)``.
    """
    if not isinstance(config, TranslatorConfig):
        raise TypeError(f"config must be a TranslatorConfig, got {type(config).__name__}.")
    os.makedirs(workdir, exist_ok=True)
    check_config(config, workdir)
    train_pairs = load_multi30k("train") if train_pairs is None else train_pairs
    val_pairs = load_multi30k("val") if val_pairs is None else val_pairs
    tokenizer = SentencePieceTokenizer(prepare_vocabulary(config, workdir, train_pairs))
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"The vocabulary in {workdir} has {tokenizer.vocab_size} pieces, the config says "
            f"{config.vocab_size}."
        )

    def dataset(pairs, shuffle):
        return make_translation_dataset(
            pairs,
            tokenizer,
            batch_tokens=config.batch_tokens,
            max_length=config.max_length,
            shuffle=shuffle,
            seed=0,
            pad_to_bucket=jit_compile,  # few distinct shapes, so XLA compiles few programs
        )

    with training_dtype_policy(mixed_precision):
        with get_strategy(strategy).scope():
            model = compile_translator(build_translator(config), config, jit_compile)
        all_callbacks = standard_callbacks(workdir, time_limit, callbacks)
        if bleu_sample_size:
            # First, so that the callbacks after it (TensorBoard, History) log val_bleu.
            all_callbacks.insert(
                0, ValidationBleu(tokenizer, val_pairs, bleu_sample_size, config.max_length)
            )
        history = model.fit(
            dataset(train_pairs, shuffle=True),
            validation_data=dataset(val_pairs, shuffle=False),
            epochs=config.epochs,
            callbacks=all_callbacks,
            verbose=verbose,
        )
    model.save(os.path.join(workdir, "model.keras"))
    return model, history, tokenizer
