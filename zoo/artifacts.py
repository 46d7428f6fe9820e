"""The file names of a workdir and of an exported folder, defined once.

Both hold the model (:data:`MODEL_FILE`) and the task's vocabulary; a workdir adds the training
state, an export folder the serving SavedModel (:func:`serving_path`).
"""

import contextlib
import json
import os
import re
import shutil
import zipfile

MODEL_FILE = "model.keras"  # the trained (or exported) model
CONFIG_FILE = "config.json"  # the model config a workdir was trained with
DATA_FILE = "data.json"  # a workdir's training files (names, sizes, checksums) and languages
LANGUAGES_FILE = "languages.json"  # an export's languages, beside the model and in assets.extra
SENTENCEPIECE_PREFIX = "sentencepiece"  # the translators' joint vocabulary, without its suffix
SENTENCEPIECE_FILE = SENTENCEPIECE_PREFIX + ".model"
TAGGER_VOCABULARY_FILE = "vocabulary.json"  # the tagger's word, character and XPOS vocabularies
# TF Serving's layout: SERVING_DIR is a model's base path, holding one SavedModel (text in, text
# out) per version in a folder named by the number; TF Serving serves the highest.
SERVING_DIR = "serving"
SERVING_VERSION = 1  # the version `zoo export` writes unless told otherwise
ASSETS_EXTRA_DIR = "assets.extra"  # a SavedModel's files for the server (TF Serving's name)

# Training state in a workdir.
CHECKPOINT_FILE = "checkpoint.keras"  # the model after the last finished epoch
BEST_FILE = "best.keras"  # the best validation epoch so far (tasks that keep it)
BACKUP_DIR = "backup"  # the training state (ResumableBackup): rerunning the same command resumes
LOGS_DIR = "logs"  # TensorBoard
HISTORY_FILE = "history.csv"  # the metrics of every epoch
EPOCHS_DIR = "epochs"  # the weights of the last few epochs, for `zoo average`
EPOCH_WEIGHTS = "epoch-{epoch:04d}.weights.h5"  # one file of EPOCHS_DIR; epochs count from 1
EVAL_DIR = "eval"  # `zoo evaluate` writes its scores and outputs here by default

# A folder of `zoo distill`: sequence-level distillation data, a --train corpus of `zoo train`.
DISTILL_MANIFEST_FILE = "distill.json"  # teacher, beam size, data, files, seconds, finished


def distill_file_names(source_lang, target_lang):
    """The files of a ``zoo distill`` folder, named by the teacher's languages: the sources in
    corpus order, the teacher's translations line by line with them, and the
    ``index<TAB>translation`` lines made so far."""
    return {"source": f"train.{source_lang}", "target": f"train.{target_lang}",
            "partial": f"train.{target_lang}.partial"}  # fmt: skip


# What a languages record holds: a translator's pair, or a tagger's treebank.
LANGUAGE_RECORDS = ({"source", "target"}, {"language", "treebank"})


def describe_languages(record):
    """One line of a languages record: ``en -> de``, or ``fr (UD GSD)``."""
    if set(record) == {"source", "target"}:
        return f"{record['source']} -> {record['target']}"
    return f"{record['language']} (UD {record['treebank']})"


def read_languages(folder):
    """The languages of a workdir (``data.json``) or an export folder (``languages.json``):
    ``{"source": .., "target": ..}`` (a translator), ``{"language": .., "treebank": ..}``
    (a tagger), or None where none is recorded."""
    for name, key in ((LANGUAGES_FILE, None), (DATA_FILE, "languages")):
        path = os.path.join(os.fspath(folder), name)
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as f:
                    record = json.load(f)
                record = record.get(key) if key else record
            except (OSError, ValueError, AttributeError):
                raise ValueError(f"{path}: not a readable JSON record of the languages") from None
            if record is None:
                continue
            if not (isinstance(record, dict) and set(record) in LANGUAGE_RECORDS):
                raise ValueError(f"{path}: its languages are neither {{source, target}} nor "
                                 f"{{language, treebank}}: {record!r}")
            return record
    return None


def read_model(path):
    """The model of a ``.keras`` file, not compiled; a one-line error that names the file.

    The layers it uses must be registered (``import zoo`` and the model's package). A file that
    Keras cannot read (truncated, not a ``.keras`` file) is a ValueError naming Keras's own
    cause, and one saved by a newer Keras says which to upgrade to.
    """
    import keras

    try:
        return keras.models.load_model(path, compile=False)
    except Exception as error:  # Keras's own messages do not name the file, or name it wrongly
        cause = _innermost_cause(error)
        saved_by = _saving_keras_version(path)
        if saved_by and _version_key(saved_by) > _version_key(keras.__version__):
            raise ValueError(
                f"{path} was saved by Keras {saved_by}, newer than this Keras "
                f"{keras.__version__}, which cannot read it ({cause}): upgrade "
                f"Keras (pip install 'keras>={saved_by}')"
            ) from error
        raise ValueError(
            f"{path} is not a readable .keras model ({cause}); it may be "
            "truncated: train or export it again"
        ) from error


def first_line(error):
    """The first line of an error's message (its type's name when it has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _innermost_cause(error):
    """The first line of what went wrong: Keras wraps a failed deserialization in one
    "could not be deserialized" message per level and names the cause last."""
    marker = "Exception encountered: "
    text = str(error)
    return first_line(text.rsplit(marker, 1)[1] if marker in text else error)


def _saving_keras_version(path):
    """The Keras version a ``.keras`` archive records in its ``metadata.json``, or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            version = json.loads(archive.read("metadata.json"))["keras_version"]
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
        return None
    return version if isinstance(version, str) else None


def _version_key(version):
    """``"3.15.1"`` -> ``(3, 15, 1)``: the release numbers, enough to order Keras versions."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def serving_path(export_dir, version=SERVING_VERSION):
    """The SavedModel folder of ``version`` in an export folder: ``export_dir/serving/N``."""
    return os.path.join(export_dir, SERVING_DIR, str(version))


def latest_serving_path(export_dir):
    """The SavedModel folder TF Serving would serve from an export folder (the highest version
    that holds a ``saved_model.pb``), or ``None`` if there is none."""
    base = os.path.join(export_dir, SERVING_DIR)
    names = os.listdir(base) if os.path.isdir(base) else []
    versions = [int(name) for name in names if name.isdigit()]
    for version in sorted(versions, reverse=True):
        if os.path.isfile(os.path.join(base, str(version), "saved_model.pb")):
            return serving_path(export_dir, version)
    return None


@contextlib.contextmanager
def written_atomically(path):
    """Yield a temporary path beside ``path`` to write (a file or a folder); once the block
    ends without an error, rename it to ``path``, so that a crash or a kill at any moment
    leaves either the old ``path`` or the new one, never a partial one.

    The temporary name starts with ``.partial-`` and ends with ``path``'s name (Keras reads
    the suffix: ``.keras``, ``.weights.h5``). An existing folder at ``path`` is first renamed
    to ``.old-<name>`` (a folder cannot be replaced in one rename), so a kill between the two
    renames leaves the old folder there.

    Example:
        >>> with written_atomically("model.keras") as temporary:  # doctest: +SKIP
        ...     model.save(temporary)
    """
    folder, name = os.path.split(os.fspath(path))
    temporary = os.path.join(folder, f".partial-{name}")
    _remove(temporary)  # left by a killed run
    try:
        yield temporary
        if os.path.isdir(temporary) and os.path.isdir(path):
            # os.replace cannot replace a folder that has files: move the old one aside first.
            old = os.path.join(folder, f".old-{name}")
            _remove(old)
            os.replace(path, old)
            os.replace(temporary, path)
            _remove(old)
        else:
            os.replace(temporary, path)
    finally:
        _remove(temporary)


def save_model_atomically(model, path):
    """``model.save(path)`` (``.keras``) or ``model.save_weights(path)`` (``.weights.h5``),
    through :func:`written_atomically`."""
    with written_atomically(path) as temporary:
        if os.fspath(path).endswith(".weights.h5"):
            model.save_weights(temporary)
        else:
            model.save(temporary)


def write_text_atomically(path, text):
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` through :func:`written_atomically`:
    a string, or an iterable of strings written in turn (a file streamed, never whole)."""
    with written_atomically(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as f:
            f.writelines([text] if isinstance(text, str) else text)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def folder_task(folder, model_file=MODEL_FILE, trainer="zoo train", tasks=None):
    """The task of the model in ``folder`` (a workdir or an export folder): the name in its
    ``.keras`` archive's config, read without TensorFlow. This is the one check that a folder
    holds a zoo model: the command line runs it before TensorFlow loads, and ``zoo.tasks`` and
    ``--init-from`` before they read the model. Each problem is a one-line error that names
    the file.

    Raises:
        FileNotFoundError: no such folder, or no model in it (``trainer`` is the command that
            makes one).
        ValueError: a model file that is no readable ``.keras`` archive (a truncated one), or a
            model of no task of ``tasks`` (the known task names; None: any name goes).
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder")
    path = os.path.join(folder, model_file)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no trained model at {path}: run `{trainer}` first")
    try:
        with zipfile.ZipFile(path) as archive:
            name = json.loads(archive.read("config.json"))["config"]["name"]
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is not a readable .keras model ({first_line(error)}); it may be "
                         "truncated: train or export it again") from None
    if tasks is not None and name not in tasks:
        raise ValueError(f"{path} holds a model named {name!r}, which is no zoo task "
                         f"({', '.join(sorted(tasks))})")  # fmt: skip
    return name
