"""What a kind of run must say, so that one ``train()``, one loader and one command line serve it.

A :class:`Task` says only what differs between runs (its data, vocabulary, model, compile spec,
evaluation, export and prediction); ``zoo.training.train``, ``zoo.tasks.load`` and ``zoo.cli``
do the rest. A new kind of run is a new subclass in its own file, added to ``zoo.tasks.TASKS``.
"""

import dataclasses
import json
import os
import shutil
import sys

from zoo.artifacts import CONFIG_FILE, LANGUAGES_FILE, first_line, written_atomically
from zoo.models.presets import from_presets
from zoo.tasks.table import TASKS as TABLE

__all__ = ["EvaluationFiles", "Task"]


@dataclasses.dataclass(frozen=True)
class EvaluationFiles:
    """Data to evaluate on, from files (``zoo evaluate --source F --reference F ...``): the
    input file, its reference files, and the target language (which scores may depend on).
    A tagged file (``zoo evaluate tagger --gold F``) is its own input and reference."""

    source: str
    references: tuple
    target_lang: str | None = None


class Task:
    """The hooks of one kind of run. Subclasses set the attributes and override the hooks.

    Attributes:
        name: the task's name on the command line, and its row in the table of tasks
            (:mod:`zoo.tasks.table`); also the ``name`` of the Keras model that
            :meth:`build_model` returns, which is how a saved model names its task.
        config_class: the frozen dataclass of a run's config: the model's architecture
            (its backbone's arguments) and the task's training config.
        run_presets: ``{name: config}``; :attr:`presets` are those of them that its row
            offers.
        vocabulary_file: the vocabulary's file name in a workdir and an export folder (from
            :mod:`zoo.artifacts`).
        train_split, validation_split: the splits ``train()`` reads by default (the first
            through :meth:`training_data`, which a task may point elsewhere).
        evaluation_splits: the splits ``zoo evaluate`` scores by default.
        splits: every split :meth:`load_data` reads (its row's; ``zoo evaluate --splits``).
        predict_verb: the command that runs :meth:`predict` (its row's: ``zoo translate``).
        task_model: the model's task model in keras-hub's shape (``from_backbone``,
            ``export_serving``), which ``model.keras`` holds; None: the model itself.
    """

    name = None
    config_class = None
    run_presets = {}
    vocabulary_file = None
    train_split = "train"
    validation_split = None
    evaluation_splits = ()
    task_model = None

    @property
    def presets(self):
        return {name: self.run_presets[name] for name in TABLE[self.name]["presets"]}

    @property
    def splits(self):
        return TABLE[self.name]["splits"]

    @property
    def predict_verb(self):
        return TABLE[self.name]["predict"]

    def get_config(self, preset, **overrides):
        """The named preset with any field overridden."""
        return from_presets(self.presets, preset, self.name, **overrides)

    # ------------------------------------------------------------ data and vocabulary
    def load_data(self, split):
        """The examples of a bundled split (pairs, sentences, ...)."""
        raise NotImplementedError

    def training_data(self, config, files=None):
        """The examples ``train()`` trains on: those of ``files`` (the command line's
        ``--train``, in the task's own form), or by default :attr:`train_split`'s."""
        if files:
            raise ValueError(f"The {self.name} trains on its own data only (no --train).")
        return self.load_data(self.train_split)

    def validation_data(self, config, files=None):
        """The examples validated on: those of ``files`` (``--valid``), or by default
        :attr:`validation_split`'s."""
        if files:
            raise ValueError(f"The {self.name} validates on its own data only (no --valid).")
        return self.load_data(self.validation_split)

    def data_fingerprint(self, data):
        """What a workdir records of its training data, so that a resume on other data is
        refused (JSON without paths; :func:`zoo.data.fingerprint_change` compares two), or
        None for data that is not in files."""
        return None

    def languages(self, config):
        """The languages of the model's data, ``{"source": .., "target": ..}``, recorded in
        the workdir and the export (None: a task without languages)."""
        return None

    def prepare_vocabulary(self, config, workdir, train_data, verbose=False, init_from=None,
                           given=None):
        """The workdir's vocabulary: made once from the training data, then read back.

        ``given`` (a file: the translator's ``--sentencepiece-model``) is taken as it is. A
        new run that starts from another model's weights (``init_from``, ``--init-from``)
        takes that model's vocabulary, the one its embedding rows mean, unless one is given:
        then :func:`zoo.training.warm_start` checks that the two are the same.
        """
        path = os.path.join(workdir, self.vocabulary_file)
        if os.path.exists(path):
            return self.read_vocabulary(workdir)
        theirs = os.path.join(init_from, self.vocabulary_file) if init_from else None
        if given:
            self.check_given_vocabulary(given)
            _copy_vocabulary(given, os.path.join(workdir, self.vocabulary_file), verbose,
                             "the given vocabulary")
        elif theirs and os.path.exists(theirs):
            _copy_vocabulary(theirs, os.path.join(workdir, self.vocabulary_file), verbose,
                             "the vocabulary of the weights it starts from")
        else:
            self.make_vocabulary(config, workdir, train_data, verbose=verbose)
        return self.read_vocabulary(workdir)

    def check_given_vocabulary(self, path):
        """Refuse a given vocabulary file that this task cannot use (a one-line error)."""
        raise ValueError(f"The {self.name} makes its own vocabulary; none can be given.")

    def adopt_vocabulary(self, config, vocabulary):
        """``config`` with what a given vocabulary fixes (the translator's ``vocab_size``)."""
        return config

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        """Learn the vocabulary from the training data and write it in ``workdir``.

        With ``verbose``, a step that takes a while says so on stderr.
        """
        raise NotImplementedError

    def load_vocabulary(self, folder):
        """The vocabulary of a workdir or an export folder."""
        raise NotImplementedError

    def read_vocabulary(self, folder):
        """:meth:`load_vocabulary`, with a one-line error that names the file."""
        path = os.path.join(folder, self.vocabulary_file)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path}: missing; the {self.name} needs its vocabulary beside the model"
            )
        try:
            return self.load_vocabulary(folder)
        except Exception as error:
            raise ValueError(f"{path} cannot be read ({first_line(error)})") from error

    def same_vocabulary(self, folder, other):
        """Whether the vocabularies of two folders give every id the same meaning (so that
        one model's weights can start another's: ``zoo train --init-from``). Here: the same
        bytes; a task whose vocabulary files record more than the mapping says more."""
        with open(os.path.join(folder, self.vocabulary_file), "rb") as f:
            with open(os.path.join(other, self.vocabulary_file), "rb") as g:
                return f.read() == g.read()

    def resolve_config(self, config, vocabulary):
        """``config`` with what the vocabulary fixes; an error when they do not fit."""
        return config

    def dataset(self, config, vocabulary, data, training, jit_compile=False, batch_multiple=1,
                epoch=None, counts=None, part=None):
        """A ``tf.data.Dataset`` of ``(inputs, labels)`` batches for ``fit``. Every task takes
        every keyword, and ``zoo.training`` passes them all:

        - ``batch_multiple``: batch sizes are its multiples (the replicas a batch is split across).
        - ``epoch``: a :class:`zoo.data.DataPosition` (or its ``epoch`` variable), or None; it
          fixes the shuffled order, so that a resumed run sees what the interrupted one saw.
          A pipeline made with :func:`zoo.data.resumable_pass` also starts the pass where
          the position says; any other has the batches done dropped for it.
        - ``counts``: a :class:`zoo.data.DataCounts` of what is read and skipped, or None (a
          pipeline that skips nothing may leave it alone).
        - ``part``: a :class:`zoo.data.DataPart`, or None: under ``multi_worker``, this
          worker's disjoint part of the training data, in batches of one replica's share."""
        raise NotImplementedError

    # ------------------------------------------------------------ model and training
    def build_model(self, config):
        raise NotImplementedError

    def inference_model(self, model, config, vocabulary):
        """What ``model.keras`` holds of a trained ``model``: its :attr:`task_model`, its
        vocabulary inside, over a copy of the backbone (without the training's optimizer); by
        default the model itself."""
        if self.task_model is None:
            return model
        return self.task_model.from_backbone(getattr(model, "backbone", None) or model,
                                             vocabulary)  # fmt: skip

    def as_task_model(self, model, vocabulary):
        """``model`` as the :attr:`task_model`: itself, or over the backbone being trained."""
        if isinstance(model, self.task_model):
            return model
        return self.task_model.from_backbone(model, vocabulary, copy=False)

    def upgrade_model(self, model, folder):
        """The model read from ``folder`` in today's form: a functional model of zoo 0.1.0
        (no backbone) as the backbone of the architecture in the folder's ``config.json``,
        with its weights; a one-line error naming the conversion without that file."""
        if self.task_model is None:
            return model
        backbone_class = self.task_model.backbone_cls
        if isinstance(model, (self.task_model, backbone_class)):
            return model
        path = os.path.join(os.fspath(folder), CONFIG_FILE)
        if not os.path.exists(path):
            raise ValueError(f"{folder} holds a {self.name} of zoo 0.1.0, whose architecture "
                             f"is in {CONFIG_FILE}, missing here; `zoo export` of its workdir "
                             "writes it in today's form")  # fmt: skip
        with open(path) as f:
            saved = json.load(f)
        fields = {k: v for k, v in saved.items() if k in self.config_class.__dataclass_fields__}
        return backbone_class.from_functional(model, self.config_class(**fields))

    def compile_model(self, model, config, jit_compile=False):
        """Compile ``model`` with its optimizer, loss and metrics; return it."""
        raise NotImplementedError

    def metric_callbacks(self, config, vocabulary, validation_data, **options):
        """Callbacks that add metrics to the epoch logs (so every later callback logs them).

        ``options`` are the task's own keyword arguments of ``train()``; an unknown one is an
        error, so that no option is silently ignored.
        """
        if options:
            raise TypeError(f"The {self.name} task takes no options {sorted(options)}.")
        return []

    def best_metric(self, config):
        """The validation metric whose best epoch is kept (None: keep the last epoch)."""
        return None

    # ------------------------------------------------------------ using a trained model
    def evaluate(self, model, vocabulary, split, output_dir, verbose=False, **options):
        """Score ``split`` (a bundled split's name, or :class:`EvaluationFiles`), write the
        outputs in ``output_dir``; return the lines to print."""
        raise NotImplementedError

    def predict(self, model, vocabulary, lines, verbose=False, **options):
        """The output line of each input line (a translation, ``word/TAG ...``)."""
        raise NotImplementedError

    def predict_file(self, model, vocabulary, source, output, verbose=False, **options):
        """Read ``source`` (a path, or a binary stream: stdin) in the task's own file format,
        and write it to the binary stream ``output`` with the predictions filled in, streamed
        in bounded memory (``zoo tag --conllu FILE``)."""
        raise NotImplementedError(f"The {self.name} takes no input file.")

    exporter = None  # (model, vocabulary, output_dir, verbose, **options): the task's export

    def export(self, model, vocabulary, output_dir, verbose=False, languages=None, **options):
        """Write the model, its vocabulary and the serving SavedModel to ``output_dir``: the
        task model's ``export_serving`` (or the task's :attr:`exporter`), ``options`` its own
        (``zoo export``'s flags), with the ``languages`` (:meth:`languages`) in
        ``languages.json`` beside the model and in the SavedModel's ``assets.extra/``, so that
        the SavedModel alone says them."""
        if languages:
            data = (json.dumps(languages, indent=2) + "\n").encode()
            options["assets_extra"] = {LANGUAGES_FILE: data}
        if self.task_model is not None:
            model = self.as_task_model(model, vocabulary)
            return model.export_serving(output_dir, verbose=verbose, **options)
        if self.exporter is None:
            raise NotImplementedError(f"The {self.name} task has no export.")
        return self.exporter(model, vocabulary, output_dir, verbose=verbose, **options)

    def __repr__(self):
        return f"<zoo task {self.name!r}>"


def _copy_vocabulary(source, path, verbose, what):
    """Write the vocabulary file ``source`` to ``path`` as it is (atomically); with
    ``verbose``, say so on stderr, naming it ``what``."""
    if verbose:
        print(f"using {what}, {source}", file=sys.stderr, flush=True)
    with written_atomically(path) as temporary:
        shutil.copyfile(source, temporary)
