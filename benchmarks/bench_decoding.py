"""Decoding one token at a time, with and without a KV cache, as the context grows.

One causal self-attention layer, ``attnlib.MultiHeadAttention(E=512, H=8)``, batch 1, float32,
eval and no_grad. At context length S one decoding step is timed two ways: **no cache** runs
the layer on all S tokens with a causal mask and keeps the last row (O(S) projections, an
(S, S) attention); **cache** runs it on the new token with a ``KVCache`` holding S - 1
positions (one projection, a (1, S) attention), the cache reset to those before every call.
Both are checked equal first. The ratio no cache / cache is the median over interleaved
rounds, with its range; the log-log slope of each step time against S follows (without a cache
between 1 and 2, with a cache at most 1). Then grouped-query attention at the longest S: the
cache size and step time for G = 8, 4, 2, 1 key/value heads.

Usage::

    python benchmarks/bench_decoding.py [--threads 1] [--rounds 5] [--max-len 2048]
"""

from __future__ import annotations

import argparse

import _common
import attnlib
import numpy as np
import torch
from attnlib.decoding import KVCache

E, H = 512, 8


def step_calls(S: int, G: int = H):
    """The two steps at context length S (functions of no argument) and the filled cache."""
    torch.manual_seed(S)
    layer = attnlib.MultiHeadAttention(E, H, num_kv_heads=G).eval().requires_grad_(False)
    x = torch.randn(1, S, E)
    mask = attnlib.causal_mask(S)
    cache = KVCache()
    layer(x[:, :-1], cache=cache, need_weights=False)  # prefill: S - 1 tokens
    length = cache.length

    def no_cache():
        return layer(x, mask=mask, need_weights=False)[0][:, -1:]

    def with_cache():
        cache.crop(length)  # back to S - 1 tokens: the same step
        return layer(x[:, -1:], cache=cache, need_weights=False)[0]

    torch.testing.assert_close(with_cache(), no_cache(), atol=1e-5, rtol=1e-5)
    return {"no cache": no_cache, "cache": with_cache}, cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-len", type=int, default=2048)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(_common.machine() + f"; E={E}, H={H}, batch 1, float32\n")
    lengths = [s for s in (64, 128, 256, 512, 1024, 2048, 4096) if s <= args.max_len]
    medians = {"no cache": [], "cache": []}
    all_times = []
    with torch.no_grad():
        for S in lengths:
            calls, _ = step_calls(S)
            times = _common.rounds(
                calls, "decoding step", f"S={S}", args.rounds, 0.05, args.threads
            )
            all_times += [m for ms in times.values() for m in ms]
            for name in medians:
                medians[name].append(np.median([m.median for m in times[name]]))
            r = _common.ratio(times["no cache"], times["cache"])
            print(_common.ratio_line(f"S = {S:>4}: no cache / cache", r))
    _common.compare(all_times)
    for name, values in medians.items():
        slope = np.polyfit(np.log(lengths), np.log(values), 1)[0]
        print(f"log-log slope of the step time against S, {name}: {slope:.2f}")

    S = lengths[-1]
    print(f"\nGrouped-query attention at S = {S}, with a cache")
    steps, nbytes = {}, {}
    with torch.no_grad():
        for G in (8, 4, 2, 1):
            calls, cache = step_calls(S, G)
            steps[f"G={G}"], nbytes[f"G={G}"] = calls["cache"], cache.nbytes
        times = _common.rounds(steps, "GQA step", f"S={S}", args.rounds, 0.05, args.threads)
    for name in steps:
        r = _common.ratio(times["G=8"], times[name])
        line = _common.ratio_line(f"time G=8 / time {name}", r)
        print(f"{name}: cache {nbytes[name] / 2**20:5.2f} MiB; {line}")


if __name__ == "__main__":
    main()
