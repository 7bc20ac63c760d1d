"""Show attention weights: the seeds' tab-separated tables and labelled heatmaps.

matplotlib is imported by the plotting functions when they are called, not by
``import attnlib``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch  # noqa: F401  (the examples use it)
from torch import Tensor

from attnlib._checks import shape_str

__all__ = ["plot_heads", "plot_weights", "print_weights"]


def _as_matrix(weights, rows: Sequence[str], cols: Sequence[str] | None, ranks=(2,)):
    if isinstance(weights, Tensor):
        weights = weights.detach().cpu().numpy()
    if getattr(weights, "ndim", None) not in ranks:
        got = shape_str(weights.shape) if hasattr(weights, "shape") else type(weights).__name__
        raise ValueError(f"weights must be {' or '.join(f'{r}-D' for r in ranks)}; got {got}")
    cols = list(rows) if cols is None else list(cols)
    if weights.shape[-2:] != (len(rows), len(cols)):
        raise ValueError(
            f"weights must have shape (len(rows)={len(rows)}, len(cols)={len(cols)}); got "
            f"{shape_str(weights.shape)}"
        )
    return weights, list(rows), cols


def print_weights(weights, rows: Sequence[str], cols: Sequence[str] | None = None, digits=2):
    """Print a matrix as the seeds' tab-separated table: a header of column labels, then
    one labelled row per query (seed 000's ``print_attn_weights``).

    Args:
        weights: the ``(n, m)`` matrix (tensor or array).
        rows: ``n`` row labels (the queries); cols: ``m`` column labels, default ``rows``.
        digits: decimals printed.

    Shape:
        ``weights``: ``(n, m)`` with ``n = len(rows)``, ``m = len(cols)``.

    Raises:
        ValueError: if the shape does not match the labels.

    Example:
        >>> w = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
        >>> print_weights(w, ["a", "b"])  # doctest: +NORMALIZE_WHITESPACE
                a	b
        a	0.25	0.75
        b	0.50	0.50
    """
    weights, rows, cols = _as_matrix(weights, rows, cols)
    print("\t" + "".join(f"{c}\t" for c in cols))
    for label, row in zip(rows, weights):
        print(f"{label}\t" + "".join(f"{v:.{digits}f}\t" for v in row))


def plot_weights(
    weights,
    rows,
    cols=None,
    ax=None,
    title=None,
    digits=2,
    cmap="viridis",
    xlabel="key",
    ylabel="query",
    vmin=None,
    vmax=None,
):
    """Draw a matrix as a heatmap, rows and columns labelled, each cell with its value.

    Args:
        weights: the ``(n, m)`` matrix; rows, cols: labels (``cols`` defaults to ``rows``).
        ax: a matplotlib ``Axes`` to draw into; a new figure if ``None``.
        title: the axes title. digits: decimals written in the cells (``None``: no values).
        cmap: the colour map. xlabel, ylabel: the axis labels (``"key"``, ``"query"``).
        vmin, vmax: the ends of the colour scale (default: the matrix's min and max); give
            several heatmaps the same ones to compare their colours.

    Returns:
        The ``Axes``. Cells that are NaN stay blank.

    Shape:
        ``weights``: ``(n, m)`` with ``n = len(rows)``, ``m = len(cols)``.

    Raises:
        ValueError: if the shape does not match the labels.

    Example:
        >>> ax = plot_weights(torch.tensor([[0.9, 0.1], [0.4, 0.6]]), ["ship", "crew"])
        >>> [t.get_text() for t in ax.get_xticklabels()], [t.get_text() for t in ax.texts]
        (['ship', 'crew'], ['0.90', '0.10', '0.40', '0.60'])
    """
    import matplotlib.pyplot as plt

    weights, rows, cols = _as_matrix(weights, rows, cols)
    if ax is None:
        size = (
            min(12.0, max(3.0, 0.55 * len(cols) + 1.5)),
            min(9.0, max(2.5, 0.45 * len(rows) + 1.0)),
        )
        _, ax = plt.subplots(figsize=size, layout="constrained")
    image = ax.imshow(
        weights, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto" if len(cols) > 20 else None
    )
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if digits is not None and len(rows) * len(cols) <= 400:
        lo, hi = image.get_clim()
        middle = (lo + hi) / 2
        for i in range(len(rows)):
            for j in range(len(cols)):
                v = weights[i, j]
                if v != v:  # NaN: leave the cell blank
                    continue
                colour = "black" if v > middle else "white"
                ax.text(j, i, f"{v:.{digits}f}", ha="center", va="center", color=colour, fontsize=7)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def plot_heads(weights, rows, cols=None, titles=None, digits=None, ncols=None):
    """One heatmap per head, side by side.

    Args:
        weights: ``(H, n, m)`` per-head weights (``average_attn_weights=False`` in PyTorch).
        rows, cols: labels. titles: one per head, default ``"head 0"``, ...
        digits: decimals in the cells, default none. ncols: heads per row of the grid.

    Returns:
        The matplotlib ``Figure``.

    Shape:
        ``weights``: ``(H, n, m)`` with ``n = len(rows)``, ``m = len(cols)``.

    Raises:
        ValueError: if ``weights`` is not 3-D or its shape does not match the labels.

    Example:
        >>> fig = plot_heads(torch.rand(3, 4, 4), ["a", "b", "c", "d"])
        >>> [ax.get_title() for ax in fig.axes if ax.images]
        ['head 0', 'head 1', 'head 2']
    """
    import matplotlib.pyplot as plt

    weights, rows, cols = _as_matrix(weights, rows, cols, ranks=(3,))
    heads = weights.shape[0]
    ncols = min(heads, 4) if ncols is None else ncols
    nrows = -(-heads // ncols)
    w = min(max(3.0, 0.45 * len(cols) + 1.5), 16.0 / ncols)  # at most 16 inches wide in all
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(w * ncols, w * nrows * len(rows) / len(cols)),
        layout="constrained",
        squeeze=False,
    )
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.set_visible(False)
            continue
        title = titles[h] if titles else f"head {h}"
        plot_weights(weights[h], rows, cols, ax=ax, title=title, digits=digits)
    return fig
