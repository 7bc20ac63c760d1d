"""Draw the book's five schematic diagrams as SVG files in figures/.

- ``weighted_sum.svg``: the output of one query as a weighted sum of value vectors, the
  weights a softmax of the scores (chapter 3);
- ``qkv_projections.svg``: ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` with their shapes
  (chapter 4);
- ``heads_split_merge.svg``: ``(L, E)`` -> ``view`` ``(L, H, D)`` -> ``transpose``
  ``(H, L, D)`` -> attention per head -> back to ``(L, E)`` -> ``W_O`` (chapter 5);
- ``tiled_attention.svg``: one block of queries against the key blocks, with the running
  maximum ``m``, the running sum ``ℓ`` and the output accumulator ``o`` rescaled whenever
  the maximum grows (chapter 8);
- ``transformer_block.svg``: the causal language model of "A language model on the
  Odyssey": token ids -> ``E_tok[ids] + P`` -> two pre-LayerNorm blocks (attention and MLP,
  each added to the residual stream) -> ``LN_f`` -> the tied ``E_tok^T`` -> logits
  ``(L, V)`` -> softmax, with the shapes where they change.

The notation is the book's (chapters/notation.md). The colours are Okabe and Ito's
colour-blind-safe palette, and every colour is also named by a label. The output is
deterministic: a fixed ``svg.hashsalt``, no date in the metadata, DejaVu Sans (shipped
with matplotlib) drawn as paths, so running the script twice gives byte-identical files
(with the same matplotlib version: ``tests/test_diagrams.py`` checks it).

Usage::

    python scripts/draw_diagrams.py              # writes figures/*.svg
    python scripts/draw_diagrams.py --out /tmp   # somewhere else
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path as MPath

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "figures"

# Okabe & Ito (2008), "Color Universal Design": distinguishable with any colour vision.
BLUE, ORANGE, GREEN, VERMILION, PURPLE, SKY = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
)
GREY, DARK = "#BBBBBB", "#222222"

RC = {
    "svg.hashsalt": "attention-book",  # clip-path and glyph ids stay the same from run to run
    "svg.fonttype": "path",  # text as paths: the same on every reader's machine
    "font.family": "DejaVu Sans",
    "mathtext.fontset": "dejavusans",
    "font.size": 11,
    "axes.unicode_minus": True,
}
WIDTH = 8.0  # inches: drawn 768 px wide, shown at 90% of the ~720-800 px column


def _canvas(height: float):
    """A figure of WIDTH x height inches whose data coordinates are inches, y upwards."""
    fig = Figure(figsize=(WIDTH, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _matrix(ax, x, top, rows, cols, cell, colour, alpha=0.35, label=None, shape=None):
    """A rows x cols matrix of cells, top-left corner at (x, top); its label above and its
    shape below. Returns (left, bottom, right, top)."""
    w, h = cols * cell, rows * cell
    ax.add_patch(Rectangle((x, top - h), w, h, facecolor=colour, alpha=alpha, edgecolor="none"))
    # the cells: white lines, all in one path (NaN breaks it between lines)
    xs, ys = [], []
    for j in range(1, cols):
        xs += [x + j * cell, x + j * cell, math.nan]
        ys += [top - h, top, math.nan]
    for i in range(1, rows):
        xs += [x, x + w, math.nan]
        ys += [top - i * cell, top - i * cell, math.nan]
    ax.plot(xs, ys, color="white", lw=0.6)
    ax.add_patch(Rectangle((x, top - h), w, h, fill=False, edgecolor=DARK, lw=1.0, zorder=3))
    if label:
        ax.text(x + w / 2, top + 0.08, label, ha="center", va="bottom", fontsize=13)
    if shape:
        ax.text(x + w / 2, top - h - 0.08, shape, ha="center", va="top", fontsize=10)
    return x, top - h, x + w, top


def _arrow(ax, start, end, text=None, above=True, colour=DARK, lw=1.3, fontsize=10, rad=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=12,
            color=colour,
            lw=lw,
            shrinkA=2,
            shrinkB=2,
            connectionstyle=f"arc3,rad={rad}",
        )
    )
    if text:
        x, y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        dy = 0.07 if above else -0.07
        ax.text(x, y + dy, text, ha="center", va="bottom" if above else "top", fontsize=fontsize)


def _save(fig, path: Path) -> None:
    fig.savefig(path, format="svg", metadata={"Date": None})


def _note(ax, y: float, text: str) -> None:
    """A grey line of small print, centred across the diagram at height y."""
    ax.text(WIDTH / 2, y, text, ha="center", va="center", fontsize=9, color="#444444")


# ---- 1. the weighted sum ---------------------------------------------------------------


def _vector(ax, x, y, values, cell, cmap):
    """A row vector of cells coloured by value (-1 to 1), centred vertically on y."""
    for k, value in enumerate(values):
        ax.add_patch(
            Rectangle((x + cell * k, y - cell / 2), cell, cell, color=cmap((value + 1) / 2))
        )
    ax.add_patch(
        Rectangle((x, y - cell / 2), cell * len(values), cell, fill=False, edgecolor=DARK, lw=0.8)
    )


def weighted_sum(path: Path) -> None:
    """Query *ship*: scores, softmax, weights, and the output as the weighted sum of the
    value vectors (illustrative numbers)."""
    words = ["go", "my", "ship", "and", "crew"]
    scores = [0.2, 0.9, 2.6, 0.1, 1.6]
    exps = [math.exp(s) for s in scores]
    weights = [e / sum(exps) for e in exps]
    values = [  # d_v = 6
        [0.8, -0.4, 0.1, 0.6, -0.9, 0.3],
        [-0.2, 0.5, 0.7, -0.6, 0.2, -0.1],
        [0.9, 0.6, -0.5, 0.4, 0.8, -0.7],
        [-0.5, -0.8, 0.3, 0.1, -0.3, 0.6],
        [0.7, 0.9, -0.2, 0.5, 0.6, -0.8],
    ]
    output = [sum(a * v[k] for a, v in zip(weights, values)) for k in range(6)]
    cmap = matplotlib.colormaps["PuOr_r"]  # ColorBrewer's purple-orange: colour-blind safe

    fig, ax = _canvas(4.2)
    top, step, cell = 3.3, 0.55, 0.16
    ys = [top - i * step for i in range(len(words))]  # row centres
    vx, sx, ox = 5.2, 6.75, 7.02  # where the values, the sum and the output are
    ax.text(0.95, top + 0.5, "key $j$", ha="right", fontsize=11)
    ax.text(1.15, top + 0.5, "score $s_{ij}$", ha="left", fontsize=11)
    ax.text(3.35, top + 0.5, "weight $a_{ij}$ (sum: 1)", ha="left", fontsize=11)
    ax.text(vx + 3 * cell, top + 0.5, "value $\\mathbf{v}_j$", ha="center", fontsize=11)
    for y, word, s, a, v in zip(ys, words, scores, weights, values):
        bold = "bold" if word == "ship" else "normal"
        ax.text(0.95, y, word, ha="right", va="center", fontsize=12, fontweight=bold)
        ax.add_patch(Rectangle((1.15, y - 0.13), 0.38 * s, 0.26, color=ORANGE))
        ax.text(1.2 + 0.38 * s, y, f"{s:.1f}", va="center", fontsize=10)
        ax.add_patch(Rectangle((3.35, y - 0.13), 1.2 * a, 0.26, color=BLUE))
        ax.text(3.4 + 1.2 * a, y, f"{a:.2f}", va="center", fontsize=10)
        ax.text(4.95, y, "×", ha="center", va="center", fontsize=13)
        _vector(ax, vx, y, v, cell, cmap)
        # a line to the sum, as thick as the weight
        _arrow(ax, (vx + 6 * cell + 0.05, y), (sx - 0.17, ys[2]), colour=BLUE, lw=0.5 + 5 * a)
    # softmax across the rows: a bracket and an arrow
    mid = ys[2]
    ax.plot(
        [2.55, 2.62, 2.62, 2.55],
        [ys[0] + 0.15, ys[0] + 0.15, ys[-1] - 0.15, ys[-1] - 0.15],
        color=DARK,
        lw=1.0,
    )
    _arrow(ax, (2.64, mid), (3.25, mid))
    ax.text(2.95, mid + 0.1, "softmax", ha="center", va="bottom", fontsize=10)
    ax.text(2.95, mid - 0.1, "over $j$", ha="center", va="top", fontsize=10)
    # the sum and the output
    ax.add_patch(Circle((sx, mid), 0.16, facecolor="white", edgecolor=DARK, lw=1.2))
    ax.text(sx, mid, "$\\Sigma$", ha="center", va="center", fontsize=12)
    _arrow(ax, (sx + 0.16, mid), (ox, mid), lw=1.0)
    _vector(ax, ox, mid, output, cell, cmap)
    ax.text(
        ox + 3 * cell, mid + 0.2, "output $\\mathbf{o}_i$", ha="center", va="bottom", fontsize=11
    )
    ax.text(
        WIDTH / 2,
        0.5,
        "$s_{ij} = \\mathbf{q}_i \\cdot \\mathbf{k}_j \\,/\\, \\sqrt{d_k}$,   "
        "$a_{ij} = \\mathrm{softmax}_j(s_{ij})$,   "
        "$\\mathbf{o}_i = \\sum_j\\, a_{ij}\\, \\mathbf{v}_j$",
        ha="center",
        va="center",
        fontsize=12,
    )
    _note(ax, 0.1, "query $i$ = ship; illustrative numbers; value colours: purple < 0 < orange")
    _save(fig, path)


# ---- 2. the Q, K, V projections ------------------------------------------------------


def qkv_projections(path: Path) -> None:
    """X (L, E) times W_Q, W_K, W_V (E, D) gives Q, K, V (L, D)."""
    words = ["we", "process", "and", "ship", "your", "order"]
    L, E, D, cell = len(words), 8, 4, 0.15
    fig, ax = _canvas(4.9)
    ax.text(WIDTH / 2, 4.62, "$(L, E) \\cdot (E, D) \\to (L, D)$", ha="center", fontsize=12)
    # X, once, on the left, vertically centred
    x_top = 2.5 + L * cell / 2 + 0.1
    left, bottom, right, _ = _matrix(ax, 0.95, x_top, L, E, cell, GREY, 0.8, "$X$", "$(L, E)$")
    for i, word in enumerate(words):
        ax.text(0.88, x_top - (i + 0.5) * cell, word, ha="right", va="center", fontsize=9)
    rows = [
        ("Q", "W_Q", BLUE, "queries"),
        ("K", "W_K", VERMILION, "keys"),
        ("V", "W_V", GREEN, "values"),
    ]
    for r, (name, weight, colour, meaning) in enumerate(rows):
        top = 4.45 - r * 1.45  # the row's top edge (W is E cells tall)
        centre = top - E * cell / 2
        _arrow(ax, (right + 0.05, (bottom + x_top) / 2), (3.05, centre), rad=0.0)
        ax.add_patch(Circle((3.2, centre), 0.035, color=DARK))  # the matrix product
        _matrix(ax, 3.45, top, E, D, cell, colour, 0.35, None, None)
        ax.text(3.45 + D * cell + 0.1, top - 0.05, f"${weight}$", ha="left", va="top", fontsize=13)
        ax.text(3.45 + D * cell + 0.1, top - 0.4, "$(E, D)$", ha="left", va="top", fontsize=10)
        ax.text(4.85, centre, "=", ha="center", va="center", fontsize=16)
        q_top = centre + L * cell / 2
        _matrix(ax, 5.2, q_top, L, D, cell, colour, 0.8, None, None)
        ax.text(
            5.2 + D * cell + 0.12,
            centre + 0.12,
            f"${name} = X\\,{weight}$",
            ha="left",
            va="center",
            fontsize=13,
        )
        ax.text(
            5.2 + D * cell + 0.12,
            centre - 0.2,
            f"$(L, D)$: {meaning}",
            ha="left",
            va="center",
            fontsize=10,
        )
    ax.text(
        WIDTH / 2,
        0.12,
        "row $i$ of $Q$, $K$, $V$ belongs to word $i$.  PyTorch stores $W_Q^\\top$: "
        "q_proj.weight has shape $(D, E)$",
        ha="center",
        va="center",
        fontsize=9,
        color="#444444",
    )
    _save(fig, path)


# ---- 3. heads: split and merge -------------------------------------------------------

HEAD_COLOURS = (BLUE, ORANGE, GREEN)


def _heads_row(ax, x, top, L, H, D, cell, gap, alpha):
    """(L, E) drawn as H coloured blocks of D columns with ``gap`` between them."""
    for h in range(H):
        _matrix(ax, x + h * (D * cell + gap), top, L, D, cell, HEAD_COLOURS[h], alpha)
    return x + H * D * cell + (H - 1) * gap


def _heads_stack(ax, x, top, L, H, D, cell, alpha, names=True):
    """(H, L, D): the H blocks one under the other."""
    tops = []
    for h in range(H):
        t = top - h * (L * cell + 0.12)
        _matrix(ax, x, t, L, D, cell, HEAD_COLOURS[h], alpha)
        if names:
            ax.text(x - 0.06, t - L * cell / 2, f"$h={h}$", ha="right", va="center", fontsize=9)
        tops.append(t)
    return tops


def heads_split_merge(path: Path) -> None:
    """Q (L, E) -> view (L, H, D) -> transpose (H, L, D) -> attention per head -> transpose
    back and reshape (L, E), the heads concatenated -> W_O."""
    L, H, D, cell = 4, 3, 3, 0.13
    E, w = H * D, H * D * cell  # w: the width of an (L, E) matrix
    fig, ax = _canvas(5.25)
    shape = {"ha": "center", "va": "top", "fontsize": 10}
    # row 1: split
    top = 4.4
    y = top - L * cell / 2
    _heads_row(ax, 0.25, top, L, H, D, cell, 0.0, 0.35)
    ax.text(0.25 + w / 2, top + 0.08, "$Q$", ha="center", va="bottom", fontsize=13)
    ax.text(0.25 + w / 2, top - L * cell - 0.08, "$(L, E)$", **shape)
    _arrow(ax, (1.5, y), (2.32, y), "view(L, H, D)")
    right = _heads_row(ax, 2.4, top, L, H, D, cell, 0.08, 0.35)
    ax.text((2.4 + right) / 2, top - L * cell - 0.08, "$(L, H, D)$", **shape)
    _arrow(ax, (right + 0.08, y), (4.9, y), "transpose(0, 1)")
    stack_x, out_x = 5.0, 6.98
    tops = _heads_stack(ax, stack_x, top + L * cell + 0.12, L, H, D, cell, 0.35, names=False)
    stack_bottom = tops[-1] - L * cell
    ax.text(stack_x + D * cell / 2, stack_bottom - 0.08, "$(H, L, D)$", **shape)
    # attention, head by head
    box_x, box_w = stack_x + D * cell + 0.22, 1.2
    for h, t in enumerate(tops):
        yh = t - L * cell / 2
        _arrow(ax, (stack_x + D * cell + 0.04, yh), (box_x, yh), colour=HEAD_COLOURS[h])
        _arrow(ax, (box_x + box_w, yh), (out_x - 0.04, yh), colour=HEAD_COLOURS[h])
        ax.text(out_x + D * cell + 0.07, yh, f"head {h}", va="center", fontsize=9)
    ax.add_patch(
        FancyBboxPatch(
            (box_x, stack_bottom),
            box_w,
            tops[0] - stack_bottom,
            boxstyle="round,pad=0.03",
            facecolor="white",
            edgecolor=DARK,
            lw=1.0,
        )
    )
    cx, cy = box_x + box_w / 2, (tops[0] + stack_bottom) / 2
    ax.text(cx, cy + 0.3, "attention", ha="center", va="center", fontsize=11)
    ax.text(cx, cy + 0.03, "in each head $h$:", ha="center", va="center", fontsize=9)
    ax.text(
        cx, cy - 0.22, "softmax$(Q_h K_h^\\top\\!/\\sqrt{D})$", ha="center", fontsize=9, va="center"
    )
    ax.text(cx, cy - 0.45, "$\\cdot\\, V_h$", ha="center", va="center", fontsize=9)
    _heads_stack(ax, out_x, tops[0], L, H, D, cell, 0.85, names=False)
    ax.text(out_x + D * cell / 2, stack_bottom - 0.08, "$(H, L, D)$", **shape)
    # row 2: merge, from right to left, under the head outputs
    top2 = 1.4
    y2 = top2 - L * cell / 2
    x2 = out_x + D * cell / 2 - (w + 0.16) / 2
    _arrow(ax, (out_x + D * cell / 2, stack_bottom - 0.35), (out_x + D * cell / 2, top2 + 0.08))
    ax.text(
        out_x + D * cell / 2 - 0.1,
        (stack_bottom + top2) / 2 - 0.1,
        "transpose(0, 1)",
        ha="right",
        va="center",
        fontsize=10,
    )
    right2 = _heads_row(ax, x2, top2, L, H, D, cell, 0.08, 0.85)
    ax.text((x2 + right2) / 2, top2 - L * cell - 0.08, "$(L, H, D)$", **shape)
    _arrow(ax, (x2 - 0.08, y2), (4.95, y2), "reshape(L, E)")
    _heads_row(ax, 3.75, top2, L, H, D, cell, 0.0, 0.85)
    ax.text(3.75 + w / 2, top2 + 0.08, "Concat", ha="center", va="bottom", fontsize=11)
    ax.text(3.75 + w / 2, top2 - L * cell - 0.08, "$(L, E)$", **shape)
    _arrow(ax, (3.67, y2), (1.5, y2), "$\\cdot\\, W_O$   $(E, E)$")
    _matrix(ax, 0.25, top2, L, E, cell, PURPLE, 0.8)
    ax.text(0.25 + w / 2, top2 + 0.08, "output", ha="center", va="bottom", fontsize=11)
    ax.text(0.25 + w / 2, top2 - L * cell - 0.08, "$(L, E)$", **shape)
    ax.text(
        WIDTH / 2,
        0.3,
        "$K$ and $V$ are split in the same way.  Head $h$ owns columns $hD, \\dots, (h+1)D-1$; "
        "$W_O$ mixes all of them.",
        ha="center",
        va="center",
        fontsize=9,
        color="#444444",
    )
    _note(ax, 0.08, "With a batch: view(N, L, H, D).transpose(1, 2) gives $(N, H, L, D)$.")
    _save(fig, path)


# ---- 4. tiled attention ---------------------------------------------------------------


def tiled_attention(path: Path) -> None:
    """One block of queries against the blocks of keys: only one tile of scores exists at a
    time; m, ℓ and o are updated and rescaled block by block."""
    nq, nk, tile = 4, 5, 0.42  # query blocks, key blocks, tile size (inches)
    qi, current = 1, 2  # the query block shown, the key block being processed
    fig, ax = _canvas(4.45)
    gx, gtop = 0.85, 3.55  # the (L, S) grid
    # K blocks above, V blocks below, Q blocks on the left
    for b in range(nk):
        x = gx + b * tile
        _matrix(
            ax, x + 0.03, gtop + 0.42, 1, 1, tile - 0.06, VERMILION, 0.35 if b != current else 0.85
        )
        ax.text(x + tile / 2, gtop + 0.47, f"$K_{b + 1}$", ha="center", va="bottom", fontsize=10)
        _matrix(
            ax,
            x + 0.03,
            gtop - nq * tile - 0.1,
            1,
            1,
            tile - 0.06,
            GREEN,
            0.35 if b != current else 0.85,
        )
        ax.text(
            x + tile / 2,
            gtop - nq * tile - 0.57,
            f"$V_{b + 1}$",
            ha="center",
            va="top",
            fontsize=10,
        )
    for q in range(nq):
        y = gtop - q * tile
        _matrix(ax, gx - 0.45, y - 0.03, 1, 1, tile - 0.06, BLUE, 0.85 if q == qi else 0.2)
        ax.text(gx - 0.5, y - tile / 2, f"$Q_{q + 1}$", ha="right", va="center", fontsize=10)
    for q in range(nq):
        for b in range(nk):
            x, y = gx + b * tile, gtop - (q + 1) * tile
            if q == qi and b < current:
                face, hatch = SKY, "///"
            elif q == qi and b == current:
                face, hatch = ORANGE, None
            else:
                face, hatch = "white", None
            ax.add_patch(
                Rectangle(
                    (x, y),
                    tile,
                    tile,
                    facecolor=face,
                    edgecolor=GREY,
                    lw=0.8,
                    hatch=hatch,
                    alpha=0.9 if face != "white" else 1.0,
                )
            )
    ax.add_patch(
        Rectangle((gx, gtop - nq * tile), nk * tile, nq * tile, fill=False, edgecolor=DARK, lw=1.0)
    )
    ax.add_patch(
        Rectangle((gx, gtop - (qi + 1) * tile), nk * tile, tile, fill=False, edgecolor=BLUE, lw=2.0)
    )
    # the direction of the loop
    ay = gtop - (qi + 1) * tile - 0.12
    _arrow(ax, (gx + 0.05, ay), (gx + nk * tile - 0.05, ay), colour=BLUE)
    ax.text(
        gx + nk * tile / 2,
        ay - 0.05,
        "$b = 1, 2, \\dots$",
        ha="center",
        va="top",
        fontsize=9,
        color=BLUE,
    )
    ax.text(
        gx + nk * tile / 2,
        0.78,
        "scores $(L, S)$: never stored",
        ha="center",
        va="top",
        fontsize=10,
    )
    ax.text(
        gx + nk * tile / 2, 0.5, "one $(B_q, B)$ tile at a time", ha="center", va="top", fontsize=10
    )
    # legend of the tiles
    lx, ly = 3.45, 4.15
    for k, (face, hatch, text) in enumerate(
        [
            (SKY, "///", "done: folded into $m$, $\\ell$, $\\mathbf{o}$"),
            (ORANGE, None, "block $b$: scores $s_j = \\mathbf{q}\\cdot\\mathbf{k}_j/\\sqrt{d_k}$"),
        ]
    ):
        ax.add_patch(
            Rectangle(
                (lx, ly - 0.32 * k - 0.1),
                0.2,
                0.2,
                facecolor=face,
                hatch=hatch,
                edgecolor=GREY,
                alpha=0.9,
            )
        )
        ax.text(lx + 0.3, ly - 0.32 * k, text, va="center", fontsize=10)
    # the state of each query row, and its update
    ex, ey = 3.45, 3.4
    ax.text(ex, ey, "kept for each query of the block:", fontsize=10, va="center")
    state = [
        ("$m$", "running maximum", "$-\\infty$"),
        ("$\\ell$", "running sum", "$0$"),
        ("$\\mathbf{o}$", "output accumulator $(d_v)$", "$\\mathbf{0}$"),
    ]
    for k, (sym, what, start) in enumerate(state):
        y = ey - 0.32 * (k + 1)
        ax.text(ex + 0.15, y, sym, fontsize=12, va="center")
        ax.text(ex + 0.5, y, f"{what}, starts at {start}", fontsize=10, va="center")
    lines = [
        "$m' = \\max(m,\\ \\mathrm{max}_j\\, s_j)$",
        "$\\ell \\leftarrow e^{m - m'}\\,\\ell + \\Sigma_j\\, e^{s_j - m'}$",
        "$\\mathbf{o} \\leftarrow e^{m - m'}\\,\\mathbf{o}"
        " + \\Sigma_j\\, e^{s_j - m'}\\,\\mathbf{v}_j$",
        "$m \\leftarrow m'$",
    ]
    ax.text(ex, 2.15, "for each key block $b$ ($j$ in block $b$):", fontsize=10, va="center")
    for k, line in enumerate(lines):
        ax.text(ex + 0.15, 1.85 - 0.32 * k, line, fontsize=12, va="center")
    ax.text(
        ex + 0.15,
        0.52,
        "rescaling: $e^{m - m'} \\leq 1$ shrinks what was summed\nunder the old, smaller maximum",
        fontsize=9,
        color=VERMILION,
        va="center",
    )
    ax.text(
        ex,
        0.18,
        "after the last block: output $= \\mathbf{o}\\, /\\, \\ell$",
        fontsize=11,
        va="center",
    )
    _save(fig, path)


# ---- 5. the transformer block of the language model ----------------------------------


def _box(ax, cx, cy, w, h, text, colour, alpha=0.35, fontsize=10):
    """A rounded box centred on (cx, cy), filled with a light ``colour``, its text in the
    middle. Returns (left, bottom, right, top)."""
    ax.add_patch(
        FancyBboxPatch(
            (cx - w / 2, cy - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.06",
            facecolor=to_rgba(colour, alpha),
            edgecolor=DARK,
            lw=1.0,
        )
    )
    ax.text(cx, cy, text, ha="center", va="center", fontsize=fontsize, linespacing=1.5)
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _plus(ax, cx, cy, r=0.13):
    """The ⊕ of a sum: a circle with a cross (drawn, not a glyph)."""
    ax.add_patch(Circle((cx, cy), r, facecolor="white", edgecolor=DARK, lw=1.2, zorder=3))
    d = 0.6 * r
    ax.plot(
        [cx - d, cx + d, math.nan, cx, cx],
        [cy, cy, math.nan, cy - d, cy + d],
        color=DARK,
        lw=1.2,
        zorder=4,
    )


def _bypass(ax, x, y_from, y_to, x_side, r=0.13):
    """A residual connection: from the stream at (x, y_from), out to x_side, up, and into
    the ⊕ (radius r) at (x, y_to)."""
    ax.add_patch(Circle((x, y_from), 0.04, color=DARK, zorder=3))
    verts = [(x, y_from), (x_side, y_from), (x_side, y_to), (x - r, y_to)]
    ax.add_patch(
        FancyArrowPatch(
            path=MPath(verts, [MPath.MOVETO] + [MPath.LINETO] * 3),
            arrowstyle="-|>",
            mutation_scale=12,
            color=DARK,
            lw=1.8,
            joinstyle="miter",
        )
    )
    ax.text(
        x_side - 0.1,
        (y_from + y_to) / 2,
        "residual",
        rotation=90,
        ha="center",
        va="center",
        fontsize=9,
    )


def transformer_block(path: Path) -> None:
    """The causal language model: embedding + positions, a pre-LayerNorm block (drawn once,
    applied twice), the final LayerNorm, the tied output matrix and the softmax."""
    fig, ax = _canvas(6.0)
    sx, r = 3.2, 0.13  # the residual stream goes up at x = sx
    shape = {"ha": "left", "va": "center", "fontsize": 10}
    # the input, left to right along the bottom, into the stream
    y0 = 0.72
    _box(ax, 0.55, y0, 0.8, 0.32, "token ids", "white", 1.0)
    ax.text(0.55, y0 - 0.22, "$(L,)$", ha="center", va="top", fontsize=10)
    _arrow(ax, (0.95, y0), (1.2, y0))
    _box(ax, 1.95, y0, 1.5, 0.46, "token embedding\n$E_{\\mathrm{tok}}[\\mathrm{ids}]$", GREEN)
    ax.text(1.95, y0 - 0.29, "$(L, E)$", ha="center", va="top", fontsize=10)
    _arrow(ax, (2.7, y0), (sx - r, y0))
    _plus(ax, sx, y0, r)
    _box(ax, 4.35, y0, 1.2, 0.32, "positions $P$", PURPLE)
    ax.text(4.35, y0 - 0.22, "$(L, E)$", ha="center", va="top", fontsize=10)
    _arrow(ax, (3.75, y0), (sx + r, y0))
    # the block: LN_1, attention, +; LN_2, MLP, +
    f_left, f_right, f_bottom, f_top = 1.05, 5.0, 1.1, 5.2
    ax.add_patch(
        FancyBboxPatch(
            (f_left, f_bottom),
            f_right - f_left,
            f_top - f_bottom,
            boxstyle="round,pad=0,rounding_size=0.1",
            facecolor="#F4F4F4",
            edgecolor="#888888",
            lw=1.0,
            zorder=0,
        )
    )
    ax.text(
        f_right - 0.1,
        f_top - 0.1,
        "block × 2",
        ha="right",
        va="top",
        fontsize=11,
        fontweight="bold",
    )
    ln1, attn, plus1, ln2, mlp, plus2 = 1.72, 2.38, 3.0, 3.72, 4.38, 5.0
    branch1, branch2 = 1.32, 3.32
    _arrow(ax, (sx, y0 + r), (sx, ln1 - 0.15))
    ax.text(sx + 0.1, branch1, "$(L, E)$", **shape)
    parts = [
        (
            ln1,
            "1",
            attn,
            "multi-head attention (causal)\n$H$ heads; position $i$ sees $j \\leq i$",
            BLUE,
            plus1,
            branch1,
        ),
        (
            ln2,
            "2",
            mlp,
            "MLP: Linear $(E \\to 4E)$, GELU,\nLinear $(4E \\to E)$",
            ORANGE,
            plus2,
            branch2,
        ),
    ]
    for k, (ln, n, y, text, colour, plus, branch) in enumerate(parts):
        if k:  # from the first sum up to the second LayerNorm
            _arrow(ax, (sx, plus1 + r), (sx, ln - 0.15))
        _box(ax, sx, ln, 1.0, 0.3, f"$\\mathrm{{LN}}_{n}$", GREY, 0.6)
        _arrow(ax, (sx, ln + 0.15), (sx, y - 0.23))
        _box(ax, sx, y, 2.9, 0.46, text, colour, fontsize=9.5)
        _arrow(ax, (sx, y + 0.23), (sx, plus - r))
        _plus(ax, sx, plus, r)
        _bypass(ax, sx, branch, plus, 1.45, r)
    # what each part adds, and the shape inside the MLP
    ax.text(f_right + 0.15, ln1, "LN: LayerNorm, before each part", **shape)
    ax.text(f_right + 0.15, plus1, "$x + \\mathrm{attention}(\\mathrm{LN}_1(x))$", **shape)
    ax.text(f_right + 0.15, mlp, "inside: $(L, E) \\to (L, 4E) \\to (L, E)$", **shape)
    ax.text(f_right + 0.15, plus2, "$x + \\mathrm{MLP}(\\mathrm{LN}_2(x))$", **shape)
    # out of the block: LN_f, the tied output matrix, the softmax, left to right at the top
    y1 = 5.64
    _arrow(ax, (sx, plus2 + r), (sx, y1 - 0.15))
    ax.text(sx + 0.1, (f_top + y1 - 0.15) / 2, "$(L, E)$", **shape)
    _box(ax, sx, y1, 0.9, 0.3, "$\\mathrm{LN}_f$", GREY, 0.6)
    _arrow(ax, (sx + 0.45, y1), (4.0, y1))
    _box(
        ax,
        4.75,
        y1,
        1.5,
        0.46,
        "$\\times\\, E_{\\mathrm{tok}}^{\\top}$ (tied)\n$(L, E) \\to (L, V)$",
        GREEN,
        fontsize=9.5,
    )
    _arrow(ax, (5.5, y1), (6.35, y1), "logits")
    ax.text(5.925, y1 - 0.07, "$(L, V)$", ha="center", va="top", fontsize=10)
    _box(ax, 7.1, y1, 1.5, 0.46, "softmax\n$p$(next token)", "white", 1.0)
    _note(
        ax,
        0.12,
        "attention mixes positions; the MLP works on each position alone; "
        "each adds its result to the stream",
    )
    _save(fig, path)


DIAGRAMS = {
    "weighted_sum.svg": weighted_sum,
    "qkv_projections.svg": qkv_projections,
    "heads_split_merge.svg": heads_split_merge,
    "tiled_attention.svg": tiled_attention,
    "transformer_block.svg": transformer_block,
}


def main(out: Path = DEFAULT_OUT) -> list[Path]:
    """Write every diagram into ``out`` (created if missing); return the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with matplotlib.rc_context():  # whatever the caller's style, restored on the way out
        matplotlib.rcdefaults()  # ignore any matplotlibrc: the files must not depend on it
        matplotlib.rcParams.update(RC)
        for name, draw in DIAGRAMS.items():
            draw(out / name)
            written.append(out / name)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder (default figures/)")
    for p in main(parser.parse_args().out):
        print(f"{p}  {p.stat().st_size / 1024:.1f} KB")
