"""Show attention weights: the seeds' tab-separated tables and labelled heatmaps.

matplotlib is imported by the plotting functions when they are called, not by
``import attnlib``.

Importing it changes no setting: the chapters make matplotlib's inline figures 2x ("retina")
PNGs themselves, in their first cell (``%config InlineBackend.figure_formats = ["retina"]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from attnlib._checks import check_int, check_real, shape_str
from attnlib._layout import TICK_PT, VALUE_PT, heads_layout, values_fit

__all__ = ["plot_heads", "plot_weights", "print_weights"]

MAX_CELLS_WITH_VALUES = 400  # plot_weights writes the values only up to this many cells


def _as_array(weights) -> np.ndarray:
    """``weights`` as a NumPy array of real numbers (float16 becomes float32, bool and
    integers float64, bfloat16 float32)."""
    if isinstance(weights, Tensor):
        if weights.is_complex():
            raise TypeError(f"weights must hold real numbers; got dtype {weights.dtype}")
        weights = weights.detach().cpu()
        if weights.dtype == torch.bfloat16:  # NumPy has no bfloat16
            weights = weights.float()
        weights = weights.numpy()
    elif isinstance(weights, (list, tuple)):
        try:
            weights = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(
                "weights must be a rectangular nested list of numbers (one list per row, "
                f"all of the same length); got a {type(weights).__name__} that is not ({error})"
            ) from None
    elif hasattr(weights, "__array__"):  # NumPy arrays, and pandas, JAX, Keras ... arrays
        weights = np.asarray(weights)
    else:
        raise TypeError(
            "weights must be a torch.Tensor, a NumPy array or a nested list of numbers; got "
            f"{type(weights).__name__}"
        )
    if weights.dtype.kind in "biu":
        weights = weights.astype(np.float64)
    elif weights.dtype == np.float16:
        weights = weights.astype(np.float32)  # matplotlib does not draw float16 images
    elif weights.dtype.kind != "f":
        raise TypeError(f"weights must hold real numbers; got dtype {weights.dtype}")
    return weights


def _labels(name: str, labels, axis: str) -> list[str]:
    """The labels as strings; each must be a str or an int (a position, a token id)."""
    if isinstance(labels, (str, bytes)):
        raise TypeError(
            f"{name} must be a list of labels, one per {axis}; got the string {labels!r} "
            "(split a sentence into words first, e.g. with attnlib.tokenize)"
        )
    if isinstance(labels, Tensor) or not isinstance(labels, Iterable):
        hint = " (convert a tensor with .tolist())" if isinstance(labels, Tensor) else ""
        raise TypeError(
            f"{name} must be a list of labels (str or int), one per {axis}; got "
            f"{type(labels).__name__}{hint}"
        )
    out = []
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            label = check_int(f"{name}[{i}]", label, what="a str (or an int)")
        out.append(str(label))
    return out


def _as_matrix(weights, rows, cols, ranks=(2,)):
    """Check and convert: the array, its row labels and its column labels."""
    weights = _as_array(weights)
    if weights.ndim not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"weights must be {want}; got {shape_str(weights.shape)}")
    rows = _labels("rows", rows, "row")
    cols = list(rows) if cols is None else _labels("cols", cols, "column")
    if weights.shape[-2:] != (len(rows), len(cols)):
        raise ValueError(
            f"weights must have shape (len(rows)={len(rows)}, len(cols)={len(cols)}); got "
            f"{shape_str(weights.shape)}"
        )
    return weights, rows, cols


def _check_digits(digits, allow_none: bool) -> int | None:
    if digits is None and allow_none:
        return None
    want = "an int >= 0 (the decimals shown)" + (" or None (no values)" if allow_none else "")
    return check_int("digits", digits, low=0, what=want)


def _check_limit(name: str, value) -> float | None:
    if value is None:
        return None
    return check_real(name, value, "a finite number or None", math.isfinite)


def _colour_limits(weights: np.ndarray, vmin, vmax, default=None) -> tuple[float, float]:
    """The ends of the colour scale, ``vmin < vmax``: those given, else ``default`` if
    given, else the smallest and largest finite values of ``weights`` (0 and 1 if none)."""
    vmin, vmax = _check_limit("vmin", vmin), _check_limit("vmax", vmax)
    if vmin is not None and vmax is not None:
        if vmin >= vmax:
            raise ValueError(f"vmin must be < vmax; got vmin={vmin:g}, vmax={vmax:g}")
        return vmin, vmax
    finite = weights[np.isfinite(weights)]
    if default:  # the default ends of the scale, not of the data
        (lo, hi), top, bottom = default, "the top of the scale", "the bottom of the scale"
    else:
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        top, bottom = "the largest finite value of weights", "the smallest finite value of weights"
    if vmin is not None and vmin >= hi:
        raise ValueError(f"vmin must be below {top}, {hi:g}; got vmin={vmin:g} (give vmax too)")
    if vmax is not None and vmax <= lo:
        raise ValueError(f"vmax must be above {bottom}, {lo:g}; got vmax={vmax:g} (give vmin too)")
    return (lo if vmin is None else vmin), (hi if vmax is None else vmax)


def _check_plottable(weights: np.ndarray, what: str) -> None:
    if weights.size == 0:
        raise ValueError(
            f"weights must have at least {what} to plot; got {shape_str(weights.shape)}"
        )


def _draw(ax, weights, digits, cmap, norm, fontsize, aspect="auto"):
    """The heatmap of one matrix in ``ax`` on the colour scale ``norm`` (a matplotlib
    ``Normalize``), each cell with its value unless ``digits`` is None; returns the image."""
    image = ax.imshow(weights, cmap=cmap, norm=norm, aspect=aspect)
    if digits is not None:
        middle = (norm.vmin + norm.vmax) / 2
        for (i, j), v in np.ndenumerate(weights):
            if np.isnan(v):  # leave the cell blank
                continue
            # dark cells get white text; infinite cells are not coloured: black text
            colour = "black" if not np.isfinite(v) or v > middle else "white"
            ax.text(
                j, i, f"{v:.{digits}f}", ha="center", va="center", color=colour, fontsize=fontsize
            )
    return image


def print_weights(
    weights, rows: Sequence[str], cols: Sequence[str] | None = None, digits=2, *, max_cols=None
):
    """Print a matrix as the seeds' tab-separated table: a header of column labels, then
    one labelled row per query (seed 000's ``print_attn_weights``).

    Each cell is ``f"{value:.{digits}f}"`` followed by a tab: NaN prints ``nan``, infinities
    ``inf`` and ``-inf``. A matrix with no rows prints the header alone. With ``max_cols``, a
    wider matrix prints as several tables of at most ``max_cols`` columns, each after a line
    ``columns a to b:``, so that it fits a page.

    Args:
        weights: the ``(n, m)`` matrix: a tensor (any real dtype, ``requires_grad``
            allowed), a NumPy array (or anything ``np.asarray`` converts, such as a pandas
            DataFrame) or a nested list of numbers.
        rows: ``n`` row labels (the queries), each a ``str`` or an ``int``; not a single
            string (split a sentence into words first).
        cols: ``m`` column labels, default ``rows``.
        digits: decimals printed, an ``int >= 0``.
        max_cols: at most this many columns per table, an ``int >= 1``, or ``None`` (one
            table).

    Shape:
        ``weights``: ``(n, m)`` with ``n = len(rows)``, ``m = len(cols)``.

    Raises:
        TypeError: if ``weights`` is not a tensor, array or nested list of real numbers, the
            labels are not a list of ``str``/``int``, or ``digits`` or ``max_cols`` is not an
            int (``None`` digits included: a table always shows its values).
        ValueError: if ``weights`` is not 2-D, its shape does not match the labels, a label
            holds a tab or a newline (they would break the table), ``digits < 0`` or
            ``max_cols < 1``. Everything is checked before anything is printed.

    Example:
        >>> w = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
        >>> print_weights(w, ["a", "b"])  # doctest: +NORMALIZE_WHITESPACE
                a	b
        a	0.25	0.75
        b	0.50	0.50
        >>> print_weights(w, ["a", "b"], max_cols=1)  # doctest: +NORMALIZE_WHITESPACE
        columns 0 to 0:
                a
        a	0.25
        b	0.50
        columns 1 to 1:
                b
        a	0.75
        b	0.50
    """
    weights, rows, cols = _as_matrix(weights, rows, cols)
    digits = _check_digits(digits, allow_none=False)
    if max_cols is not None:
        max_cols = check_int(
            "max_cols", max_cols, low=1, what="an int >= 1 (columns per table) or None"
        )
    for name, labels in (("rows", rows), ("cols", cols)):
        for i, label in enumerate(labels):
            if "\t" in label or "\n" in label or "\r" in label:
                raise ValueError(
                    f"{name}[{i}] must not contain a tab or a newline (they separate the "
                    f"table's cells and lines); got {label!r}"
                )
    if max_cols is not None and len(cols) > max_cols:
        for start in range(0, len(cols), max_cols):
            stop = min(start + max_cols, len(cols))
            print(f"columns {start} to {stop - 1}:")
            _print_table(weights[:, start:stop], rows, cols[start:stop], digits)  # (n, <= max)
        return
    _print_table(weights, rows, cols, digits)


def _print_table(weights: np.ndarray, rows: list[str], cols: list[str], digits: int) -> None:
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
        weights: the ``(n, m)`` matrix, as for :func:`print_weights`, with at least one row
            and one column.
        rows: ``n`` row labels, each a ``str`` or an ``int``.
        cols: ``m`` column labels, default ``rows``.
        ax: a matplotlib ``Axes`` to draw into; a new figure if ``None``.
        title: the axes title (none if ``None``).
        digits: decimals written in the cells, an ``int >= 0``, or ``None``: no values. The
            values are written only if the matrix has at most 400 cells (more would not fit).
        cmap: the colour map. xlabel, ylabel: the axis labels (``"key"``, ``"query"``).
        vmin, vmax: the ends of the colour scale, finite numbers with ``vmin < vmax``
            (default: the matrix's smallest and largest finite values; a constant matrix
            gets a scale widened around its value by matplotlib); give several heatmaps the
            same ones to compare their colours.

    Returns:
        The ``Axes``. Cells that are NaN or infinite are not coloured (matplotlib's "bad"
        colour, blank by default); NaN cells stay blank, infinite ones are written ``inf``
        or ``-inf`` (a masked score, for instance).

    Shape:
        ``weights``: ``(n, m)`` with ``n = len(rows)``, ``m = len(cols)``, ``n, m >= 1``.

    Raises:
        TypeError: if ``weights`` is not a tensor, array or nested list of real numbers, the
            labels are not lists of ``str``/``int``, ``ax`` is not an ``Axes``, or
            ``digits``, ``vmin`` or ``vmax`` is not a number.
        ValueError: if ``weights`` is not 2-D or is empty, its shape does not match the
            labels, ``digits < 0``, ``vmin`` or ``vmax`` is not finite, ``vmin >= vmax``,
            or only one is given and the matrix's finite values all lie beyond it.

    Example:
        >>> ax = plot_weights(torch.tensor([[0.9, 0.1], [0.4, 0.6]]), ["ship", "crew"])
        >>> [t.get_text() for t in ax.get_xticklabels()], [t.get_text() for t in ax.texts]
        (['ship', 'crew'], ['0.90', '0.10', '0.40', '0.60'])
    """
    weights, rows, cols = _as_matrix(weights, rows, cols)
    _check_plottable(weights, "one row and one column")
    digits = _check_digits(digits, allow_none=True)
    vmin, vmax = _colour_limits(weights, vmin, vmax)

    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.colors import Normalize

    if ax is not None and not isinstance(ax, Axes):
        raise TypeError(
            f"ax must be a matplotlib Axes (e.g. from plt.subplots()) or None; got "
            f"{type(ax).__name__}"
        )
    if ax is None:
        # at most 7.2 in wide: the book's text column (about 720 px), so a figure is shown at
        # its own size and its numbers stay as large as drawn
        size = (
            min(7.2, max(3.0, 0.55 * len(cols) + 1.5)),
            min(7.2, max(2.5, 0.45 * len(rows) + 1.0)),
        )
        _, ax = plt.subplots(figsize=size, layout="constrained")
    if len(rows) * len(cols) > MAX_CELLS_WITH_VALUES:
        digits = None
    norm = Normalize(vmin, vmax)
    fontsize = 9 if len(cols) <= 12 else 7  # the values: 9 pt while the cells are wide enough
    image = _draw(ax, weights, digits, cmap, norm, fontsize, "auto" if len(cols) > 20 else None)
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def plot_heads(
    weights, rows, cols=None, titles=None, digits=None, ncols=None, *, vmin=None, vmax=None
):
    """One heatmap per head on one shared colour scale, with a single colour bar.

    Every panel uses the same scale, so equal colours mean equal numbers from one head to
    the next (a scale per panel makes noise in a flat head look like structure). The figure
    grows with the number of words, up to a width that stays readable in the page's column
    (~720 px at 1280 px): 10 pt labels, rotated if they do not fit side by side, only every
    k-th shown if there are too many; values written in the cells only if they fit at 8 pt.

    Args:
        weights: ``(H, n, m)`` per-head weights (``average_attn_weights=False`` in PyTorch),
            with at least one head, one row and one column; NaN cells are drawn blank.
        rows, cols: labels, each a ``str`` or an ``int`` (``cols`` defaults to ``rows``).
        titles: exactly ``H`` titles (strings), one per head; default ``"head 0"``, ...
        digits: decimals in the cells, an ``int >= 0``, or ``None`` (the default): no values.
        ncols: heads per row of the grid, an ``int >= 1`` (default ``min(H, 4)``); more
            columns than heads gives a single row of ``H``.
        vmin, vmax: the ends of the shared colour scale (keyword only). Default: 0 and 1
            when every finite value lies in ``[0, 1]`` (attention weights), else the
            smallest and largest finite values over all heads. The colours are viridis's
            (colour-blind safe).

    Returns:
        The matplotlib ``Figure``, at most 8.5 inches wide. Its heatmaps are the axes that
        hold an image; the last axes is the colour bar.

    Shape:
        ``weights``: ``(H, n, m)`` with ``n = len(rows)``, ``m = len(cols)``.

    Raises:
        TypeError: if ``weights`` is not a tensor, array or nested list of real numbers, the
            labels or ``titles`` are not lists of strings (``int`` labels allowed),
            ``ncols`` or ``digits`` is not an int, or ``vmin``/``vmax`` is not a number.
        ValueError: if ``weights`` is not 3-D or is empty, its shape does not match the
            labels, the number of titles is not ``H``, ``ncols < 1``, ``digits < 0``,
            ``vmin`` or ``vmax`` is not finite, or ``vmin >= vmax``.

    Example:
        >>> fig = plot_heads(torch.rand(3, 4, 4), ["a", "b", "c", "d"])
        >>> heatmaps = [ax for ax in fig.axes if ax.images]
        >>> [ax.get_title() for ax in heatmaps]
        ['head 0', 'head 1', 'head 2']
        >>> sorted({ax.images[0].get_clim() for ax in heatmaps})  # one scale for all
        [(0.0, 1.0)]
        >>> len(fig.axes) - len(heatmaps)  # one colour bar
        1
    """
    weights, rows, cols = _as_matrix(weights, rows, cols, ranks=(3,))
    _check_plottable(weights, "one head, one row and one column")
    heads = weights.shape[0]
    digits = _check_digits(digits, allow_none=True)
    if titles is None:
        titles = [f"head {h}" for h in range(heads)]
    else:
        if isinstance(titles, str) or not isinstance(titles, Iterable):
            raise TypeError(
                f"titles must be a list of H={heads} strings, one per head; got "
                f"{type(titles).__name__} {titles!r}"
            )
        titles = list(titles)
        if len(titles) != heads:
            raise ValueError(
                f"titles must have one title per head, H={heads}; got {len(titles)}: {titles!r}"
            )
        for h, title in enumerate(titles):
            if not isinstance(title, str):
                raise TypeError(f"titles[{h}] must be a str; got {type(title).__name__} {title!r}")
    if ncols is None:
        ncols = min(heads, 4)
    else:
        ncols = check_int(
            "ncols", ncols, low=1, what="an int >= 1 (heads per row of the grid) or None"
        )
    finite = weights[np.isfinite(weights)]
    probabilities = finite.size == 0 or (finite.min() >= 0 and finite.max() <= 1)
    vmin, vmax = _colour_limits(weights, vmin, vmax, (0.0, 1.0) if probabilities else None)
    ncols = min(int(ncols), heads)
    nrows = -(-heads // ncols)
    layout = heads_layout(rows, cols, titles, ncols, nrows)
    cell_w, cell_h, xstep, ystep, rotation, titles, size = layout
    if digits is not None and not values_fit(weights, digits, cell_w, cell_h):
        digits = None  # the values would overflow their cells: colours only

    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    norm = Normalize(vmin, vmax)  # one object: every panel and the colour bar share it
    fig, axes = plt.subplots(nrows, ncols, figsize=size, layout="constrained", squeeze=False)
    for ax in axes.flat[heads:]:
        ax.set_visible(False)
    for head, ax in enumerate(axes.flat[:heads]):
        image = _draw(ax, weights[head], digits, "viridis", norm, VALUE_PT)
        ax.set_title(titles[head], fontsize=TICK_PT + 1)
        xs, ys = range(0, len(cols), xstep), range(0, len(rows), ystep)
        ax.set_xticks(xs, [cols[j] for j in xs], fontsize=TICK_PT, rotation=rotation)
        for label in ax.get_xticklabels():  # the end of a rotated label at its tick
            label.set(ha="right" if rotation else "center", rotation_mode="anchor")
            label.set_verticalalignment("center" if rotation == 90 else "top")
        ax.set_yticks(ys, [rows[i] for i in ys], fontsize=TICK_PT)
        ax.tick_params(axis="y", labelleft=head % ncols == 0)  # rows are shared along a row
    bar = fig.colorbar(image, ax=axes.flat[:heads].tolist(), shrink=min(1.0, 0.4 + 0.3 * nrows))
    bar.ax.tick_params(labelsize=TICK_PT)
    fig.supxlabel("key", fontsize=TICK_PT + 1)
    fig.supylabel("query", fontsize=TICK_PT + 1)
    return fig
