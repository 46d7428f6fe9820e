"""zoo.training.callbacks that need no training run."""

import types

from zoo.training import callbacks
from zoo.training.callbacks import TimeLimit


def test_a_time_limit_counts_from_the_first_fit_of_a_run(monkeypatch):
    """A resumed run trains its cut epoch in a fit of its own, then the rest in another: the
    limit is the run's, not each fit's."""
    clock = [100.0]
    monkeypatch.setattr(callbacks.time, "monotonic", lambda: clock[0])
    limit, model = TimeLimit(60), types.SimpleNamespace(stop_training=False)
    limit.set_model(model)
    limit.on_train_begin()  # the cut epoch's fit
    clock[0] += 40
    limit.on_train_batch_end(0)
    assert not model.stop_training
    limit.on_train_begin()  # the next fit: 40 s are gone already
    clock[0] += 21
    limit.on_train_batch_end(0)
    assert model.stop_training
