"""The shipped SavedModels on generated input (benchmarks/serving_fuzz.py, a few examples here;
`python benchmarks/serving_fuzz.py` runs 10,000 inputs and records the result)."""

import importlib.util
import os

from tests.harness import REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    "serving_fuzz", os.path.join(REPO_ROOT, "benchmarks", "serving_fuzz.py")
)
serving_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serving_fuzz)


def test_generated_batches_give_one_valid_output_per_input_in_bounded_time():
    seen = {}

    def record(model, batch, seconds):
        seen.setdefault(model, []).append(len(batch))

    serving_fuzz.fuzz(serving_fuzz.load_signatures(), max_examples=4, record=record)
    assert set(seen) == set(serving_fuzz.MODELS)
    for sizes in seen.values():  # hypothesis drew real batches, not only empty ones
        assert len(sizes) == 4 and sum(sizes) > 0


def test_the_check_fails_on_a_model_that_drops_an_input():
    import pytest
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def drops_the_last(inputs):
        return {"translations": inputs[:-1]}

    with pytest.raises(AssertionError):
        serving_fuzz.check_batch(drops_the_last.get_concrete_function(), "translations", [b"a", b"b"])
