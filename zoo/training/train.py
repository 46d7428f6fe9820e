"""``train(task, config, workdir)``: the one run path of every task; the CLI only parses.

What differs between models comes from the task object it is given, so a new task never changes
this file; nothing here imports a task or a model.
"""

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import warnings

import keras
import tensorflow as tf

from zoo.artifacts import (
    BACKUP_DIR,
    BEST_FILE,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    DATA_FILE,
    EPOCHS_DIR,
    HISTORY_FILE,
    LOGS_DIR,
    MODEL_FILE,
    save_model_atomically,
    write_text_atomically,
)
from zoo.data.epoch_order import DataCounts, DataPosition, skip_done
from zoo.data.parallel_corpus import data_error, fingerprint_change
from zoo.training.callbacks import (
    BestCheckpoint,
    DataCountsLog,
    LastCheckpoints,
    ModelFile,
    ResumableBackup,
    StopOnNonFiniteLoss,
    TimeLimit,
)
from zoo.training.epoch_length import each_epoch_to_its_end
from zoo.training.options import BACKUP_EVERY, KEEP_CHECKPOINTS, MIXED_POLICIES
from zoo.training.strategy import (
    across_workers,
    check_distributed_options,
    distributable,
    fit_across_workers,
    get_strategy,
    is_chief,
    lost_peer,
    per_worker,
    wait_for_file,
    worker_dir,
)
from zoo.training.warm_start import warm_start

__all__ = ["check_config", "standard_callbacks", "train", "training_dtype_policy"]

_RESUMABLE_FIELDS = ("epochs",)
VOCABULARY_TIMEOUT = 600  # seconds a worker waits for the chief's vocabulary


def check_config(config, workdir):
    """Save the config in the workdir; refuse to resume a workdir made with another config."""
    path = os.path.join(workdir, CONFIG_FILE)
    fields = json.loads(json.dumps(dataclasses.asdict(config)))  # tuples as JSON reads them back
    if os.path.exists(path):
        with open(path) as f:
            try:
                saved = json.load(f)
            except ValueError as error:
                raise ValueError(f"{path} is not a JSON config ({error})") from None
        # Training longer is a legitimate resume; anything else would mix two models. A field
        # added to the config class since the workdir was made counts at its default.
        defaults = {field.name: field.default for field in dataclasses.fields(config)}
        # A field since removed counts as absent at the value that meant "as now".
        retired = config.retired_fields
        saved = {k: v for k, v in saved.items()
                 if k in defaults or k not in retired or retired[k] != v}  # fmt: skip
        changed = sorted(
            k for k in set(saved) | set(fields)
            if k not in _RESUMABLE_FIELDS and saved.get(k, defaults.get(k)) != fields.get(k)
        )
        if changed:
            raise ValueError(
                f"{path} was written with another config (fields {changed} differ); "
                "use a new --workdir, or the same config to resume."
            )
    else:
        write_text_atomically(path, json.dumps(fields, indent=2))


def check_data(fingerprint, languages, workdir):
    """Record the training data in the workdir (``data.json``: each file by name, size,
    checksum and lines, and the languages); refuse to resume on other files, naming the one
    that changed. The same files at another path resume."""
    path = os.path.join(workdir, DATA_FILE)
    record = {"languages": languages, "training_data": fingerprint}
    if not os.path.exists(path):
        write_text_atomically(path, json.dumps(record, indent=2))
        return
    with open(path) as f:
        try:
            saved = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path} is not a JSON record of the data ({error})") from None
    if fingerprint is not None and saved.get("training_data") is not None:
        change = fingerprint_change(saved["training_data"], fingerprint, f"{path}: the training data")
        if change:
            raise ValueError(change)


# Under mixed_float16 (MIXED_POLICIES), compile() wraps the optimizer in a LossScaleOptimizer
# (float16 gradients underflow without it).
@contextlib.contextmanager
def training_dtype_policy(mixed_precision):
    """Build and train under a mixed policy when asked (``True`` or ``"bfloat16"``:
    ``mixed_bfloat16``; ``"float16"``: ``mixed_float16``); restore the global policy after."""
    previous_policy = keras.config.dtype_policy()
    if mixed_precision:
        compute = "bfloat16" if mixed_precision is True else mixed_precision
        if compute not in MIXED_POLICIES:
            raise ValueError(
                f"mixed_precision={mixed_precision!r}; choose from {sorted(MIXED_POLICIES)}."
            )
        keras.config.set_dtype_policy(MIXED_POLICIES[compute])
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous_policy)


def standard_callbacks(workdir, time_limit=None, metrics=(), extra=(), ema=False,
                       keep_checkpoints=KEEP_CHECKPOINTS, position=None, backup_every=None):
    """The callbacks of every zoo training run, in the order that makes each one see the rest.

    A stop at the first non-finite loss (before anything saves); the backup
    (:class:`ResumableBackup`); with ``ema`` the swap to the averaged weights; the ``metrics``
    callbacks; then ``checkpoint.keras``, the last ``keep_checkpoints`` epochs in ``epochs/``,
    TensorBoard ``logs/``, ``history.csv``, the ``extra`` callbacks and a :class:`TimeLimit`
    when ``time_limit`` (seconds) is set. With ``ema``, validation, the metrics, the checkpoint
    and ``extra`` see the averaged weights; the backup keeps the raw ones, so that a resumed run
    goes on exactly.
    """
    callbacks = [
        # First, so that no callback saves the weights of a batch whose loss is NaN.
        StopOnNonFiniteLoss(),
        # Kept after the last epoch, so that a longer rerun (more --epochs) goes on from there.
        # With a second copy: a run killed while writing the backup resumes from the one before.
        # Every backup_every steps too, with the data position (the epoch and its batches done).
        ResumableBackup(os.path.join(workdir, BACKUP_DIR), position, save_every=backup_every),
        *([keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if ema else []),
        *metrics,
        ModelFile(os.path.join(workdir, CHECKPOINT_FILE)),
        LastCheckpoints(os.path.join(workdir, EPOCHS_DIR), keep_checkpoints),
        keras.callbacks.TensorBoard(os.path.join(workdir, LOGS_DIR)),
        keras.callbacks.CSVLogger(os.path.join(workdir, HISTORY_FILE), append=True),
        *extra,
    ]
    if time_limit:
        callbacks.append(TimeLimit(time_limit))
    return callbacks


def train(
    task,
    config,
    workdir,
    strategy="auto",
    jit_compile=False,
    mixed_precision=False,
    time_limit=None,
    train_data=None,
    validation_data=None,
    callbacks=(),
    verbose="auto",
    keep_checkpoints=KEEP_CHECKPOINTS,
    backup_every=BACKUP_EVERY,
    init_from=None,
    vocabulary_file=None,
    **task_options,
):
    """Train the model of ``task`` with Keras ``fit``; resumable after a crash.

    The workdir receives ``config.json`` (with what the vocabulary fixes), the vocabulary,
    ``checkpoint.keras`` (every epoch), ``epochs/`` (the last epochs' weights), ``backup/`` (the
    training state every epoch and every ``backup_every`` steps: the same command resumes there,
    at the same place in the data), ``logs/`` (TensorBoard), ``history.csv`` and ``model.keras``.
    A task with a best metric (the tagger) keeps ``best.keras``, and ``model.keras`` is that epoch.

    Args:
        task: a :class:`zoo.tasks.Task` (``zoo.tasks.get_task("translator")``, say).
        config: the task's config (``task.config_class``).
        workdir: the folder of this run (created if missing).
        strategy: a name for ``zoo.training.strategy.get_strategy``; under ``multi_worker``
            only the chief writes ``workdir``.
        jit_compile: compile the train step with XLA (batches padded to their bucket's bound).
        mixed_precision: ``True`` or ``"bfloat16"`` (``mixed_bfloat16``), or ``"float16"``
            (``mixed_float16``, dynamic loss scaling); weights and exports stay float32.
        time_limit: stop after this many seconds (the model is still saved).
        train_data, validation_data: the task's examples (a :class:`zoo.data.ParallelCorpus`
            or a list of pairs, tagged sentences); by default the task's ``training_data`` and
            ``validation_data``. Data in files is recorded (``data.json``), and a resume on
            other files is refused.
        callbacks: more Keras callbacks.
        verbose: ``fit``'s verbosity; "auto" shows the progress bar.
        backup_every: steps between backups within an epoch (None: at epochs' ends only).
        keep_checkpoints: how many last epochs' weights stay in ``epochs/`` (``zoo average``).
        init_from: a trained model's folder (any task, same vocabulary): a new run starts from
            its weights where names and shapes match (:func:`zoo.training.warm_start.warm_start`)
            and takes its vocabulary unless the config names one; a resumed run uses its backup.
        vocabulary_file: a vocabulary to use as it is (``--sentencepiece-model``); the config
            takes what it fixes (``vocab_size``).
        **task_options: the task's own options (the translator's ``bleu_sample_size``).

    Returns:
        ``(model, history, vocabulary)``.

    Example:
        >>> from zoo.tasks import get_task
        >>> task = get_task("translator")
        >>> config = task.get_config("tiny", vocab_size=400, epochs=1)
        >>> model, history, tokenizer = train(  # doctest: +SKIP
        ...     task, config, "workdirs/doc", train_data=task.load_data("val")[:500])
    """
    if isinstance(task, str):
        raise TypeError(
            f"train() takes a task object, not its name: train(zoo.tasks.get_task({task!r}), ...)"
        )
    if not isinstance(config, task.config_class):
        raise TypeError(f"config must be a {task.config_class.__name__}, got "
                        f"{type(config).__name__}.")
    if init_from and not os.path.isdir(init_from):  # before any vocabulary is learned
        raise FileNotFoundError(f"--init-from {init_from}: no such folder")
    if train_data is None:
        train_data = task.training_data(config)
    if validation_data is None:
        validation_data = task.validation_data(config)
    if vocabulary_file:
        task.check_given_vocabulary(vocabulary_file)  # before the workdir is made
    distribution = get_strategy(strategy)  # before other TensorFlow work (multi_worker needs it)
    check_distributed_options(
        distribution, jit_compile, getattr(config, "gradient_accumulation_steps", 1)
    )
    chief = is_chief(distribution)
    os.makedirs(workdir, exist_ok=True)  # after the data, which may be missing
    vocabulary_dir = workdir
    if chief:
        vocabulary = task.prepare_vocabulary(config, workdir, train_data, verbose=bool(verbose),
                                             init_from=init_from, given=vocabulary_file)
    else:  # the chief makes it; every worker must train on the same one
        wait_for_file(os.path.join(workdir, task.vocabulary_file), VOCABULARY_TIMEOUT)
        vocabulary = task.read_vocabulary(workdir)
        resolver = distribution.cluster_resolver  # this worker's files, outside the workdir
        workdir = worker_dir(workdir, resolver.task_type, resolver.task_id)
        os.makedirs(workdir, exist_ok=True)
    if vocabulary_file:
        config = task.adopt_vocabulary(config, vocabulary)
    config = task.resolve_config(config, vocabulary)
    check_config(config, workdir)
    check_data(task.data_fingerprint(train_data), task.languages(config), workdir)
    metrics = task.metric_callbacks(config, vocabulary, validation_data, **task_options)
    extra = list(callbacks)
    best_path = os.path.join(workdir, BEST_FILE)
    monitor = task.best_metric(config)
    if monitor:
        extra.insert(0, BestCheckpoint(best_path, monitor))
        if verbose and chief:
            print(f"keeping the epoch with the best {monitor}", file=sys.stderr, flush=True)

    with training_dtype_policy(mixed_precision), warnings.catch_warnings():
        # fit's notes on a tf.data input, which is shuffled by the task and ends each epoch.
        warnings.filterwarnings("ignore", message=".*shuffle=True. was passed")
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        with distribution.scope():
            model = task.compile_model(task.build_model(config), config, jit_compile)
            fit_across_workers(model, distribution)
            # Its epochs are not all as long as the first (windows, workers' parts).
            each_epoch_to_its_end(model)
            # The optimizer's variables before fit: without a strategy (``auto`` on one device)
            # Keras would make them inside the first traced train step and trace it twice, and
            # a resumed run restores the optimizer's state into them.
            model.optimizer.build(model.trainable_variables)
        if init_from and not os.path.exists(os.path.join(workdir, BACKUP_DIR)):
            copied, kept = warm_start(model, init_from, task, vocabulary_dir)
            if verbose:
                print(f"started from {init_from}: the weights of {', '.join(copied)}"
                      + (f"; as built: {', '.join(kept)}" if kept else ""),
                      file=sys.stderr, flush=True)  # fmt: skip
        # Each batch is split across the replicas: its size a multiple of their number, so
        # that they get equal shares (Keras's first look at a batch fails on unequal ones).
        replicas = distribution.num_replicas_in_sync
        # Each epoch's order is a function of the epoch, and a resumed run skips the batches
        # its epoch has done (ResumableBackup sets the position).
        position = DataPosition()
        # What the pipeline skips (empty or too long examples) is said after each epoch.
        counts = DataCounts()

        def training_dataset(part=None):  # one worker's part, or all of it (batch_multiple)
            return skip_done(
                task.dataset(config, vocabulary, train_data, training=True,
                             jit_compile=jit_compile, batch_multiple=1 if part else replicas,
                             epoch=position, counts=counts, part=part),
                position,
            )  # fmt: skip

        # Under multi_worker each worker reads its own part.
        if across_workers(distribution):
            training_set = per_worker(training_dataset, distribution)
        else:
            training_set = training_dataset()
        if verbose:
            extra.append(DataCountsLog(counts))
        validation_set = task.dataset(config, vocabulary, validation_data, training=False,
                                      jit_compile=jit_compile, batch_multiple=replicas)
        callbacks = standard_callbacks(
            workdir, time_limit, metrics, extra, ema=bool(config.ema_momentum),
            keep_checkpoints=keep_checkpoints, position=position, backup_every=backup_every,
        )  # fmt: skip

        def fit(epochs):
            try:
                return model.fit(
                    distributable(training_set, distribution),
                    validation_data=distributable(validation_set, distribution),
                    epochs=epochs,
                    callbacks=callbacks,
                    verbose=verbose,
                )
            except tf.errors.OpError as error:  # a data file that changed, a peer lost
                message, lost = data_error(error), lost_peer(error, workdir)
                if lost is not None:
                    raise lost from None
                if message is None:
                    raise
                raise ValueError(message) from None

        # A cut epoch is short, and Keras takes every epoch of a fit to have the batches of
        # its first: the rest of it runs in a fit of its own.
        resumed = ResumableBackup.describe(os.path.join(workdir, BACKUP_DIR))
        if resumed and verbose:
            print(f"resuming from the backup in {workdir}: {resumed}", file=sys.stderr,
                  flush=True)  # fmt: skip
        cut = ResumableBackup.resumes_mid_epoch(os.path.join(workdir, BACKUP_DIR))
        rest = fit(cut + 1) if cut is not None else None
        history = rest if rest is not None and model.stop_training else fit(config.epochs)
        if rest is not None and history is not rest:
            history.epoch[:0] = rest.epoch
            for name, values in rest.history.items():
                history.history[name] = values + history.history.get(name, [])
    if monitor and os.path.exists(best_path):
        model.load_weights(best_path)
    if chief:
        save_model_atomically(task.inference_model(model, config, vocabulary),
                              os.path.join(workdir, MODEL_FILE))
    else:
        shutil.rmtree(workdir, ignore_errors=True)  # its backup is of no use once training ended
    return model, history, vocabulary
