"""Pictures of what the layers compute: positional encodings and attention maps (matplotlib)."""

import numpy as np


def _axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)


def plot_position_encoding(table, ax=None, title="Sinusoidal position encoding"):
    """Draw a (positions, depth) encoding table as a heatmap.

    Args:
        table: array ``(T, D)``, e.g. ``SinusoidalPositionEncoding()(zeros((1, T, D)))[0]``.
        ax: a matplotlib Axes to draw on; a new figure when None.
        title: the title.

    Returns:
        The matplotlib Figure.
    """
    table = np.asarray(table)
    fig, ax = _axes(ax, (8, 4))
    image = ax.imshow(table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("depth (embedding dimension)")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    return fig


def plot_attention_map(weights, query_tokens=None, key_tokens=None, ax=None, title="Attention"):
    """Draw one attention map: rows are queries, columns are keys, each row sums to 1.

    Args:
        weights: array ``(T, S)`` (one head of one example).
        query_tokens: T labels for the rows (optional).
        key_tokens: S labels for the columns (optional).
        ax: a matplotlib Axes to draw on; a new figure when None.
        title: the title.

    Returns:
        The matplotlib Figure.
    """
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"plot_attention_map takes one (T, S) map; got shape {weights.shape}.")
    fig, ax = _axes(ax, (1 + 0.4 * weights.shape[1], 1 + 0.4 * weights.shape[0]))
    image = ax.imshow(weights, cmap="viridis", vmin=0, interpolation="nearest")
    if key_tokens is not None:
        ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90)
    if query_tokens is not None:
        ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    return fig


def plot_confusion_matrix(counts, labels, normalize=True, ax=None, title="Confusion matrix",
                          min_annotation=0.01):
    """Draw a confusion matrix: rows are the gold classes, columns the predicted ones.

    Args:
        counts: array ``(K, K)`` of counts, ``counts[g, p]`` the items of gold class ``g``
            predicted as ``p``.
        labels: the K class names, in the order of the rows and columns.
        normalize: divide each row by its total, so that a cell is the share of its gold class
            predicted as the column's class (a row with no items stays 0); False draws the
            counts as they are.
        ax: a matplotlib Axes to draw on; a new figure when None.
        title: the title.
        min_annotation: cells whose value is at least this are written in the cell (as a
            percentage when normalized, as a count otherwise); None writes none.

    Returns:
        The matplotlib Figure.

    Example:
        >>> fig = plot_confusion_matrix([[8, 2], [1, 9]], ["NOUN", "VERB"])
        >>> fig.axes[0].images[0].get_array()[0].tolist()
        [0.8, 0.2]
    """
    counts = np.asarray(counts, dtype="float64")
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError(f"plot_confusion_matrix takes a square (K, K) matrix; got {counts.shape}.")
    if len(labels) != counts.shape[0]:
        raise ValueError(f"{len(labels)} labels for a {counts.shape[0]}x{counts.shape[0]} matrix.")
    if np.any(counts < 0):
        raise ValueError("plot_confusion_matrix takes counts; some are negative.")
    values = counts
    if normalize:
        totals = counts.sum(axis=1, keepdims=True)  # (K, 1)
        values = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    size = 2 + 0.45 * len(labels)
    fig, ax = _axes(ax, (size + 1, size))
    image = ax.imshow(values, cmap="Blues", vmin=0, vmax=1 if normalize else None,
                      interpolation="nearest")
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title)
    if min_annotation is not None:
        high = values.max() / 2 if values.size else 0
        for g, p in zip(*np.nonzero(values >= min_annotation)):
            text = f"{100 * values[g, p]:.0f}" if normalize else f"{values[g, p]:.0f}"
            ax.text(p, g, text, ha="center", va="center", fontsize=7,
                    color="white" if values[g, p] > high else "black")
    fig.colorbar(image, ax=ax)
    return fig
