"""Run every benchmark and print one summary table of goals with PASS/FAIL.

Runs, in order: :mod:`bench_mha` (bias-free, the goal; ``--bias`` adds torch's fast path),
:mod:`bench_memory`, :mod:`bench_glove_load`. Each prints its own side-by-side table as it
finishes. Nothing is written unless ``--out DIR`` is given (then one JSON and one Markdown
file per benchmark, plus ``summary.md``/``summary.json``).

Usage::

    python benchmarks/run_all.py [--threads 2] [--quick] [--bias] [--out DIR]

``--quick`` uses fewer repeats and runs (minutes instead of about ten; noisier).
Exit status 0 when every goal passes, 1 otherwise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: `benchmarks`

from benchmarks import bench_glove_load, bench_memory, bench_mha  # noqa: E402
from benchmarks._harness import (  # noqa: E402
    GOAL_HEADERS,
    cli_parser,
    format_machine_info,
    format_table,
    machine_info,
    markdown_table,
    result_data,
    set_threads,
    write_results,
)


def run_all(threads: int | None = None, quick: bool = False, bias: bool = False) -> list[dict]:
    """Run the benchmarks; returns their result dicts (each with ``goal_objects``)."""
    runs = [
        lambda: bench_mha.run(threads, repeats=10 if quick else 30, bias=False),
        *([lambda: bench_mha.run(threads, repeats=10 if quick else 30, bias=True)] * bias),
        lambda: bench_memory.run(threads, repeats=1 if quick else 3),
        lambda: bench_glove_load.run(threads, runs=2 if quick else 5),
    ]
    results = []
    for run in runs:
        start = time.perf_counter()
        result = run()
        result["wall_s"] = time.perf_counter() - start
        print(result["text"])
        print(f"({result['name']}: {result['wall_s']:.0f} s)\n", flush=True)
        results.append(result)
    return results


def summary_rows(results: list[dict]) -> list[list[str]]:
    """One row per goal of every result: goal, measured, target, PASS/FAIL, detail."""
    return [g.row() + [g.detail] for r in results for g in r["goal_objects"]]


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    parser.add_argument("--bias", action="store_true", help="also MHA with biases (fast path)")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    info = machine_info()
    print(format_machine_info(info))
    print()
    results = run_all(threads, args.quick, args.bias)
    headers = [*GOAL_HEADERS, "detail"]
    rows = summary_rows(results)
    print("Summary\n")
    print(format_table(headers, rows))
    print()
    print(format_machine_info(machine_info()))  # the load average at the end, too
    passed = all(g.passed for r in results for g in r["goal_objects"])
    if args.out:
        for r in results:
            write_results(args.out, r["name"], result_data(r), r["markdown"])
        text = "\n\n".join(
            [
                "**Summary of goals**",
                markdown_table(headers, rows),
                "```",
                format_machine_info(info),
                "```",
            ]
        )
        goals = [g.to_dict() for r in results for g in r["goal_objects"]]
        paths = write_results(args.out, "summary", {"goals": goals, "passed": passed}, text)
        print("\nwrote results to", args.out, "including", *paths)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
