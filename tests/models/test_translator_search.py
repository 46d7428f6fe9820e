"""Which of a translator's searches take a batch as two halves side by side
(zoo.decoding.bucketed; tests/decoding/test_buckets.py runs the halves)."""

import pytest

from zoo.models.translator.search import SIDE_BY_SIDE_MAX_WIDTH, halves_side_by_side


class _Model:  # what the rule reads of a backbone: its config
    def __init__(self, d_model):
        self.d_model = d_model

    def get_config(self):
        return {"d_model": self.d_model}


@pytest.mark.parametrize("d_model, method, halves", [
    (128, "beam", True), (128, "greedy", True), (SIDE_BY_SIDE_MAX_WIDTH, "mask_predict", True),
    (128, "sample", False),  # its draws depend on the batch: halves would draw alike
    (512, "greedy", False),  # the base Transformer's matmuls take both cores already
])  # fmt: skip
def test_a_narrow_models_searches_that_draw_nothing_go_in_halves(d_model, method, halves):
    def search(source):
        return source

    assert halves_side_by_side(search, _Model(d_model), method) is search
    assert search.side_by_side is halves
