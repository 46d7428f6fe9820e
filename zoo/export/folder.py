"""The export folder of every task, written once: ``model.keras``, the vocabulary and
``serving/<version>/``, the SavedModel in TF Serving's layout, from a task's serving module
(a ``tf.Module`` whose ``tf.function`` methods are the signatures).
"""

import os

import keras
import tensorflow as tf
from tensorflow.python.saved_model import save_context  # private: see save_serving

from zoo.artifacts import (
    ASSETS_EXTRA_DIR,
    MODEL_FILE,
    SERVING_VERSION,
    save_model_atomically,
    serving_path,
    written_atomically,
)
from zoo.export.warmup import WARMUP_FILE, write_warmup_file
from zoo.progress import Progress

__all__ = ["float32_model", "save_serving", "write_export"]


def float32_model(model):
    """``model`` if it computes in float32, else a copy of it that does, with the same weights.

    A model trained under ``mixed_bfloat16`` or ``mixed_float16`` keeps float32 weights but
    computes in 16 bits; its exports serve in float32, which every device runs and which gives
    the same outputs as the in-memory model in float32.
    """
    if all(layer.compute_dtype == "float32" for layer in model.layers
           if not isinstance(layer, keras.layers.InputLayer)):  # fmt: skip
        return model

    def in_float32(layer):
        config = layer.get_config()
        # An input's dtype is its data's; an op of the graph (ops.not_equal) has none.
        if "dtype" in config and not isinstance(layer, keras.layers.InputLayer):
            config["dtype"] = "float32"
        return layer.__class__.from_config(config)

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")  # the sublayers that layers make themselves
    try:
        if not type(model).__module__.startswith("keras."):
            # A model whose config is its constructor's arguments (a keras-hub backbone).
            copy = type(model).from_config({**model.get_config(), "dtype": "float32"})
        else:
            copy = keras.models.clone_model(model, clone_function=in_float32)
    finally:
        keras.config.set_dtype_policy(previous)
    copy.set_weights(model.get_weights())
    return copy


def save_serving(module, path, signatures, progress=None, assets_extra=None, warmup=None):
    """Trace each of ``signatures`` (name -> ``tf.function`` of ``module``), then save.

    Tracing is the slow part of an export; doing it signature by signature lets ``progress``
    (a :class:`zoo.progress.Progress`) move. Each function is traced once: under the save
    context that ``tf.saved_model.save`` enters, which is part of ``tf.function``'s cache key,
    so a trace made outside it would be made again inside (twice the time; TensorFlow has no
    public way to enter that context). The SavedModel is written beside ``path`` and renamed
    into place, so a server watching the folder never loads a half-written one, and
    ``assets_extra`` (file name -> bytes) is in its ``assets.extra/`` before that, with TF
    Serving's warm-up file of the ``warmup`` requests (``[(signature, inputs)]``,
    :mod:`zoo.export.warmup`) when given. Returns ``path`` as a ``str``.
    """
    options = tf.saved_model.SaveOptions()
    with save_context.save_context(options):
        for function in signatures.values():
            function.get_concrete_function()
            if progress is not None:
                progress.add(1)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with written_atomically(path) as temporary:
        tf.saved_model.save(module, temporary, signatures=signatures, options=options)
        if assets_extra or warmup:
            os.makedirs(os.path.join(temporary, ASSETS_EXTRA_DIR))
        for name, data in (assets_extra or {}).items():
            with open(os.path.join(temporary, ASSETS_EXTRA_DIR, name), "wb") as f:
                f.write(data)
        if warmup:
            write_warmup_file(os.path.join(temporary, ASSETS_EXTRA_DIR, WARMUP_FILE), warmup)
    if progress is not None:
        progress.add(1)
    return os.fspath(path)


def write_export(output_dir, model, vocabulary_file, write_vocabulary, serving, verbose=False,
                 version=SERVING_VERSION, assets_extra=None, warmup=None, keras_model=None):
    """Write an export folder; return its path.

    Args:
        output_dir: the folder (created if missing; its files are replaced, each atomically).
        model: the trained Keras model. Its ``.keras`` file here is for inference: an
            uncompiled model of the same layers, since a compiled model's file also carries
            the optimizer state (twice the weights again).
        vocabulary_file: the vocabulary's file name (from :mod:`zoo.artifacts`).
        write_vocabulary: ``path -> None``, writes the vocabulary.
        serving: the task's serving module, with a ``signatures`` dict (name -> function).
        verbose: draw a progress bar on stderr, one step per stage.
        version: the SavedModel's version folder, ``serving/<version>/`` (a positive integer;
            TF Serving serves the highest version of its base path, ``serving/``).
        assets_extra: file name -> bytes, written in the SavedModel's ``assets.extra/`` (what
            a server reads beside the model: the languages) and beside the model here.
        warmup: the requests of TF Serving's warm-up file in the SavedModel's
            ``assets.extra/`` (``[(signature, inputs)]``, :mod:`zoo.export.warmup`).
        keras_model: what ``model.keras`` holds: the task's model of ``model`` with its
            vocabulary inside, uncompiled; by default the uncompiled functional ``model``.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive integer, got {version!r}.")
    output_dir = os.fspath(output_dir)
    signatures = serving.signatures
    progress = Progress(3 + len(signatures), enabled=verbose, unit="stage")
    os.makedirs(output_dir, exist_ok=True)
    model = float32_model(model)
    inference_model = keras_model or keras.Model(model.input, model.output, name=model.name)
    save_model_atomically(inference_model, os.path.join(output_dir, MODEL_FILE))
    progress.add(1)
    with written_atomically(os.path.join(output_dir, vocabulary_file)) as temporary:
        write_vocabulary(temporary)
    progress.add(1)
    for name, data in (assets_extra or {}).items():
        with written_atomically(os.path.join(output_dir, name)) as temporary:
            with open(temporary, "wb") as f:
                f.write(data)
    save_serving(serving, serving_path(output_dir, version), signatures, progress, assets_extra,
                 warmup)  # fmt: skip
    return output_dir
