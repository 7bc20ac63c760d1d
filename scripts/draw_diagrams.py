"""Draw the book's schematic diagrams as SVG files in figures/.

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
  ``(L, V)`` -> softmax, with the shapes where they change;
- ``dot_product.svg``: two vectors, the angle between them and the projection of one on the
  other; the cosine as the dot product of the directions, in the cases 1, 0 and -1 (chapter 2);
- ``softmax.svg``: scores -> minus their maximum -> exponentials -> divided by their sum, the
  weights (chapter 3);
- ``masks.svg``: the causal mask ``(L, S)``, a padding mask ``(N, S)`` broadcast over the
  queries, and the two combined, ``(N, H, L, S)`` (chapter 3);
- ``training_loop.svg``: batch -> forward -> loss -> backward -> optimiser step -> the weights
  (chapter "Training attention");
- ``positions.svg``: the sinusoidal encoding as clocks turning at ``omega_i``, and RoPE's
  rotations of a query and a key, whose angle depends on the distance only ("Positions");
- ``next_token.svg``: inputs and targets shifted by one; position t reads tokens 0..t and
  predicts token t + 1 ("A language model on the Odyssey");
- ``kv_cache.svg``: three decoding steps, the cache growing by one key and one value, one row
  of scores per step ("Attention at inference");
- ``induction_circuit.svg``: ``[A][B] ... [A] -> [B]``: the previous-token head, the induction
  head's QK circuit by K-composition and its OV circuit copying B ("What a head computes").

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


# ---- 6. the dot product and the cosine ------------------------------------------------


def _vec(ax, origin, angle_deg, length, colour, label, lw=2.2, fontsize=12, offset=0.18):
    """An arrow from origin at angle_deg (degrees), with its label beyond the tip."""
    a = math.radians(angle_deg)
    tip = (origin[0] + length * math.cos(a), origin[1] + length * math.sin(a))
    _arrow(ax, origin, tip, colour=colour, lw=lw)
    ax.text(
        tip[0] + offset * math.cos(a),
        tip[1] + offset * math.sin(a),
        label,
        ha="center",
        va="center",
        fontsize=fontsize,
        color=colour,
    )
    return tip


def dot_product(path: Path) -> None:
    """Two vectors, the angle between them, the projection of one on the other; the cosine
    as the dot product of the two directions; three cases: 1, 0, -1."""
    fig, ax = _canvas(3.9)
    o, au, av, lu, lv = (0.45, 0.95), 12.0, 52.0, 3.0, 2.1
    _vec(ax, o, au, lu, BLUE, "$\\mathbf{u}$")
    tip_v = _vec(ax, o, av, lv, VERMILION, "$\\mathbf{v}$")
    # the angle
    arc = [math.radians(au + k * (av - au) / 20) for k in range(21)]
    ax.plot(
        [o[0] + 0.55 * math.cos(a) for a in arc],
        [o[1] + 0.55 * math.sin(a) for a in arc],
        color=DARK,
        lw=1.0,
    )
    mid = math.radians((au + av) / 2)
    ax.text(
        o[0] + 0.72 * math.cos(mid),
        o[1] + 0.72 * math.sin(mid),
        "$\\theta$",
        ha="center",
        va="center",
        fontsize=12,
    )
    # the projection of v on the direction of u
    cu, su = math.cos(math.radians(au)), math.sin(math.radians(au))
    length = lv * math.cos(math.radians(av - au))
    foot = (o[0] + length * cu, o[1] + length * su)
    ax.plot([tip_v[0], foot[0]], [tip_v[1], foot[1]], color=DARK, lw=1.0, ls=(0, (3, 3)))
    ax.plot(
        [o[0] + 0.1 * su, foot[0] + 0.1 * su],
        [o[1] - 0.1 * cu, foot[1] - 0.1 * cu],
        color=ORANGE,
        lw=4,
        solid_capstyle="butt",
    )
    ax.text(
        (o[0] + foot[0]) / 2 + 0.1,
        (o[1] + foot[1]) / 2 - 0.38,
        "$\\Vert\\mathbf{v}\\Vert \\cos\\theta$",
        ha="center",
        va="center",
        fontsize=11,
        color=DARK,
    )
    ax.text(
        0.25,
        3.55,
        "$\\mathbf{u} \\cdot \\mathbf{v} = \\sum_k u_k v_k "
        "= \\Vert\\mathbf{u}\\Vert\\, \\Vert\\mathbf{v}\\Vert \\cos\\theta$",
        ha="left",
        va="center",
        fontsize=12,
    )
    ax.text(
        0.25,
        3.15,
        "$\\cos(\\mathbf{u}, \\mathbf{v}) = \\mathbf{u} \\cdot \\mathbf{v}\\, /\\, "
        "(\\Vert\\mathbf{u}\\Vert\\, \\Vert\\mathbf{v}\\Vert)$",
        ha="left",
        va="center",
        fontsize=12,
    )
    # three cases
    ax.plot([4.35, 4.35], [0.35, 3.65], color=GREY, lw=1.0)
    cases = [
        (5.0, 0, "$\\cos = 1$", "same direction"),
        (6.2, 90, "$\\cos = 0$", "perpendicular"),
        (7.35, 180, "$\\cos = -1$", "opposite"),
    ]
    for x, angle, value, words in cases:
        origin = (x - 0.3 if angle < 180 else x, 1.9)
        _vec(ax, origin, 0, 0.6, BLUE, "", lw=2.0)
        _vec(ax, origin, angle, 0.42 if angle == 0 else 0.6, VERMILION, "", lw=2.0)
        ax.text(x, 1.35, value, ha="center", va="center", fontsize=12)
        ax.text(x, 1.05, words, ha="center", va="center", fontsize=10)
    ax.text(6.2, 3.3, "the cosine sees only the directions:", ha="center", va="center", fontsize=10)
    ax.text(
        6.2,
        3.0,
        "it is the dot product of the two unit vectors",
        ha="center",
        va="center",
        fontsize=10,
    )
    _note(
        ax,
        0.2,
        "attention scores are dot products: they grow with the lengths too, the cosine does not",
    )
    _save(fig, path)


# ---- 7. the softmax -------------------------------------------------------------------


def _bars(ax, x0, base, values, scale, colour, width=0.2, gap=0.06, digits=2, title=None):
    """A small bar chart: one bar per value from the baseline at height ``base``, the value
    printed beyond the bar's end. Returns the x of the right edge."""
    ax.plot([x0 - 0.05, x0 + len(values) * (width + gap)], [base, base], color=DARK, lw=0.8)
    for k, value in enumerate(values):
        x = x0 + k * (width + gap)
        ax.add_patch(Rectangle((x, base), width, value * scale, color=colour, lw=0))
        y = base + value * scale + (0.05 if value >= 0 else -0.05)
        ax.text(
            x + width / 2,
            y,
            f"{value:.{digits}f}",
            ha="center",
            va="bottom" if value >= 0 else "top",
            fontsize=7.5,
        )
    right = x0 + len(values) * (width + gap) - gap
    if title:
        ax.text((x0 + right) / 2, 3.45, title, ha="center", va="center", fontsize=10.5)
    return right


def softmax_steps(path: Path) -> None:
    """Scores -> subtract the maximum -> exponentials -> divided by their sum: weights that
    are positive and sum to 1, the largest score getting the largest weight."""
    scores = [2.0, 1.0, 0.2, -1.0, 0.6]
    m = max(scores)
    shifted = [s - m for s in scores]
    exps = [math.exp(s) for s in shifted]
    total = sum(exps)
    weights = [e / total for e in exps]
    fig, ax = _canvas(3.9)
    base = 1.75
    panels = [
        (0.25, scores, 0.35, ORANGE, "scores $s_j$", 1),
        (2.25, shifted, 0.35, ORANGE, "$s_j - m$  ($m = \\max_j s_j$)", 1),
        (4.25, exps, 1.1, SKY, "$e^{s_j - m}$", 2),
        (6.25, weights, 1.8, BLUE, "weights $a_j$", 2),
    ]
    rights = []
    for x0, values, scale, colour, title, digits in panels:
        rights.append(_bars(ax, x0, base, values, scale, colour, digits=digits, title=title))
    for k, text in enumerate(["$-\\,m$", "exp", f"$\\div\\ \\Sigma = {total:.2f}$"]):
        _arrow(ax, (rights[k] + 0.08, 2.95), (panels[k + 1][0] - 0.1, 2.95), text, fontsize=10)
    notes = ["any real numbers", "all $\\leq 0$: no overflow", "between 0 and 1", "positive, sum 1"]
    for (x0, *_), right, text in zip(panels, rights, notes):
        ax.text((x0 + right) / 2, 0.4, text, ha="center", va="center", fontsize=9, color="#444444")
    _note(ax, 0.08, "five keys $j = 0, \\dots, 4$; the largest score gets the largest weight")
    _save(fig, path)


# ---- 8. masks and broadcasting --------------------------------------------------------


def _grid(ax, x, top, rows, cols, cell, on, colour, labels=True):
    """A boolean grid: cells where on(i, j) is True filled with ``colour``, the others white
    with a small cross. Returns (right, bottom)."""
    for i in range(rows):
        for j in range(cols):
            left, bottom = x + j * cell, top - (i + 1) * cell
            yes = on(i, j)
            ax.add_patch(
                Rectangle(
                    (left, bottom),
                    cell,
                    cell,
                    facecolor=to_rgba(colour, 0.75) if yes else "white",
                    edgecolor=GREY,
                    lw=0.8,
                )
            )
            if not yes:
                d = cell * 0.22
                cx, cy = left + cell / 2, bottom + cell / 2
                ax.plot(
                    [cx - d, cx + d, math.nan, cx - d, cx + d],
                    [cy - d, cy + d, math.nan, cy + d, cy - d],
                    color="#999999",
                    lw=0.8,
                )
    ax.add_patch(
        Rectangle(
            (x, top - rows * cell), cols * cell, rows * cell, fill=False, edgecolor=DARK, lw=1.0
        )
    )
    if labels:
        ax.text(x + cols * cell / 2, top + 0.06, "key $j$", ha="center", va="bottom", fontsize=9)
        ax.text(
            x - 0.08,
            top - rows * cell / 2,
            "query $i$",
            ha="right",
            va="center",
            fontsize=9,
            rotation=90,
        )
    return x + cols * cell, top - rows * cell


def masks(path: Path) -> None:
    """The causal mask (L, S), a padding mask (N, S) broadcast over the queries, and the two
    combined; True = may attend; a blocked score becomes -inf and its weight 0."""
    L, cell, top = 5, 0.34, 3.2
    fig, ax = _canvas(4.3)
    shape = {"ha": "center", "va": "top", "fontsize": 10}
    # causal
    x1 = 0.55
    right, bottom = _grid(ax, x1, top, L, L, cell, lambda i, j: j <= i, BLUE)
    ax.text(
        (x1 + right) / 2,
        top + 0.4,
        "causal: $M_{ij} = [\\,j \\leq i\\,]$",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.text((x1 + right) / 2, bottom - 0.08, "$(L, S)$", **shape)
    ax.text(right + 0.35, top - L * cell / 2, "and", ha="center", va="center", fontsize=11)
    # padding: the last two keys of this sequence are padding
    x2 = right + 0.75
    pad_right, pad_bottom = _grid(ax, x2, top, 1, L, cell, lambda i, j: j < 3, GREEN, False)
    ax.text(
        (x2 + pad_right) / 2,
        top + 0.4,
        "padding: keys 3, 4 are padding",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.text((x2 + pad_right) / 2, pad_bottom - 0.08, "$(N, S)$ $\\to$ view $(N, 1, 1, S)$", **shape)
    _arrow(
        ax,
        ((x2 + pad_right) / 2, pad_bottom - 0.4),
        ((x2 + pad_right) / 2, bottom + 0.35),
        colour=GREEN,
    )
    ax.text(
        (x2 + pad_right) / 2 + 0.1,
        (pad_bottom + bottom) / 2 - 0.05,
        "broadcast:\nthe same row\nfor every query",
        ha="left",
        va="center",
        fontsize=9,
    )
    ax.text(pad_right + 0.3, top - L * cell / 2, "=", ha="center", va="center", fontsize=16)
    # both
    x3 = pad_right + 0.75
    r3, b3 = _grid(ax, x3, top, L, L, cell, lambda i, j: j <= i and j < 3, PURPLE)
    ax.text(
        (x3 + r3) / 2,
        top + 0.4,
        "both: $M_{ij}$ and not padding",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.text((x3 + r3) / 2, b3 - 0.08, "$(N, H, L, S)$ after broadcasting", **shape)
    # legend
    ax.add_patch(Rectangle((0.55, 0.55), 0.2, 0.2, facecolor=to_rgba(BLUE, 0.75), edgecolor=GREY))
    ax.text(0.85, 0.65, "True: may attend", va="center", fontsize=10)
    ax.add_patch(Rectangle((2.6, 0.55), 0.2, 0.2, facecolor="white", edgecolor=GREY))
    ax.text(
        2.9, 0.65, "False: the score becomes $-\\infty$, the weight 0", va="center", fontsize=10
    )
    _note(
        ax,
        0.2,
        "shapes broadcast from the right: $(L, S)$ and $(N, 1, 1, S)$ both fit $(N, H, L, S)$",
    )
    _save(fig, path)


# ---- 9. the training loop -------------------------------------------------------------


def training_loop(path: Path) -> None:
    """Forward, loss, backward, step, around the weights: the loop every chapter trains with."""
    fig, ax = _canvas(4.2)
    boxes = {
        "batch": (1.25, 3.3, "a batch\ninputs $X$, targets $y$", "white"),
        "forward": (4.0, 3.3, "forward\n$\\hat{y} = \\mathrm{model}(X)$", BLUE),
        "loss": (6.75, 3.3, "loss\ncross-entropy$(\\hat{y}, y)$", VERMILION),
        "backward": (
            6.75,
            1.15,
            "backward\nloss.backward(): $\\partial\\,\\mathrm{loss} / \\partial W$",
            ORANGE,
        ),
        "step": (4.0, 1.15, "step\noptimiser.step(): update $W$", GREEN),
    }
    for cx, cy, text, colour in boxes.values():
        _box(
            ax,
            cx,
            cy,
            2.2 if colour != "white" else 1.9,
            0.75,
            text,
            colour,
            1.0 if colour == "white" else 0.35,
            fontsize=10,
        )
    _arrow(ax, (2.2, 3.3), (2.9, 3.3))
    _arrow(ax, (5.1, 3.3), (5.65, 3.3))
    _arrow(ax, (6.75, 2.92), (6.75, 1.53))
    ax.text(6.85, 2.22, "gradients", ha="left", va="center", fontsize=9)
    _arrow(ax, (5.65, 1.15), (5.1, 1.15))
    # the weights, used by the forward pass and changed by the step
    _box(ax, 1.25, 1.15, 1.9, 0.75, "weights $W$\n$W_Q$, $W_K$, $W_V$, ...", GREY, 0.6)
    _arrow(ax, (2.9, 1.15), (2.2, 1.15), "update", fontsize=9)
    _arrow(ax, (1.25, 1.53), (3.4, 2.92), "used by", fontsize=9, rad=-0.15)
    ax.text(
        4.0,
        2.25,
        "repeat with the next batch",
        ha="center",
        va="center",
        fontsize=10,
        color="#444444",
    )
    _note(
        ax,
        0.2,
        "gradient descent: $W \\leftarrow W - \\eta\\, g$, $\\eta$ the learning rate "
        "(Adam rescales $g$); optimiser.zero_grad() clears old gradients",
    )
    _save(fig, path)


# ---- 10. positions: clocks and rotations ----------------------------------------------


def _clock(ax, cx, cy, r, angle, colour, lw=1.8, face="white"):
    """A circle with one hand at ``angle`` (radians, counter-clockwise from 3 o'clock)."""
    ax.add_patch(Circle((cx, cy), r, facecolor=face, edgecolor=GREY, lw=1.0))
    ax.plot(
        [cx, cx + 0.85 * r * math.cos(angle)],
        [cy, cy + 0.85 * r * math.sin(angle)],
        color=colour,
        lw=lw,
        solid_capstyle="round",
    )
    ax.add_patch(Circle((cx, cy), 0.025, color=DARK))


def positions(path: Path) -> None:
    """Left: the sinusoidal encoding as clocks, one per column pair and position, turning at
    the frequency omega_i. Right: RoPE turns a query and a key by their positions; their angle
    depends on the distance only."""
    fig, ax = _canvas(4.4)
    omegas = [1.0, 0.3, 0.09]  # illustrative: fast, medium, slow
    r, dx, dy, x0, top = 0.2, 0.5, 0.62, 1.25, 3.35
    ax.text(
        2.4,
        4.1,
        "sinusoidal encoding: $PE_{p,2i} = \\sin(p\\,\\omega_i)$, "
        "$PE_{p,2i+1} = \\cos(p\\,\\omega_i)$",
        ha="center",
        va="center",
        fontsize=11,
    )
    for p in range(6):
        ax.text(x0 + p * dx, top + 0.38, f"$p={p}$", ha="center", va="center", fontsize=9)
    for i, omega in enumerate(omegas):
        y = top - i * dy
        ax.text(x0 - 0.35, y, f"pair $i={i}$", ha="right", va="center", fontsize=9)
        for p in range(6):
            _clock(ax, x0 + p * dx, y, r, p * omega, [BLUE, ORANGE, GREEN][i])
    ax.text(x0 - 0.35, top - 3 * dy + 0.1, "⋮", ha="right", va="center", fontsize=11)
    ax.text(
        2.4,
        top - 3 * dy - 0.15,
        "pair $i$ turns by $\\omega_i$ per position: fast in the first columns, slow in the last",
        ha="center",
        va="center",
        fontsize=9,
    )
    ax.text(
        2.4,
        top - 3 * dy - 0.45,
        "the hand's (cos, sin) is the column pair; the row is added to $\\mathbf{x}_p$",
        ha="center",
        va="center",
        fontsize=9,
    )
    # RoPE
    ax.plot([5.05, 5.05], [0.4, 4.25], color=GREY, lw=1.0)
    ax.text(
        6.5,
        4.1,
        "RoPE: rotate $\\mathbf{q}$ and $\\mathbf{k}$ by $p\\,\\theta_i$",
        ha="center",
        va="center",
        fontsize=11,
    )
    theta = 0.35
    for k, (p_q, p_k) in enumerate([(2, 5), (6, 9)]):
        cx, cy, rr = 5.85 + k * 1.45, 2.55, 0.55
        ax.add_patch(Circle((cx, cy), rr, facecolor="white", edgecolor=GREY, lw=1.0))
        aq, ak = 0.2 + p_q * theta, 0.9 + p_k * theta
        for a, colour, name in ((aq, BLUE, "q"), (ak, VERMILION, "k")):
            _arrow(
                ax,
                (cx, cy),
                (cx + 0.9 * rr * math.cos(a), cy + 0.9 * rr * math.sin(a)),
                colour=colour,
                lw=2.0,
            )
            ax.text(
                cx + 1.18 * rr * math.cos(a),
                cy + 1.18 * rr * math.sin(a),
                f"$R_{{{p_q if name == 'q' else p_k}}}\\mathbf{{{name}}}$",
                ha="center",
                va="center",
                fontsize=10,
                color=colour,
            )
        arc = [aq + t * (ak - aq) / 16 for t in range(17)]
        ax.plot(
            [cx + 0.3 * rr * math.cos(a) for a in arc],
            [cy + 0.3 * rr * math.sin(a) for a in arc],
            color=DARK,
            lw=1.0,
        )
        ax.text(
            cx,
            cy - rr - 0.25,
            f"query at {p_q}, key at {p_k}",
            ha="center",
            va="center",
            fontsize=9,
        )
    ax.text(6.58, 1.35, "the same angle between them:", ha="center", va="center", fontsize=10)
    ax.text(
        6.58,
        1.05,
        "the score depends on the distance only",
        ha="center",
        va="center",
        fontsize=10,
    )
    _note(
        ax,
        0.2,
        "one pair drawn; every pair $i$ of a head's $D$ features turns at its own "
        "$\\theta_i$; illustrative angles",
    )
    _save(fig, path)


# ---- 11. next-token prediction --------------------------------------------------------


def next_token(path: Path) -> None:
    """One sequence, L training examples: position t reads tokens 0..t and predicts token
    t + 1 (the targets are the inputs shifted by one)."""
    words = ["i", "must", "go", "back", "to", "my", "ship", "and"]
    L = len(words) - 1
    fig, ax = _canvas(3.8)
    dx, x0 = 0.86, 1.35
    y_in, y_model, y_out = 0.95, 2.05, 3.15
    ax.text(0.2, y_in, "input", ha="left", va="center", fontsize=10)
    ax.text(0.2, y_model, "model", ha="left", va="center", fontsize=10)
    ax.text(0.2, y_out, "target", ha="left", va="center", fontsize=10)
    t_shown = 4
    for t in range(L):
        x = x0 + t * dx
        seen = t <= t_shown
        _box(ax, x, y_in, 0.74, 0.36, words[t], GREY if seen else "white", 0.6 if seen else 1.0)
        ax.text(x, y_in - 0.3, f"$t={t}$", ha="center", va="center", fontsize=8, color="#444444")
        _box(ax, x, y_model, 0.74, 0.42, "", BLUE, 0.25 if t != t_shown else 0.6)
        _arrow(ax, (x, y_in + 0.18), (x, y_model - 0.21), lw=1.0)
        _arrow(ax, (x, y_model + 0.21), (x, y_out - 0.18), lw=1.0)
        _box(ax, x, y_out, 0.74, 0.36, words[t + 1], ORANGE, 0.35)
    # what position t_shown sees: the causal mask
    xs = x0 + t_shown * dx
    for t in range(t_shown):
        _arrow(
            ax,
            (x0 + t * dx + 0.2, y_in + 0.2),
            (xs - 0.25, y_model - 0.12),
            colour=BLUE,
            lw=0.9,
            rad=-0.12,
        )
    ax.text(xs, y_model, "$p$(next)", ha="center", va="center", fontsize=8.5)
    ax.text(
        WIDTH / 2,
        3.6,
        "the targets are the inputs shifted by one token",
        ha="center",
        va="center",
        fontsize=10,
    )
    _note(
        ax,
        0.3,
        f"position {t_shown} (dark) reads tokens 0 to {t_shown} through causal "
        f"attention and predicts token {t_shown + 1}",
    )
    _note(
        ax,
        0.08,
        "one sequence of $L$ tokens gives $L$ predictions at once; the loss is "
        "their mean cross-entropy",
    )
    _save(fig, path)


# ---- 12. the KV cache during decoding -------------------------------------------------


def kv_cache(path: Path) -> None:
    """Decoding steps t = 2, 3, 4: the new token's key and value are appended to the cache,
    its query scores every cached key: one row of t + 1 scores, no mask."""
    fig, ax = _canvas(4.8)
    cell, x_k = 0.3, 2.35
    for r, t in enumerate((2, 3, 4)):
        y = 3.95 - r * 1.15
        ax.text(0.2, y, f"step $t = {t}$", ha="left", va="center", fontsize=11, fontweight="bold")
        _box(ax, 1.45, y - 0.45, 0.75, 0.34, f"$x_{t}$", GREY, 0.6, fontsize=10)
        ax.text(1.45, y - 0.78, "new token", ha="center", va="center", fontsize=8)
        # the cache: keys (top row) and values (bottom row), one column per token
        for row, (name, colour) in enumerate((("K", VERMILION), ("V", GREEN))):
            yy = y + 0.08 - row * (cell + 0.08)
            for j in range(t + 1):
                new = j == t
                ax.add_patch(
                    Rectangle(
                        (x_k + j * cell, yy - cell),
                        cell,
                        cell,
                        facecolor=to_rgba(colour, 0.85 if new else 0.3),
                        edgecolor="white" if not new else DARK,
                        lw=0.8 if not new else 1.2,
                    )
                )
            ax.text(x_k - 0.08, yy - cell / 2, f"${name}$", ha="right", va="center", fontsize=10)
        _arrow(
            ax, (1.85, y - 0.45), (x_k + t * cell - 0.02, y - 0.15), colour=DARK, lw=1.0, rad=0.15
        )
        ax.text(
            x_k + 5 * cell + 0.2,
            y + 0.08 - cell / 2,
            f"cache: {t + 1} keys",
            ha="left",
            va="center",
            fontsize=9,
        )
        ax.text(
            x_k + 5 * cell + 0.2,
            y - 0.3 - cell / 2,
            f"and {t + 1} values",
            ha="left",
            va="center",
            fontsize=9,
        )
        # the one row of scores
        xs = 5.45
        ax.text(xs - 0.1, y - 0.08, f"$q_{t}$", ha="right", va="center", fontsize=11, color=BLUE)
        for j in range(t + 1):
            ax.add_patch(
                Rectangle(
                    (xs + j * cell, y - 0.08 - cell / 2),
                    cell,
                    cell,
                    facecolor=to_rgba(ORANGE, 0.6),
                    edgecolor="white",
                    lw=0.8,
                )
            )
        ax.text(
            xs + (t + 1) * cell + 0.1,
            y - 0.08,
            f"$1 \\times {t + 1}$ scores",
            ha="left",
            va="center",
            fontsize=9,
        )
    ax.text(
        x_k + 2.5 * cell,
        4.6,
        "kept from earlier steps, appended this step",
        ha="center",
        va="center",
        fontsize=10,
    )
    ax.text(6.4, 4.6, "the new query against the cache", ha="center", va="center", fontsize=10)
    _note(
        ax,
        0.42,
        "each step projects one token and computes one row of attention; "
        "every cached key is in the past: no mask",
    )
    _note(
        ax,
        0.12,
        "without a cache, step $t$ projects all $t + 1$ tokens again and "
        "computes $(t + 1) \\times (t + 1)$ scores",
    )
    _save(fig, path)


# ---- 13. the induction circuit --------------------------------------------------------


def induction_circuit(path: Path) -> None:
    """[A][B] ... [A] -> [B]: the previous-token head writes at s which token came before;
    the induction head at t finds that s by K-composition and its OV circuit copies B."""
    tokens = ["BOS", "the", "A", "B", "…", "…", "A"]
    names = ["", "", "Telemachus", "said", "", "", "Telemachus"]
    fig, ax = _canvas(4.6)
    dx, x0 = 0.92, 1.3
    y_tok, y_l0, y_l1, y_out = 0.75, 2.0, 3.2, 4.15
    s, t = 3, 6
    ax.text(0.15, y_tok, "tokens", ha="left", va="center", fontsize=10)
    ax.text(0.15, y_l0, "layer 0", ha="left", va="center", fontsize=10)
    ax.text(0.15, y_l1, "layer 1", ha="left", va="center", fontsize=10)
    for k, (tok, name) in enumerate(zip(tokens, names)):
        x = x0 + k * dx
        colour = {"A": BLUE, "B": ORANGE}.get(tok, GREY)
        _box(
            ax,
            x,
            y_tok,
            0.7,
            0.36,
            tok if tok in ("A", "B", "BOS", "…") else tok,
            colour,
            0.45 if tok in "AB" else 0.3,
            fontsize=10,
        )
        if name:
            ax.text(x, y_tok - 0.3, name, ha="center", va="center", fontsize=8, color="#444444")
        ax.plot([x, x], [y_tok + 0.18, y_out - 0.35], color=GREY, lw=0.8, zorder=0)
    xs, xt = x0 + s * dx, x0 + t * dx
    # layer 0: the previous-token head at s reads s - 1 and writes "previous: A" at s
    _arrow(ax, (xs, y_l0 - 0.02), (xs - dx + 0.05, y_tok + 0.22), colour=GREEN, lw=1.8, rad=0.25)
    _box(ax, xs + 0.05, y_l0 + 0.12, 1.4, 0.44, "previous token\nwas A", GREEN, 0.35, fontsize=9)
    ax.text(
        xs + 0.85,
        y_l0 + 0.12,
        "previous-token head:\nreads $s-1$, writes at $s$",
        ha="left",
        va="center",
        fontsize=9,
        color=DARK,
    )
    # layer 1: the induction head at t: QK matches A with "previous token was A" at s
    _arrow(ax, (xt - 0.1, y_l1), (xs + 0.45, y_l0 + 0.36), colour=VERMILION, lw=2.2, rad=0.2)
    _box(ax, xt, y_l1, 1.5, 0.44, "induction head\nquery: A", VERMILION, 0.35, fontsize=9)
    ax.text(
        xs + 1.0,
        y_l1 + 0.15,
        "QK: the key at $s$ holds\n\u201cprevious token was A\u201d\n(K-composition)",
        ha="right",
        va="center",
        fontsize=9,
        color=VERMILION,
    )
    # OV: copy B to the output at t
    _arrow(ax, (xt, y_l1 + 0.22), (xt, y_out - 0.2), colour=ORANGE, lw=2.0)
    _box(ax, xt, y_out, 1.35, 0.36, "predict B", ORANGE, 0.45, fontsize=10)
    ax.text(
        xt - 0.75,
        y_out,
        "OV: copies the token at $s$",
        ha="right",
        va="center",
        fontsize=9,
        color=DARK,
    )
    ax.text(xs, y_tok + 0.42, "$s$", ha="center", va="center", fontsize=10)
    ax.text(xt, y_tok + 0.42, "$t$", ha="center", va="center", fontsize=10)
    _note(
        ax,
        0.15,
        "$[A][B] \\dots [A] \\to [B]$: two heads in two layers; "
        "the second reads what the first wrote",
    )
    _save(fig, path)


def encoder_decoder(path: Path) -> None:
    """The encoder-decoder of "Cross-attention": the source through the encoder to the memory
    m (N, S, E); the target through the decoder block's causal self-attention, then
    cross-attention whose queries come from the target and keys and values from m, then the MLP,
    to the logits; the shapes where they change."""
    fig, ax = _canvas(5.0)
    # the encoder: left column, bottom to top
    _box(ax, 1.7, 0.95, 2.3, 0.5, "source ids $(N, S)$\nthe 13th of February, ...", GREY, 0.5, 9)
    _box(ax, 1.7, 2.05, 2.3, 0.75, "encoder: 2 blocks\nself-attention, no causal mask", BLUE)
    _box(ax, 1.7, 3.35, 2.3, 0.6, "memory $m$  $(N, S, E)$", BLUE, 0.6)
    _arrow(ax, (1.7, 1.2), (1.7, 1.67))
    _arrow(ax, (1.7, 2.43), (1.7, 3.05))
    # the decoder block: right column
    _box(ax, 5.6, 0.95, 2.6, 0.5, "target so far $(N, L)$\n<bos> 1 8 3 4 - ...", GREY, 0.5, 9)
    _box(ax, 5.6, 1.85, 2.6, 0.55, "causal self-attention  $(L, L)$", ORANGE)
    _box(ax, 5.6, 2.85, 2.6, 0.75, "cross-attention  $(L, S)$\nqueries from the target", VERMILION)
    _box(ax, 5.6, 3.8, 2.6, 0.45, "MLP", GREEN)
    _box(ax, 5.6, 4.55, 2.6, 0.45, "logits $(N, L, V)$", GREY, 0.5)
    _arrow(ax, (5.6, 1.2), (5.6, 1.57))
    _arrow(ax, (5.6, 2.13), (5.6, 2.47))
    _arrow(ax, (5.6, 3.23), (5.6, 3.57))
    _arrow(ax, (5.6, 4.03), (5.6, 4.32))
    _arrow(ax, (2.85, 3.35), (4.3, 2.95), "keys and values", colour=VERMILION, fontsize=9)
    ax.text(7.05, 2.85, "x 2\nblocks", ha="left", va="center", fontsize=9)
    _note(ax, 0.3, "m is computed once per source; each step adds one row to the decoder's caches")
    _save(fig, path)


DIAGRAMS = {
    "weighted_sum.svg": weighted_sum,
    "qkv_projections.svg": qkv_projections,
    "heads_split_merge.svg": heads_split_merge,
    "tiled_attention.svg": tiled_attention,
    "transformer_block.svg": transformer_block,
    "dot_product.svg": dot_product,
    "softmax.svg": softmax_steps,
    "masks.svg": masks,
    "training_loop.svg": training_loop,
    "positions.svg": positions,
    "next_token.svg": next_token,
    "kv_cache.svg": kv_cache,
    "induction_circuit.svg": induction_circuit,
    "encoder_decoder.svg": encoder_decoder,
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
