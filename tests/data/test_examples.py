import doctest

import pytest

from zoo.data import multi30k, sentencepiece_vocab, translation_pipeline


@pytest.mark.parametrize("module", [multi30k, sentencepiece_vocab, translation_pipeline])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
