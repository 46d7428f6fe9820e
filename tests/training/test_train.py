"""train() end to end at tiny size: the workdir, resume after a crash, config guarding."""

import csv
import dataclasses
import json
import os

import keras
import numpy as np
import pytest

from tests.harness import CrashAtEpoch
from zoo.data import load_multi30k
from zoo.tasks.translation.config import get_config
from zoo.tasks import get_task
from zoo.training import train

TASK = get_task("translator")
PAIRS = load_multi30k("train")[:300]
VAL = load_multi30k("val")[:60]
CONFIG = get_config("tiny", vocab_size=400, epochs=2, batch_tokens=1024, max_length=32)


def test_a_mixed_precision_run_writes_the_workdir_scores_bleu_and_resumes_after_a_crash(tmp_path):
    # One run has every part (the mixed policy, the BLEU callback, the crash and the resume):
    # each train() call builds and traces a model again, most of its time.
    workdir = str(tmp_path / "run")
    options = dict(train_data=PAIRS, validation_data=VAL, mixed_precision=True,
                   bleu_sample_size=8, verbose=0)  # fmt: skip
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(TASK, CONFIG, workdir, callbacks=[CrashAtEpoch(1)], **options)
    assert keras.config.dtype_policy().name == "float32"  # restored, after a crash too
    for name in ("config.json", "sentencepiece.model", "checkpoint.keras", "backup", "logs"):
        assert os.path.exists(os.path.join(workdir, name)), name
    with open(os.path.join(workdir, "config.json")) as f:
        assert json.load(f)["vocab_size"] == 400

    # The same command again resumes: only the second epoch is left to run.
    model, history, tokenizer = train(TASK, CONFIG, workdir, **options)
    assert history.epoch == [1]
    assert os.path.exists(os.path.join(workdir, "model.keras"))
    assert tokenizer.vocab_size == 400
    assert keras.config.dtype_policy().name == "float32"
    assert model.get_layer("encoder_block_0").compute_dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    with open(os.path.join(workdir, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(row["epoch"]) for row in rows] == [0, 1]  # the validation BLEU of each epoch
    assert all(np.isfinite(float(row["loss"])) and 0.0 <= float(row["val_bleu"]) <= 100.0
               for row in rows)  # fmt: skip

    # Resuming with another model is refused, naming the fields; training longer is not.
    with pytest.raises(ValueError, match=r"d_model"):
        train(TASK, get_config("tiny", vocab_size=400, d_model=48), workdir, train_data=PAIRS,
              validation_data=VAL, verbose=0)


def test_train_rejects_a_non_config(tmp_path):
    with pytest.raises(TypeError, match="TranslatorRun"):
        train(TASK, {"d_model": 8}, str(tmp_path))


def test_a_field_added_since_the_workdir_counts_at_its_default(tmp_path):
    from zoo.training.train import check_config

    saved = dataclasses.asdict(CONFIG)
    del saved["activation_dropout"]  # a workdir made before the field existed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    check_config(CONFIG, str(tmp_path))  # the default: the same model, resumable
    with pytest.raises(ValueError, match="activation_dropout"):
        check_config(dataclasses.replace(CONFIG, activation_dropout=0.1), str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not a JSON config"):
        check_config(CONFIG, str(tmp_path))


def test_a_removed_field_resumes_at_its_old_default_only(tmp_path):
    from zoo.training.train import check_config

    for data_dir, resumes in (("", True), ("/elsewhere/kd", False)):
        saved = {**dataclasses.asdict(CONFIG), "data_dir": data_dir}  # before --train
        (tmp_path / "config.json").write_text(json.dumps(saved))
        if resumes:
            check_config(CONFIG, str(tmp_path))
        else:
            with pytest.raises(ValueError, match=r"fields \['data_dir'\] differ"):
                check_config(CONFIG, str(tmp_path))


def test_a_nat_workdir_of_the_translators_fields_resumes(tmp_path):
    # A NAT's config held the translator's decoder options until it had its own architecture;
    # at the values a NAT had to keep, its workdir resumes, and at no other.
    from zoo.tasks.nat.config import NATRun, get_config as nat_config
    from zoo.training.train import check_config

    config = nat_config("tiny")
    saved = {**dataclasses.asdict(config), **NATRun.retired_fields}
    (tmp_path / "config.json").write_text(json.dumps(saved))
    check_config(config, str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**saved, "copy_mechanism": True}))
    with pytest.raises(ValueError, match=r"fields \['copy_mechanism'\] differ"):
        check_config(config, str(tmp_path))


def test_a_tuple_field_resumes_from_its_json_list(tmp_path):
    from zoo.tasks.tagging.config import get_config as tagger_config
    from zoo.training.train import check_config

    config = tagger_config("tiny", char_kernel_size=(2, 3))
    check_config(config, str(tmp_path))  # writes [2, 3]
    check_config(config, str(tmp_path))  # reads it back: the same config
    reread = tagger_config("tiny", **{"char_kernel_size": [2, 3]})
    assert reread.char_kernel_size == (2, 3)
    with pytest.raises(ValueError, match="char_kernel_size"):
        check_config(tagger_config("tiny", char_kernel_size=(2, 4)), str(tmp_path))
