import doctest

import pytest

from zoo.data import (
    multi30k,
    sentencepiece_vocab,
    tagger_vocabulary,
    tagging_pipeline,
    translation_pipeline,
)

MODULES = [multi30k, sentencepiece_vocab, tagger_vocabulary, tagging_pipeline, translation_pipeline]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
