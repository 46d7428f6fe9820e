"""A tiny training run killed with SIGKILL at a random step, then run again with the same
command: it finishes with the weights of a run that was never killed, on pairs held in memory
and on a corpus streamed from gzipped shards."""

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
from zoo.data import ParallelCorpus, load_multi30k
from zoo.tasks.translation.config import get_config
from zoo.tasks import get_task
from zoo.training import train

PAIRS = load_multi30k("train")[:300]
VAL = load_multi30k("val")[:16]
TRANSLATOR = get_task("translator")
# No dropout: its random masks are the one state a backup does not hold.
CONFIG = get_config("tiny", vocab_size=400, epochs=2, batch_tokens=512, max_length=24,
                    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip
BACKUP_EVERY = 3


KILLED_AT_FILE = "killed_at_step"


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
    number of batches trained on. With ``corpus`` (a folder of :func:`write_shards`), the
    pairs are streamed from its files in pieces of 40 lines (shuffle windows of 40)."""
    keras.utils.set_random_seed(0)
    counter = KillAtBatch(workdir, kill_at)
    config, data = CONFIG, PAIRS
    if corpus:
        config = dataclasses.replace(CONFIG, shuffle_buffer=40)
        data = ParallelCorpus([(f"{corpus}/train.*.en.gz", f"{corpus}/train.*.de.gz")])
    model, _, _ = train(TRANSLATOR, config, workdir, train_data=data, validation_data=VAL,
                        bleu_sample_size=0, verbose=0, backup_every=BACKUP_EVERY,
                        callbacks=[counter])  # fmt: skip
    return model, counter.seen


@pytest.mark.parametrize("streamed", [False, True], ids=["in_memory", "streamed"])
def test_a_run_killed_at_a_random_step_resumes_to_the_weights_of_one_never_killed(tmp_path,
                                                                                  streamed):
    corpus = None
    if streamed:
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
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"killed at {kill_at}")
