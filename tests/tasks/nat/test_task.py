"""The NAT as a task on the one run path: train(), load(), predict and the command line."""

import keras
import numpy as np
import pytest

import zoo.cli
from zoo.data import load_multi30k, one_line
from zoo.tasks import get_task, load
from zoo.training import train
from zoo_cli import CommandLineError, main


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    keras.utils.set_random_seed(0)  # not the state that the worker's earlier tests left
    task = get_task("nat")
    config = task.get_config("tiny", vocab_size=400, max_length=32, epochs=2)
    path = str(tmp_path_factory.mktemp("nat") / "workdir")
    _, history, _ = train(
        task, config, path, train_data=load_multi30k("train")[:400],
        validation_data=load_multi30k("val")[:50], verbose=0, bleu_sample_size=8,
    )
    return path, history.history


def test_trains_both_losses_through_the_one_train(workdir):
    _, history = workdir
    for key in ("loss", "tokens_loss", "length_loss", "length_accuracy", "val_loss", "val_bleu"):
        assert len(history[key]) == 2 and np.all(np.isfinite(history[key])), key
    assert history["loss"][1] < history["loss"][0]


def test_load_predict_and_the_command_line(workdir, capsys, monkeypatch):
    path, _ = workdir
    loaded = load(path)
    task, model, vocabulary = loaded
    assert task is get_task("nat") and model.name == "nat"
    lines = task.predict(model, vocabulary, ["A dog runs.", ""], iterations=2, length_beam=2)
    assert len(lines) == 2 and lines[1] == "" and "\u2047" not in lines[0]  # no mask (UNK) left

    # The command line reads the workdir as above: given that model, its search compiles once.
    def load_workdir(folder):
        assert folder == path
        return loaded

    monkeypatch.setattr(zoo.cli, "load", load_workdir)
    main(["translate", "--workdir", path, "--iterations", "2", "--length-beam", "2",
          "A dog runs.", ""])
    # The command line keeps one line per input (a tiny model may emit a byte like \x0b).
    assert capsys.readouterr().out.splitlines() == [one_line(line) for line in lines]
    with pytest.raises(CommandLineError, match="--beam-size: not an option of the nat"):
        main(["translate", "--workdir", path, "--beam-size", "2", "A dog runs."])


def test_the_copy_and_max_length_options_train(workdir):
    """A model with both options (independent switches), in its parts: steps on its batches
    lower a finite loss (train() itself is the default model's, above). How it predicts and
    serves, with its own counts: tests/tasks/nat/test_serving.py."""
    keras.utils.set_random_seed(1)
    task = get_task("nat")
    config = task.get_config("tiny", vocab_size=400, max_length=32, decoder_input="copy",
                             length_mode="max")  # fmt: skip
    vocabulary = task.read_vocabulary(workdir[0])  # the run's above: none learned again
    model = task.compile_model(task.build_model(config), config)
    model.run_eagerly = True  # two steps: cheaper than tracing the train step
    batches = [next(iter(task.dataset(config, vocabulary, load_multi30k(split)[:64], training)))
               for split, training in (("train", True), ("val", False))]  # fmt: skip
    logs = [model.train_on_batch(*batches[0], return_dict=True) for _ in range(2)]
    logs.append(model.test_on_batch(*batches[1], return_dict=True))  # validation's
    for key in ("loss", "tokens_loss", "length_loss"):
        assert all(np.isfinite(log[key]) for log in logs), key
    assert logs[1]["loss"] < logs[0]["loss"], logs
