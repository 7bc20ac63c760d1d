"""Peak memory (and time) of tiled attention against exact attention, at L = S = 8192.

Single head, batch 1, ``D = 64``: the exact methods build the ``L x S`` matrix of scores
(8192 x 8192 float32 = 256 MiB, and more for the temporaries around the softmax);
:func:`attnlib.efficient.tiled_attention` holds one ``L x block_size`` block at a time.

Each method is measured in its own fresh interpreter (:func:`_harness.peak_memory`), so
peaks do not mix; the inputs (3 x 2 MiB) are made before the measurement and not counted,
what the call returns is (the 2 MiB output; for ``attnlib.scaled_dot_product_attention``
also the 256 MiB of weights it returns). Times are measured in another fresh interpreter
per method (best and median of a few calls after one warm-up), since the memory
measurement runs with a malloc setting that costs time. ``F.scaled_dot_product_attention``
with its default CPU kernel (a fused, FlashAttention-like kernel) is shown for reference.

Goal: tiled peak <= 0.10 x exact peak (against both exact methods).

Usage::

    python benchmarks/bench_memory.py [--threads 2] [--length 8192] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: `benchmarks`

from benchmarks._harness import (  # noqa: E402
    GOAL_HEADERS,
    Goal,
    cli_parser,
    format_machine_info,
    format_table,
    make_result,
    markdown_table,
    mib,
    ms,
    peak_memory,
    report,
    set_threads,
    time_in_subprocess,
)

GOAL_RATIO = 0.10

SETUP = """
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import attnlib
from attnlib.efficient import tiled_attention
torch.manual_seed(0)
q, k, v = (torch.randn(1, 1, {L}, {D}) for _ in range(3))  # (N=1, H=1, L, D)
def sdpa_math(q, k, v):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v)
"""

# (short name, label, expression, exact?)
METHODS = [
    ("tiled", "attnlib tiled_attention (block 128)", "tiled_attention(q, k, v)", False),
    (
        "tiled512",
        "attnlib tiled_attention (block 512)",
        "tiled_attention(q, k, v, block_size=512)",
        False,
    ),
    (
        "attnlib",
        "attnlib.scaled_dot_product_attention (exact)",
        "attnlib.scaled_dot_product_attention(q, k, v)",
        True,
    ),
    ("math", "F.sdpa, MATH backend (exact)", "sdpa_math(q, k, v)", True),
    (
        "flash",
        "F.sdpa, default CPU kernel (flash)",
        "F.scaled_dot_product_attention(q, k, v)",
        False,
    ),
]


def check_equal(length: int, dim: int) -> float:
    """Every method's output against F.sdpa's default kernel; returns the largest difference."""
    import torch

    scope: dict = {}
    exec(SETUP.format(L=length, D=dim), scope)
    reference = scope["F"].scaled_dot_product_attention(scope["q"], scope["k"], scope["v"])
    worst = 0.0
    for _, label, expr, _ in METHODS:
        out = eval(expr, scope)
        out = out[0] if isinstance(out, tuple) else out  # attnlib's (output, weights)
        torch.testing.assert_close(
            out, reference, rtol=1e-4, atol=1e-5, msg=lambda m, x=label: f"{x}: {m}"
        )
        worst = max(worst, float((out - reference).abs().max()))
        del out
    return worst


def run(threads: int | None = None, length: int = 8192, dim: int = 64, repeats: int = 3) -> dict:
    """Measure every method; returns ``{"rows", "goals", "text", ...}`` (JSON-able)."""
    threads = set_threads(threads)
    worst = check_equal(length, dim)
    setup = SETUP.format(L=length, D=dim)
    rows = []
    for name, label, expr, exact in METHODS:
        memory = peak_memory(setup, expr, threads=threads)
        timing, _ = time_in_subprocess(setup, expr, repeats=repeats, warmup=1, threads=threads)
        rows.append(
            {"name": name, "method": label, "exact": exact, "expr": expr}
            | memory
            | timing.to_dict()
        )
    tiled = next(r for r in rows if r["name"] == "tiled")
    exact_rows = [r for r in rows if r["exact"]]
    goals = [
        Goal(
            f"memory: tiled / {r['method']}",
            tiled["peak_bytes"] / r["peak_bytes"],
            GOAL_RATIO,
            "<=",
            f"{mib(tiled['peak_bytes'])} MiB vs {mib(r['peak_bytes'])} MiB",
        )
        for r in exact_rows
    ]
    reference = exact_rows[0]
    headers = ["method", "peak MiB", "x exact", "best ms", "median ms", "CPU ms", "x exact time"]
    table = [
        [
            r["method"],
            mib(r["peak_bytes"]),
            f"{r['peak_bytes'] / reference['peak_bytes']:.3f}",
            ms(r["best_s"]),
            ms(r["median_s"]),
            ms(r["cpu_best_s"]),
            f"{r['best_s'] / reference['best_s']:.2f}",
        ]
        for r in rows
    ]
    title = (
        f"Peak memory and time, L = S = {length}, D = {dim}, batch 1, one head, float32, "
        f"{threads} threads ('x exact' = / {reference['method']})"
    )
    text = "\n".join(
        [
            title,
            "",
            format_table(headers, table),
            "",
            f"outputs checked equal to F.sdpa's (largest difference {worst:.2e}); "
            f"peak = {rows[0]['memory_method']}, in a fresh process per method",
            "",
            format_table(GOAL_HEADERS, [g.row() for g in goals]),
        ]
    )
    markdown = "\n\n".join(
        [
            f"**{title}**",
            markdown_table(headers, table),
            markdown_table(GOAL_HEADERS, [g.row() for g in goals]),
        ]
    )
    return make_result(
        "memory",
        threads,
        {"L": length, "S": length, "D": dim, "repeats": repeats},
        rows,
        goals,
        text,
        markdown,
        max_abs_diff=worst,
    )


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(__doc__)
    parser.add_argument("--length", type=int, default=8192, help="L = S (default 8192)")
    parser.add_argument("--dim", type=int, default=64, help="head dimension D (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per method")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    print(format_machine_info())
    print()
    result = run(args.threads, args.length, args.dim, args.repeats)
    return report(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
