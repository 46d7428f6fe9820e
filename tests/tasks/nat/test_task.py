"""The NAT as a task on the one run path: train(), load(), predict and the command line."""

import keras
import numpy as np
import pytest

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


def test_load_predict_and_the_command_line(workdir, capsys):
    path, _ = workdir
    task, model, vocabulary = load(path)
    assert task is get_task("nat") and model.name == "nat"
    lines = task.predict(model, vocabulary, ["A dog runs.", ""], iterations=2, length_beam=2)
    assert len(lines) == 2 and lines[1] == "" and "\u2047" not in lines[0]  # no mask (UNK) left
    main(["translate", "--workdir", path, "--iterations", "2", "--length-beam", "2",
          "A dog runs.", ""])
    # The command line keeps one line per input (a tiny model may emit a byte like \x0b).
    assert capsys.readouterr().out.splitlines() == [one_line(line) for line in lines]
    with pytest.raises(CommandLineError, match="--beam-size: not an option of the nat"):
        main(["translate", "--workdir", path, "--beam-size", "2", "A dog runs."])


def test_the_copy_and_max_length_options_train_and_translate(tmp_path):
    """One short run of a model with both options (they are independent switches, and one run
    costs half of two): a finite loss, then predict with the model's own defaults (one
    iteration for a copy model, one length for a max-length model), and more of either refused."""
    task = get_task("nat")
    config = task.get_config("tiny", vocab_size=400, max_length=32, epochs=1,
                             decoder_input="copy", length_mode="max")
    path = str(tmp_path / "workdir")
    # No BLEU after the epoch (its decoding compiles for seconds): predict decodes below.
    _, history, _ = train(task, config, path, train_data=load_multi30k("train")[:300],
                          validation_data=load_multi30k("val")[:20], bleu_sample_size=0,
                          verbose=0)  # fmt: skip
    for key in ("loss", "tokens_loss", "length_loss", "val_loss"):
        assert np.all(np.isfinite(history.history[key])), key
    task, model, vocabulary = load(path)
    lines = task.predict(model, vocabulary, ["A dog runs.", ""])
    assert len(lines) == 2 and lines[1] == "" and "\u2047" not in lines[0]
    for option in ("iterations", "length_beam"):
        with pytest.raises(ValueError, match=f"{option}=2: a model with"):
            task.predict(model, vocabulary, ["A dog runs."], **{option: 2})
