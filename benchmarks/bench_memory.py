"""Peak memory and time of tiled attention against exact attention at L = S = 8192, D = 64.

One head, batch 1, float32. The exact methods hold the L x S scores and weights (2 x 256 MiB);
``attnlib.efficient.tiled_attention`` holds a few L x block_size blocks. Each peak is measured
in a fresh process (``_common.measure_peak``: ru_maxrss before and after one call, the inputs
made before); the rounds interleave the methods. Times: ``torch.utils.benchmark`` in this
process. All outputs are first checked equal to ``F.scaled_dot_product_attention``'s.

Goal: peak of tiled (block 128) <= 0.10 x the peak of each exact method.

Usage::

    python benchmarks/bench_memory.py [--length 8192] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import sys

import _common
import attnlib
import torch
import torch.nn.functional as F
from attnlib.efficient import tiled_attention
from torch.nn.attention import SDPBackend, sdpa_kernel


def sdpa_math(q, k, v):
    with sdpa_kernel(SDPBackend.MATH):  # PyTorch's plain path: builds the L x S matrices
        return F.scaled_dot_product_attention(q, k, v)


METHODS = {  # name -> (function of q, k, v returning the output, exact?)
    "tiled (block 128)": (tiled_attention, False),
    "tiled (block 512)": (lambda q, k, v: tiled_attention(q, k, v, block_size=512), False),
    "attnlib exact": (lambda q, k, v: attnlib.scaled_dot_product_attention(q, k, v)[0], True),
    "F.sdpa math (exact)": (sdpa_math, True),
    "F.sdpa default (flash)": (F.scaled_dot_product_attention, False),
}


def inputs(length: int, dim: int = 64):
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 1, 1, length, dim, generator=gen).unbind(0)  # q, k, v: (1, 1, L, D)


def child(name: str, length: int) -> None:
    """``--peak NAME L``: print the peak bytes of one call (run by :func:`_common.peak_rss`)."""
    fn = METHODS[name][0]
    q, k, v = inputs(length)
    small = inputs(256)
    print(_common.measure_peak(lambda: fn(q, k, v), lambda: fn(*small)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--peak", nargs=2, metavar=("NAME", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak:
        child(args.peak[0], int(args.peak[1]))
        return 0
    print(_common.machine())
    q, k, v = inputs(args.length)
    reference = F.scaled_dot_product_attention(q, k, v)
    for name, (fn, _) in METHODS.items():
        torch.testing.assert_close(fn(q, k, v), reference, rtol=1e-4, atol=1e-5, msg=name)
    print(f"L = S = {args.length}, D = 64: all outputs equal to F.sdpa's\n")

    peaks = {name: [] for name in METHODS}
    for r in range(args.rounds):  # interleaved, the order rotating
        names = list(METHODS)[r % len(METHODS) :] + list(METHODS)[: r % len(METHODS)]
        for name in names:
            peaks[name].append(_common.peak_rss(__file__, name, str(args.length)))
    label = f"attention, L = S = {args.length}, D = 64"
    fns = {name: (lambda fn=fn: fn(q, k, v)) for name, (fn, _) in METHODS.items()}
    times = _common.rounds(
        fns, label, "time", n=args.rounds, min_run_time=1.0, threads=args.threads
    )
    _common.compare(times)

    print(f"\n{'method':<24} {'peak MiB (median)':>18} {'range':>15}")
    for name, values in peaks.items():
        mib = sorted(v / 2**20 for v in values)
        print(f"{name:<24} {mib[len(mib) // 2]:>18.1f} {mib[0]:>7.1f}-{mib[-1]:<7.1f}")
    ok = True
    for name, (_, exact) in METHODS.items():
        if exact:
            r = _common.ratio(peaks["tiled (block 128)"], peaks[name])
            line = _common.ratio_line(f"memory, tiled / {name}", r, "<= 0.10")
            ok &= line.endswith("PASS")
            print(line)
    for name in METHODS:
        if name != "attnlib exact":
            r = _common.ratio(times[name], times["attnlib exact"])
            print(_common.ratio_line(f"time, {name} / attnlib exact", r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
