"""attnlib.MultiHeadAttention against torch.nn.MultiheadAttention with the same weights.

Self-attention, ``N=8, L=256, E=512, H=8``, float32, ``eval()`` and ``torch.no_grad()``.
The torch module is :func:`attnlib.convert.to_torch` of the attnlib one (same numbers); the
outputs (and weights) are checked equal before anything is timed. Two modes:

- **weights**: attnlib returns per-head weights ``(N, H, L, S)``; torch with
  ``need_weights=True`` and ``average_attn_weights=True`` (its default, weights averaged
  over heads) and ``False`` (per head, the same tensor as attnlib's);
- **no weights**: ``need_weights=False`` for both (attnlib goes through
  ``F.scaled_dot_product_attention``).

:class:`attnlib.NaiveMultiHeadAttention` (a list of heads) is timed for reference. Calls are
interleaved (one call of each variant per round) to spread the machine's noise evenly.

Goal: fused attnlib <= 1.05 x torch's time in both modes (against torch's faster variant
in the weights mode). Ratios use the best time (least disturbed by other processes);
medians are shown too.

By default the modules have no biases (attnlib's default). With biases (``--bias``)
torch's eval-mode fast path (``torch._native_multi_head_attention``, one C++ kernel) is
used, which it is not without an ``in_proj_bias``.

Usage::

    python benchmarks/bench_mha.py [--threads 2] [--repeats 30] [--bias] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: `benchmarks`

import attnlib  # noqa: E402
import torch  # noqa: E402
from attnlib.convert import naive_from_fused, to_torch  # noqa: E402

from benchmarks._harness import (  # noqa: E402
    GOAL_HEADERS,
    Goal,
    cli_parser,
    format_machine_info,
    format_table,
    make_result,
    markdown_table,
    ms,
    report,
    set_threads,
    time_interleaved,
)

GOAL_RATIO = 1.05


def make_modules(embed_dim: int, num_heads: int, bias: bool, seed: int = 0):
    """``(attnlib fused, torch, attnlib naive)`` with the same weights, in eval mode."""
    torch.manual_seed(seed)
    fused = attnlib.MultiHeadAttention(embed_dim, num_heads, bias=bias).eval()
    if bias:  # nn.Linear's biases start random already; make them clearly non-zero
        with torch.no_grad():
            for proj in (fused.q_proj, fused.k_proj, fused.v_proj, fused.out_proj):
                proj.bias.normal_()
    return fused, to_torch(fused).eval(), naive_from_fused(fused).eval()


def variants(fused, mha, naive, x) -> dict[str, dict[str, object]]:
    """mode -> label -> function of no argument (the calls that are timed)."""
    return {
        "weights": {
            "attnlib fused": lambda: fused(x),
            "torch (average_attn_weights=True)": lambda: mha(x, x, x),
            "torch (average_attn_weights=False)": lambda: mha(x, x, x, average_attn_weights=False),
            "attnlib naive": lambda: naive(x),
        },
        "no weights": {
            "attnlib fused": lambda: fused(x, need_weights=False),
            "torch": lambda: mha(x, x, x, need_weights=False),
            "attnlib naive": lambda: naive(x, need_weights=False),
        },
    }


def check_equal(fused, mha, naive, x) -> float:
    """Outputs and weights of every variant agree; returns the largest output difference."""
    out, weights = fused(x)
    out_t, weights_t = mha(x, x, x, average_attn_weights=False)
    out_avg, weights_avg = mha(x, x, x)
    out_fast, none = fused(x, need_weights=False)
    out_t_fast, none_t = mha(x, x, x, need_weights=False)
    out_naive, weights_naive = naive(x)
    assert none is None and none_t is None
    for mine, theirs in (
        (out_t, out),
        (weights_t, weights),
        (out_avg, out),
        (weights_avg, weights.mean(dim=1)),
        (out_fast, out),
        (out_t_fast, out),
        (out_naive, out),
        (weights_naive, weights),
    ):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    return max(float((o - out).abs().max()) for o in (out_t, out_avg, out_fast, out_t_fast))


def run(
    threads: int | None = None,
    repeats: int = 30,
    warmup: int = 3,
    bias: bool = False,
    N: int = 8,
    L: int = 256,
    E: int = 512,
    H: int = 8,
) -> dict:
    """Check, time and compare; returns ``{"rows", "goals", "text", ...}``."""
    threads = set_threads(threads)
    fused, mha, naive = make_modules(E, H, bias)
    torch.manual_seed(1)
    x = torch.randn(N, L, E)  # (N, L, E)
    rows, goals, tables, markdown = [], [], [], []
    with torch.no_grad():
        worst = check_equal(fused, mha, naive, x)
        for mode, fns in variants(fused, mha, naive, x).items():
            timings = time_interleaved(fns, repeats=repeats, warmup=warmup)
            torch_labels = [label for label in timings if label.startswith("torch")]
            fastest = min(torch_labels, key=lambda label: timings[label].best)
            ref = timings[fastest]
            table = []
            for label, t in timings.items():
                rows.append({"mode": mode, "variant": label, **t.to_dict()})
                table.append(
                    [
                        label,
                        ms(t.best),
                        ms(t.median),
                        ms(t.cpu_best),
                        f"{t.best / ref.best:.3f}",
                        f"{t.median / ref.median:.3f}",
                    ]
                )
            mine = timings["attnlib fused"]
            goals.append(
                Goal(
                    f"MHA {mode}{' (bias)' if bias else ''}: attnlib / {fastest}",
                    mine.best / ref.best,
                    GOAL_RATIO,
                    "<=",
                    f"best {ms(mine.best)} ms vs {ms(ref.best)} ms; median ratio "
                    f"{mine.median / ref.median:.3f}",
                )
            )
            headers = [mode, "best ms", "median ms", "CPU ms", "x torch best", "x torch median"]
            tables.append(format_table(headers, table))
            markdown.append(markdown_table(headers, table))
    title = (
        f"Multi-head self-attention, N={N}, L={L}, E={E}, H={H}, bias={bias}, float32, "
        f"eval + no_grad, {threads} threads, {repeats} interleaved repeats "
        f"(x torch = / the faster torch variant)"
    )
    goal_rows = [g.row() for g in goals]
    text = "\n\n".join(
        [title, *tables, f"outputs checked equal (largest difference {worst:.2e})"]
        + [format_table(GOAL_HEADERS, goal_rows)]
    )
    md = "\n\n".join([f"**{title}**", *markdown, markdown_table(GOAL_HEADERS, goal_rows)])
    return make_result(
        "mha" + ("_bias" if bias else ""),
        threads,
        {"N": N, "L": L, "E": E, "H": H, "bias": bias, "repeats": repeats},
        rows,
        goals,
        text,
        md,
        max_abs_diff=worst,
    )


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=30, help="interleaved timed rounds")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--bias", action="store_true", help="modules with biases")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    print(format_machine_info())
    print()
    result = run(args.threads, args.repeats, args.warmup, args.bias)
    return report(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
