import doctest

import pytest

from zoo.evaluation import copying
from zoo.evaluation.copying import rare_word_accuracy

TRAIN = ["a dog runs .", "a dog sits .", "Anna runs ."]


def test_counts_rare_words_and_numbers_that_the_reference_copies():
    sources = ["Anna and Bob walk 2 dogs .", "a dog runs ."]
    references = ["Anna und Bob führen 2 Hunde .", "ein Hund rennt ."]
    hypotheses = ["Anna und Rob führen zwei Hunde .", "ein Hund rennt ."]
    # Anna is seen once (rare), Bob never, 2 is a number; "dog" is common and not copied.
    assert rare_word_accuracy(sources, hypotheses, references, TRAIN) == {
        "rare_words": 3,
        "rare_word_accuracy": pytest.approx(1 / 3),
    }
    assert rare_word_accuracy(sources, hypotheses, references, TRAIN, max_count=0) == {
        "rare_words": 2,  # Anna is no longer rare
        "rare_word_accuracy": 0.0,
    }


def test_no_rare_words_scores_zero_of_zero():
    assert rare_word_accuracy(["a dog ."], ["ein Hund ."], ["ein Hund ."], TRAIN) == {
        "rare_words": 0,
        "rare_word_accuracy": 0.0,
    }


def test_misaligned_lists_are_refused():
    with pytest.raises(ValueError, match="must align: 2, 1 and 1"):
        rare_word_accuracy(["a", "b"], ["a"], ["a"], TRAIN)


def test_docstring_examples_run():
    assert doctest.testmod(copying).failed == 0
