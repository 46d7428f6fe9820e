"""The training config, and a run's config: a model's architecture joined with its task's
training config, each part checked by its own class (zoo/training/config.py and each task's
config.py)."""

import dataclasses

import pytest

from zoo.models import NATConfig, TaggerConfig, TranslatorConfig
from zoo.models import tagger_config, translator_config
from zoo.tasks import TASKS
from zoo.tasks.tagging.config import TaggingTraining
from zoo.tasks.translation.config import TRAINING_PRESETS, TranslationTraining, TranslatorRun
from zoo.training.config import TrainingConfig, field_values, run_presets


def names(config_class):
    return {field.name for field in dataclasses.fields(config_class)}


@pytest.mark.parametrize("task, model, training", [
    ("translator", TranslatorConfig, TranslationTraining),
    ("nat", NATConfig, TranslationTraining),
    ("tagger", TaggerConfig, TaggingTraining),
])  # fmt: skip
def test_a_run_is_its_architecture_and_its_training(task, model, training):
    run = TASKS[task].config_class
    assert issubclass(run, model) and issubclass(run, training)
    assert names(model) & names(TrainingConfig) == set()  # a model config: architecture only
    # The backbone's arguments are the model config's fields, no more.
    backbone = TASKS[task].task_model.backbone_cls
    assert set(backbone.architecture_fields()) == names(model)


def test_a_runs_presets_join_the_architectures_and_the_trainings():
    for name, run in TASKS["translator"].presets.items():
        assert TranslatorConfig(**{k: getattr(run, k) for k in names(TranslatorConfig)}) == (
            translator_config(name))
        assert field_values(TRAINING_PRESETS[name]) == {
            k: getattr(run, k) for k in names(TranslationTraining)}
    small = TASKS["tagger"].get_config("small")
    assert small.dropout == tagger_config("small").dropout == 0.3 and small.epochs == 16
    # Only names that both sides have make a run's preset.
    joined = run_presets(TranslatorRun, {"a": TranslatorConfig(), "b": TranslatorConfig()},
                         {"a": TranslationTraining(epochs=3)})  # fmt: skip
    assert list(joined) == ["a"] and joined["a"].epochs == 3


def test_each_part_of_a_run_is_checked_by_its_own_class():
    task = TASKS["translator"]
    with pytest.raises(ValueError, match="long_pairs must be one of"):
        task.get_config("tiny", long_pairs="drop")
    with pytest.raises(ValueError, match="Unknown cross_attention 'hard'"):
        task.get_config("tiny", cross_attention="hard")
    with pytest.raises(ValueError, match="gradient_accumulation_steps must be at least 1"):
        task.get_config("tiny", gradient_accumulation_steps=0)
    with pytest.raises(ValueError, match="Unknown decoder 'rnn'"):
        TASKS["nat"].get_config("tiny", decoder="rnn")
    with pytest.raises(TypeError, match="epochs"):
        translator_config("tiny", epochs=3)  # the architecture has no training fields
