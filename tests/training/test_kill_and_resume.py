"""A training run stopped at a random batch, then run again with the same command, finishes with
the weights of a run that was never stopped: for every model, with its random draws on (dropout,
the tagger's word dropout, the NAT's masks). The translator with a real SIGKILL, on a corpus
streamed from gzipped shards; the others from the workdir as a kill at that batch would leave
it, copied during the run that is never stopped (what is on disk is all a kill leaves)."""

import dataclasses
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.harness import REPO_ROOT
from zoo.artifacts import BACKUP_DIR, SENTENCEPIECE_FILE
from zoo.data import ParallelCorpus, load_multi30k, load_ud_english_ewt
from zoo.tasks import get_task
from zoo.training import train
from zoo.training.callbacks import ResumableBackup

PAIRS = load_multi30k("train")[:300]
VAL = load_multi30k("val")[:16]
BACKUP_EVERY = 3
KILLED_AT_FILE = "killed_at_step"


def translator_config(dropout=0.0):
    return get_task("translator").get_config(
        "tiny", vocab_size=400, epochs=2, batch_tokens=512, max_length=24, dropout=dropout,
        attention_dropout=dropout, activation_dropout=dropout)  # fmt: skip


class KillAtBatch(keras.callbacks.Callback):
    """SIGKILL this process once ``batches`` training batches have ended: ``kill -9``, no
    cleanup. Without ``batches`` it counts them.

    Batches are counted, not the optimizer's steps: Keras adds one step at each epoch's end
    (the call that finds the data used up), so step counts skip at epoch boundaries. The
    optimizer's step at the kill is written to ``KILLED_AT_FILE`` first, to compare with
    the backup's."""

    def __init__(self, workdir, batches=None):
        super().__init__()
        self.workdir, self.batches, self.seen = workdir, batches, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.batches:
            with open(os.path.join(self.workdir, KILLED_AT_FILE), "w") as f:
                f.write(str(int(self.model.optimizer.iterations)))
            os.kill(os.getpid(), signal.SIGKILL)


def write_shards(folder, shards=3):
    """PAIRS in ``shards`` gzipped twin files, for the streamed run."""
    os.makedirs(folder, exist_ok=True)
    for shard in range(shards):
        for side, suffix in ((0, "en"), (1, "de")):
            text = "".join(pair[side] + "\n" for pair in PAIRS[shard::shards])
            with gzip.open(os.path.join(folder, f"train.{shard}.{suffix}.gz"), "wt") as f:
                f.write(text)


def run(workdir, kill_at=None, corpus=None):
    """The same command every time (and, with ``kill_at``, the kill); the model and the
    number of batches trained on. The pairs are streamed from ``corpus``'s files (a folder of
    :func:`write_shards`) in shuffle windows of 40 pairs (4 pieces of 10 lines), with dropout."""
    keras.utils.set_random_seed(0)
    counter = KillAtBatch(workdir, kill_at)
    config = dataclasses.replace(translator_config(dropout=0.1), shuffle_buffer=40)
    data = ParallelCorpus([(f"{corpus}/train.*.en.gz", f"{corpus}/train.*.de.gz")])
    model, _, _ = train(get_task("translator"), config, workdir, train_data=data,
                        validation_data=VAL, bleu_sample_size=0, verbose=0,
                        backup_every=BACKUP_EVERY, callbacks=[counter])  # fmt: skip
    return model, counter.seen


def test_a_run_killed_at_a_random_step_resumes_to_the_weights_of_one_never_killed(tmp_path):
    corpus = str(tmp_path / "corpus")
    write_shards(corpus)
    never, batches = run(str(tmp_path / "never"), corpus=corpus)
    kill_at = random.Random().randint(BACKUP_EVERY, batches - 1)  # after the first backup
    killed = tmp_path / "killed"
    killed.mkdir()  # the same vocabulary (learning it twice is another test's business)
    shutil.copy(tmp_path / "never" / SENTENCEPIECE_FILE, killed)
    script = ("from tests.training.test_kill_and_resume import run\n"
              f"run({str(killed)!r}, {kill_at}, {corpus!r})")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, PYTHONPATH=REPO_ROOT))  # fmt: skip
    assert result.returncode == -signal.SIGKILL, (kill_at, result.stderr[-3000:])
    with open(killed / BACKUP_DIR / "training_metadata.json") as f:
        backup = json.load(f)
    with open(killed / KILLED_AT_FILE) as f:
        killed_at_step = int(f.read())
    assert 0 <= killed_at_step - backup["step"] < BACKUP_EVERY, (kill_at, killed_at_step, backup)

    resumed, _ = run(str(killed), corpus=corpus)
    assert int(resumed.optimizer.iterations) == int(never.optimizer.iterations), kill_at
    for expected, got in zip(never.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"killed at {kill_at}")


# ---------------------------------------------------------------- every model, draws on
class CopyAtEachBatch(keras.callbacks.Callback):
    """After each training batch (and after the backup's callback, which runs first), copy
    the workdir to ``copies/<batch>``: what a kill right then would leave on disk."""

    def __init__(self, workdir, copies):
        super().__init__()
        self.workdir, self.copies, self.seen = workdir, copies, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        shutil.copytree(self.workdir, os.path.join(self.copies, str(self.seen)))


def _tagger():
    sentences = load_ud_english_ewt("dev")[:120]
    config = get_task("tagger").get_config("tiny", epochs=2, warmup_steps=1, dropout=0.1,
                                           attention_dropout=0.1, word_dropout=0.25)  # fmt: skip
    return "tagger", config, sentences[:100], sentences[100:]


def _nat():
    config = get_task("nat").get_config("tiny", vocab_size=400, epochs=2, batch_tokens=512,
                                        max_length=24, dropout=0.1, attention_dropout=0.1,
                                        activation_dropout=0.1,  # and the CMLM masks
                                        shuffle_buffer=64)  # 4 windows an epoch
    return "nat", config, PAIRS[:200], VAL


# The translator's is the SIGKILL test above, streamed (in memory, its pipeline resumes as a
# stream's does: tests/data/test_translation_pipeline.py); the NAT's runs in memory.
@pytest.mark.parametrize("make", [_tagger, _nat], ids=["tagger", "nat"])
def test_a_run_stopped_at_a_random_batch_resumes_to_the_weights_of_one_never_stopped(
        tmp_path, make):
    name, config, data, validation = make()
    assert getattr(config, "dropout", 0) > 0
    task, never = get_task(name), tmp_path / "never"
    options = {"bleu_sample_size": 0} if name != "tagger" else {}

    def fit(workdir, callbacks=()):
        keras.utils.set_random_seed(0)
        model, _, _ = train(task, config, str(workdir), train_data=data,
                            validation_data=validation, verbose=0, backup_every=BACKUP_EVERY,
                            callbacks=list(callbacks), **options)  # fmt: skip
        return model

    copier = CopyAtEachBatch(never, tmp_path / "copies")
    expected = fit(never, [copier])
    stop_at = random.Random().randint(BACKUP_EVERY, copier.seen - 1)  # after the first backup
    with open(tmp_path / "copies" / str(stop_at) / BACKUP_DIR / "training_metadata.json") as f:
        backup = json.load(f)
    assert backup["seeds"], backup  # the states of the model's random seeds
    # The translators' pipelines resume in the window of the last batch done, the tagger's
    # (a treebank in memory) by making the batches done again.
    assert ("window" in backup) == (name != "tagger" and backup["batches"] > 0), backup
    said = ResumableBackup.describe(str(tmp_path / "copies" / str(stop_at) / BACKUP_DIR))
    if backup["batches"]:  # as `zoo train` says it, resuming
        assert ("in its window" in said) == (name != "tagger"), said
        assert ("made again and dropped" in said) == (name == "tagger"), said
    resumed = fit(tmp_path / "copies" / str(stop_at))
    assert int(resumed.optimizer.iterations) == int(expected.optimizer.iterations), stop_at
    for want, got in zip(expected.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"stopped at {stop_at}")
