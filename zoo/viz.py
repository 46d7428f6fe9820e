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
