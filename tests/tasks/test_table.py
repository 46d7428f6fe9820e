"""The table of tasks (zoo/tasks/table.py): one row per task, read by the command line before
TensorFlow loads and by zoo.tasks; every flag of a row reaches a hook that takes it."""

import argparse
import dataclasses
import inspect
import subprocess
import sys

import pytest

from tests.harness import REPO_ROOT
from zoo import cli
from zoo.tasks import TASKS, table
from zoo.artifacts import folder_task


def dests(flags):
    """The argparse destinations of a row's flags."""
    parser = argparse.ArgumentParser(add_help=False)
    return [parser.add_argument(*names, **options).dest for names, options in flags]


def takes(function, name):
    """Whether ``function`` takes a keyword ``name`` (a catch-all ``**options`` does not count:
    it would hide a flag that nothing reads)."""
    return name in inspect.signature(function).parameters


def test_every_row_is_a_task_and_every_task_reads_its_row():
    assert set(table.TASKS) == set(TASKS)
    for name, task in TASKS.items():
        row = table.TASKS[name]
        assert tuple(task.presets) == row["presets"]  # each one a preset of the model
        assert task.splits == row["splits"] and task.predict_verb == row["predict"]
        assert {task.train_split, task.validation_split, *task.evaluation_splits} <= set(
            task.splits)


@pytest.mark.parametrize("name", sorted(table.TASKS))
def test_every_flag_reaches_a_hook_that_takes_it(name):
    row, task = table.TASKS[name], TASKS[name]
    fields = {field.name for field in dataclasses.fields(task.config_class)}
    train_options = set(inspect.signature(task.metric_callbacks).parameters)
    for dest in dests(row["train"]):  # the data flags are train()'s, through its task's hooks
        assert dest in fields or dest in train_options or dest in cli.DATA_OPTIONS, dest
    for hook, flags in ((task.evaluate, row["evaluate"]), (task.predict, row["predict_flags"])):
        for dest in dests(flags):
            assert takes(hook, dest) or dest in cli.EVALUATION_OPTIONS + cli.INPUT_FILE_OPTIONS, (
                f"{hook.__name__} --{dest}")
    # A task model's export_serving and its signatures' options; else the task's exporter.
    takers = ((task.task_model.export_serving, task.task_model.serving_class)
              if task.task_model else (task.exporter,))  # fmt: skip
    for dest in dests(row["export"]):
        assert any(takes(taker, dest) for taker in takers), f"export --{dest}"


def test_a_flag_the_task_does_not_take_is_caught():
    # The check can fail: a made-up --beam-size on the tagger's predict reaches no parameter.
    [dest] = dests([table.flag("--beam-size", type=int)])
    assert not takes(TASKS["tagger"].predict, dest)


def test_a_flag_that_sets_a_config_field_is_checked_by_the_config():
    # No list of a model's choices is copied into the table: the config refuses a wrong name.
    for flags in (row["train"] for row in table.TASKS.values()):
        assert not any("choices" in options for _, options in flags)
    with pytest.raises(ValueError, match="Unknown decoder 'rnn'; expected one of"):
        TASKS["nat"].get_config("tiny", decoder="rnn")


def test_folder_task_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing: no such folder"):
        folder_task(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"no trained model at .*model\.keras: run `zoo tr"):
        folder_task(tmp_path)
    (tmp_path / "model.keras").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match=r"model\.keras is not a readable \.keras model"):
        folder_task(tmp_path)
    assert folder_task(f"{REPO_ROOT}/saved_models/tagger-en-ewt") == "tagger"


def test_the_table_and_its_constants_load_without_tensorflow():
    # What zoo_cli reads before TensorFlow: these files import the standard library only.
    code = ("import sys, zoo_cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('zoo', 'tensorflow', 'keras', 'jax')))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=60, check=True)  # fmt: skip
    assert result.stdout.split() == ["['zoo.artifacts',", "'zoo.tasks.table',",
                                     "'zoo.training.options']"]  # fmt: skip
