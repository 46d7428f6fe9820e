import doctest

import pytest

from zoo.decoding import beam, greedy, nat, sampling, text


@pytest.mark.parametrize("module", [greedy, beam, sampling, text, nat])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
