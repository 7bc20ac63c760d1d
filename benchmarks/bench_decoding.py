"""Decoding one token at a time, with and without a KV cache, as the context grows.

One causal self-attention layer, ``attnlib.MultiHeadAttention(E=512, H=8)``, batch 1,
float32, eval and ``no_grad``. At context length ``S`` one decoding step is timed two ways:

- **no cache**: the step runs the layer on all ``S`` tokens with a causal mask and keeps the
  last row (what a model without a cache must do): ``O(S)`` projections and an ``(S, S)``
  attention;
- **cache**: the step runs the layer on the new token only, with a ``KVCache`` already
  holding ``S - 1`` positions: one projection and a ``(1, S)`` attention. The cache is
  copied before each timed call, so every call sees the same ``S``.

Both are checked equal before timing. ``torch.utils.benchmark`` times them (``Timer`` with
``blocked_autorange``, best-of and median); the calls of one ``S`` are interleaved in
rounds to spread the machine's noise. The script prints the step times, their ratio, and the
log-log slope of each: without a cache between 1 and 2 (the ``O(S)`` projections dominate at
short contexts, the ``O(S^2)`` attention at long ones; measured 1.3 for S = 64 .. 2048), with a
cache at most 1 (measured 0.8).
Also with grouped-query attention: the cache size and step time for ``G = 8, 4, 2, 1``.

Usage::

    python benchmarks/bench_decoding.py [--threads 2] [--rounds 5] [--max-len 2048]
"""

from __future__ import annotations

import argparse
import copy
import math
import platform

import attnlib
import torch
from attnlib.decoding import KVCache
from torch.utils import benchmark

E, H = 512, 8


def make_layer(num_kv_heads: int = H, seed: int = 0) -> attnlib.MultiHeadAttention:
    torch.manual_seed(seed)
    return attnlib.MultiHeadAttention(E, H, num_kv_heads=num_kv_heads).eval()


def prefilled(layer, x: torch.Tensor) -> KVCache:
    """A cache holding all but the last token of ``x``."""
    cache = KVCache()
    layer(x[:, :-1], cache=cache, need_weights=False)
    return cache


def step_calls(layer, x: torch.Tensor):
    """The two timed functions for context length S = x.shape[1]."""
    S = x.shape[1]
    mask = attnlib.causal_mask(S)
    cache = prefilled(layer, x)
    last = x[:, -1:]

    def no_cache():
        return layer(x, mask=mask, need_weights=False)[0][:, -1:]

    def with_cache():
        return layer(last, cache=copy.copy(cache), need_weights=False)[0]

    torch.testing.assert_close(with_cache(), no_cache(), atol=1e-5, rtol=1e-5)
    return {"no cache": no_cache, "cache": with_cache}


def time_rounds(calls: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per call, ``rounds`` blocked_autorange measurements per variant, interleaved."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            m = benchmark.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=0.05)
            times[name].append(m.median)
    return times


def slope(xs, ys) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-len", type=int, default=2048)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, E={E}, H={H}, batch 1, float32"
    )

    lengths = [s for s in (64, 128, 256, 512, 1024, 2048, 4096) if s <= args.max_len]
    layer = make_layer()
    best = {"no cache": [], "cache": []}
    header = f"{'S':>6} {'no cache ms':>12} {'cache ms':>9} {'ratio':>7}"
    print(f"\n{header}   (best of rounds; median ratio)")
    with torch.no_grad():
        for S in lengths:
            x = torch.randn(1, S, E, generator=torch.Generator().manual_seed(S))
            times = time_rounds(step_calls(layer, x), args.rounds)
            b = {k: min(v) for k, v in times.items()}
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            for k in best:
                best[k].append(b[k])
            ratio = b["no cache"] / b["cache"]
            print(
                f"{S:6d} {b['no cache'] * 1e3:12.3f} {b['cache'] * 1e3:9.3f} {ratio:7.1f}x"
                f"   ({med['no cache'] / med['cache']:.1f}x)"
            )
    print(
        f"log-log slope of the step time: no cache {slope(lengths, best['no cache']):.2f}, "
        f"cache {slope(lengths, best['cache']):.2f}"
    )

    S = lengths[-1]
    print(f"\nGrouped-query attention at S = {S}: cache size and step time with a cache")
    print(f"{'G':>3} {'cache MiB':>10} {'step ms':>8}")
    x = torch.randn(1, S, E, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for G in (8, 4, 2, 1):
            layer = make_layer(G)
            calls = step_calls(layer, x)
            t = min(time_rounds({"cache": calls["cache"]}, args.rounds)["cache"])
            nbytes = prefilled(layer, x).nbytes
            print(f"{G:3d} {nbytes / 2**20:10.2f} {t * 1e3:8.3f}")


if __name__ == "__main__":
    main()
