"""Sizes of plot_heads' grid of heatmaps: how big each cell is, which labels are shown and
how they are turned, and whether the values fit in the cells, so that the labels stay
readable once the figure is scaled to the page's column.

Measuring text imports matplotlib, inside :func:`heads_layout` (not on import).
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

# Sizes in inches and points. At most 8.5 inches (850 px at the inline backend's 100 dpi)
# wide, the figure is shrunk by at most 0.85 into the ~720 px column of a 1280 px page, so
# 10 pt tick labels stay at least 11.8 px tall.
MAX_WIDTH, MAX_HEIGHT, MAX_CELL, MIN_PANEL_H = 8.5, 11.0, 0.45, 0.8
TICK_PT, VALUE_PT = 10, 8


def heads_layout(rows, cols, titles, ncols, nrows):
    """Cell sizes (inches), label steps and rotation, wrapped titles and figure size of a
    grid of heatmaps whose labels stay readable once scaled to the page's column."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure, font = TextToPath().get_text_width_height_descent, FontProperties(size=TICK_PT)

    def widest(labels):  # inches, measured in the font the labels are drawn in
        return max(measure(s, font, ismath=False)[0] for s in labels) / 72

    charw = 0.6 * TICK_PT / 72  # a DejaVu Sans character is about 0.6 em wide on average
    line = 1.25 * TICK_PT / 72  # the room one label needs across its axis
    left = 0.55 + widest(rows)  # y labels and the "query" label
    gaps = 0.9 + 0.25 * (ncols - 1)  # the colour bar and the space between panels
    cell_w = min(MAX_CELL, (MAX_WIDTH - left - gaps) / (ncols * len(cols)))
    wide = widest(cols)
    # horizontal if the labels fit side by side, else 45 degrees (sqrt(2) lines apart),
    # else 90 degrees; only every xstep-th label if even that is too tight
    rotation = 0 if wide + 0.1 <= cell_w else 45 if 1.42 * line <= cell_w else 90
    xstep = 1 if rotation == 0 else math.ceil((1.42 if rotation == 45 else 1) * line / cell_w)
    below = 0.15 + (line, 0.71 * (wide + line), wide)[rotation // 45]  # the x labels
    width = max(8, int(cell_w * len(cols) / (charw * 1.1)))  # title characters per line
    titles = [textwrap.fill(t, width) for t in titles]
    per_row = below + 0.2 + 1.4 * line * max(t.count("\n") + 1 for t in titles)
    panel_h = min(len(rows) * cell_w, (MAX_HEIGHT - 0.4) / nrows - per_row)
    panel_h = max(panel_h, min(MIN_PANEL_H, 0.5 * len(rows)))
    cell_h = panel_h / len(rows)
    ystep = max(1, math.ceil(line / cell_h))
    size = (left + gaps + ncols * cell_w * len(cols), 0.4 + nrows * (panel_h + per_row))
    return cell_w, cell_h, xstep, ystep, rotation, titles, size


def values_fit(weights: np.ndarray, digits: int, cell_w: float, cell_h: float) -> bool:
    """Whether every value of ``weights`` written with ``digits`` decimals at ``VALUE_PT``
    fits in a cell ``cell_w`` by ``cell_h`` inches (NaN cells stay blank)."""
    finite = weights[np.isfinite(weights)]
    shown = [f"{v:.{digits}f}" for v in finite] + ["-inf"] * bool(np.isinf(weights).any())
    text_w = 0.6 * VALUE_PT / 72 * max(map(len, shown), default=0) + 0.06  # inches
    return text_w <= cell_w and 1.3 * VALUE_PT / 72 <= cell_h
