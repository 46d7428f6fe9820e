"""zoo.viz.plot_confusion_matrix: what it draws, against the counts normalized by hand."""

import doctest

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from zoo import viz  # noqa: E402

LABELS = ["NOUN", "VERB", "ADJ"]
COUNTS = np.array([[90, 8, 2], [5, 45, 0], [0, 0, 0]])  # ADJ never occurs in the gold tags


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _drawn(fig):
    ax = fig.axes[0]
    return ax, np.asarray(ax.images[0].get_array())


def test_rows_are_normalized_by_their_gold_totals():
    ax, values = _drawn(viz.plot_confusion_matrix(COUNTS, LABELS))
    expected = np.array([[0.9, 0.08, 0.02], [0.1, 0.9, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(values, expected)
    assert [t.get_text() for t in ax.get_xticklabels()] == LABELS
    assert [t.get_text() for t in ax.get_yticklabels()] == LABELS
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("predicted", "gold")


def test_annotations_are_the_cells_at_or_above_the_threshold():
    ax, _ = _drawn(viz.plot_confusion_matrix(COUNTS, LABELS, min_annotation=0.05))
    cells = {}
    for text in ax.texts:
        column, row = text.get_position()
        cells[round(row), round(column)] = text.get_text()
    assert cells == {(0, 0): "90", (0, 1): "8", (1, 0): "10", (1, 1): "90"}
    ax, _ = _drawn(viz.plot_confusion_matrix(COUNTS, LABELS, min_annotation=None))
    assert len(ax.texts) == 0


def test_counts_are_drawn_as_they_are_without_normalize():
    ax, values = _drawn(viz.plot_confusion_matrix(COUNTS, LABELS, normalize=False))
    np.testing.assert_array_equal(values, COUNTS)
    assert sorted(t.get_text() for t in ax.texts) == sorted(["90", "8", "2", "5", "45"])


def test_it_draws_on_a_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    assert viz.plot_confusion_matrix(COUNTS, LABELS, ax=right, title="EWT") is fig
    assert right.get_title() == "EWT" and len(right.images) == 1 and not left.images


@pytest.mark.parametrize(
    "counts, labels, message",
    [
        (np.ones((2, 3)), ["a", "b"], "square"),
        (np.ones((3, 3)), ["a", "b"], "2 labels for a 3x3"),
        (np.array([[1, -1], [0, 1]]), ["a", "b"], "negative"),
    ],
)
def test_bad_input_is_named(counts, labels, message):
    with pytest.raises(ValueError, match=message):
        viz.plot_confusion_matrix(counts, labels)


def test_docstring_examples_run():
    result = doctest.testmod(viz)
    assert result.attempted > 0 and result.failed == 0
