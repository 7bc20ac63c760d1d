"""The efficient-attention and inference chapters' measurements, on a device (``make gpu-check``).

One head, D = 64, L = S from 1,024 to 8,192: attnlib's exact attention,
``F.scaled_dot_product_attention`` and attnlib's tiled attention; then the next 32 greedy tokens of
a 2-layer model after S tokens, without and with the KV cache. Every output is checked against the
exact one first; times are medians of ``torch.utils.benchmark`` (which synchronises CUDA).

Usage::

    python benchmarks/bench_gpu.py [--device cuda] [--rounds 5]
"""

from __future__ import annotations

import argparse

import attnlib
import torch
import torch.nn.functional as F
from attnlib.efficient import tiled_attention
from torch.utils import benchmark


def median(stmt: str, env: dict, rounds: int) -> float:
    return benchmark.Timer(stmt, globals=env).blocked_autorange(min_run_time=0.2 * rounds).median


def attention_times(device: torch.device, rounds: int) -> None:
    print(f"\nOne head, D = 64, on {device}: median time of one call (ms)")
    print(f"{'L = S':>6} {'attnlib':>10} {'F.sdpa':>10} {'tiled':>10} {'attnlib/sdpa':>13}")
    for n in (1024, 2048, 4096, 8192):
        g = torch.Generator(device).manual_seed(n)
        q, k, v = torch.randn(3, 1, 1, n, 64, generator=g, device=device).unbind(0)
        exact, _ = attnlib.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(tiled_attention(q, k, v), exact, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(
            F.scaled_dot_product_attention(q, k, v), exact, rtol=1e-3, atol=1e-4
        )
        env = {
            "attnlib": attnlib,
            "F": F,
            "tiled_attention": tiled_attention,
            "q": q,
            "k": k,
            "v": v,
        }
        calls = (
            "attnlib.scaled_dot_product_attention",
            "F.scaled_dot_product_attention",
            "tiled_attention",
        )
        t = [median(f"{call}(q, k, v)", env, rounds) * 1e3 for call in calls]
        print(f"{n:>6} {t[0]:>10.3f} {t[1]:>10.3f} {t[2]:>10.3f} {t[0] / t[1]:>12.1f}x")


def decoding_times(device: torch.device, rounds: int, new: int = 32) -> None:
    print(f"\n{new} greedy tokens after S tokens (2 layers, E = 64, 4 heads), on {device} (ms)")
    print(f"{'S':>6} {'no cache':>10} {'KV cache':>10} {'ratio':>8}")
    torch.manual_seed(0)
    model = attnlib.LanguageModel(1000, 64, 4, 2, max_len=2048).eval().requires_grad_(False)
    model.to(device)
    for s in (128, 512, 1024):
        prompt = torch.randint(0, 1000, (1, s), device=device)
        cached = model.generate(prompt, new, temperature=0, use_cache=True)
        assert torch.equal(cached, model.generate(prompt, new, temperature=0, use_cache=False))
        env = {"model": model, "prompt": prompt, "new": new}
        t = [
            median(f"model.generate(prompt, new, temperature=0, use_cache={c})", env, rounds) * 1e3
            for c in (False, True)
        ]
        print(f"{s:>6} {t[0]:>10.1f} {t[1]:>10.1f} {t[0] / t[1]:>7.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__} (CUDA {torch.version.cuda})")
    attention_times(device, args.rounds)
    decoding_times(device, args.rounds)
