"""A tiny training run killed with SIGKILL at a random step, then run again with the same
command: it finishes with the weights of a run that was never killed."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np

from tests.harness import REPO_ROOT
from zoo.artifacts import BACKUP_DIR, SENTENCEPIECE_FILE
from zoo.data import load_multi30k
from zoo.models.translator import get_config
from zoo.training import train

PAIRS = load_multi30k("train")[:300]
VAL = load_multi30k("val")[:16]
# No dropout: its random masks are the one state a backup does not hold.
CONFIG = get_config("tiny", vocab_size=400, epochs=2, batch_tokens=512, max_length=24,
                    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip
BACKUP_EVERY = 3


class KillAtStep(keras.callbacks.Callback):
    """SIGKILL this process once ``step`` training steps have ended: ``kill -9``, no cleanup."""

    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def run(workdir, kill_at=None):
    """The same command every time (and, with ``kill_at``, the kill)."""
    keras.utils.set_random_seed(0)
    model, _, _ = train("translator", CONFIG, workdir, train_data=PAIRS, validation_data=VAL,
                        bleu_sample_size=0, verbose=0, backup_every=BACKUP_EVERY,
                        callbacks=[KillAtStep(kill_at)] if kill_at else [])  # fmt: skip
    return model


def test_a_run_killed_at_a_random_step_resumes_to_the_weights_of_one_never_killed(tmp_path):
    never = run(str(tmp_path / "never"))
    total = int(never.optimizer.iterations)
    kill_at = random.Random().randint(BACKUP_EVERY, total - 1)  # after the first backup
    killed = tmp_path / "killed"
    killed.mkdir()  # the same vocabulary (learning it twice is another test's business)
    shutil.copy(tmp_path / "never" / SENTENCEPIECE_FILE, killed)
    script = f"from tests.training.test_kill_and_resume import run\nrun({str(killed)!r}, {kill_at})"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, PYTHONPATH=REPO_ROOT))  # fmt: skip
    assert result.returncode == -signal.SIGKILL, (kill_at, result.stderr[-3000:])
    with open(killed / BACKUP_DIR / "training_metadata.json") as f:
        backup = json.load(f)
    assert 0 <= kill_at - backup["step"] < BACKUP_EVERY or backup["batches"] == 0, (kill_at, backup)

    resumed = run(str(killed))
    assert int(resumed.optimizer.iterations) == total, kill_at
    for expected, got in zip(never.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"killed at {kill_at}")
