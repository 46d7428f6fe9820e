"""zoo_cli's table of tasks stays TensorFlow-free, so it repeats what the tasks say: this test
keeps the two in step (names, presets, splits, the predict verb, and every flag a hook takes)."""

import argparse
import dataclasses
import inspect

import pytest

import zoo_cli
from zoo import cli
from zoo.tasks import TASKS


def dests(flags):
    """The argparse destinations of a row's flags."""
    parser = argparse.ArgumentParser(add_help=False)
    return [parser.add_argument(*names, **options).dest for names, options in flags]


def parameters(function):
    return set(inspect.signature(function).parameters)


def takes(function, name):
    """Whether ``function`` takes a keyword ``name`` (a catch-all ``**options`` does not count:
    it would hide a flag that nothing reads)."""
    return name in inspect.signature(function).parameters


def test_the_table_names_every_task():
    assert set(zoo_cli.TASKS) == set(TASKS)


@pytest.mark.parametrize("name", sorted(zoo_cli.TASKS))
def test_a_row_says_what_its_task_says(name):
    row, task = zoo_cli.TASKS[name], TASKS[name]
    assert set(row["presets"]) == set(task.presets)
    assert set(row["splits"]) == set(task.splits)
    assert set(task.evaluation_splits) <= set(task.splits)
    assert {task.train_split, task.validation_split} <= set(task.splits)
    assert row["predict"] == task.predict_verb and row["predict_help"]


@pytest.mark.parametrize("name", sorted(zoo_cli.TASKS))
def test_every_flag_reaches_a_hook_that_takes_it(name):
    row, task = zoo_cli.TASKS[name], TASKS[name]
    fields = {field.name for field in dataclasses.fields(task.config_class)}
    train_options = parameters(task.metric_callbacks)
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
    task = TASKS["tagger"]
    [dest] = dests([zoo_cli.flag("--beam-size", type=int)])
    assert not takes(task.predict, dest)
