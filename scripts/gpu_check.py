"""The book's GPU check: attnlib's tests on CUDA, then the chapters' measurements on CUDA.

Usage (``make gpu-check``; ``--device cpu`` runs the same on the CPU, to try the script)::

    python scripts/gpu_check.py [--device cuda] [--rounds 5]

1. ``tests/test_devices.py`` for the device: every kernel and module of attnlib on it, equal
   to the same call on the CPU (masks of every shape, need_weights, caches, tiles, training).
2. The measurements of the chapters "Making attention fast" (one head, L = S from 1,024 to
   8,192: attnlib's exact attention, ``F.scaled_dot_product_attention`` and attnlib's tiled
   attention) and "Attention at inference" (the next token of a 2-layer model after S - 1
   tokens, without and with the KV cache), timed with ``torch.utils.benchmark`` (which
   synchronises CUDA), each output also checked against the exact one. Every line names the
   device. The chapters themselves run on the CPU, as a reader's machine does; these are
   their computations, moved.
3. ``scripts/train_odyssey.py``'s training on the device: 20 steps of the book's word model
   (dropout off), whose losses must match the same steps on the CPU.

Exit status: 0 when every test passes; 1 when one fails; 2 when the device is not there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark

ROOT = Path(__file__).resolve().parent.parent


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        memory = f"{p.total_memory / 2**30:.0f} GiB"
        return f"{p.name} ({memory}), CUDA {torch.version.cuda}, torch {torch.__version__}"
    from attnlib.experiment import machine

    return machine()


def median(stmt, globals_, rounds: int) -> float:
    """Median seconds of one call (torch.utils.benchmark: warm-up, CUDA synchronised)."""
    timer = benchmark.Timer(stmt=stmt, globals=globals_)
    return timer.blocked_autorange(min_run_time=0.2 * rounds).median


def attention_times(device: torch.device, rounds: int) -> None:
    import attnlib
    from attnlib.efficient import tiled_attention

    print(f"\nOne head, D = 64, on {device}: median time of one call (ms)")
    print(
        f"{'L = S':>6} {'attnlib exact':>14} {'F.sdpa':>10} {'tiled':>10} "
        f"{'exact/sdpa':>11} {'tiled/sdpa':>11}"
    )
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
        t = [
            median("attnlib.scaled_dot_product_attention(q, k, v)", env, rounds),
            median("F.scaled_dot_product_attention(q, k, v)", env, rounds),
            median("tiled_attention(q, k, v)", env, rounds),
        ]
        print(
            f"{n:>6} {t[0] * 1e3:>14.3f} {t[1] * 1e3:>10.3f} {t[2] * 1e3:>10.3f} "
            f"{t[0] / t[1]:>10.1f}x {t[2] / t[1]:>10.1f}x"
        )


def decoding_times(device: torch.device, rounds: int) -> None:
    from attnlib import LanguageModel

    new = 32
    print(
        f"\n{new} greedy tokens after a prompt of S tokens (2 layers, E = 64, 4 heads), "
        f"on {device} (ms)"
    )
    print(f"{'S':>6} {'no cache':>10} {'KV cache':>10} {'no cache / cache':>17}")
    torch.manual_seed(0)
    model = LanguageModel(1000, 64, 4, 2, max_len=2048).eval().requires_grad_(False).to(device)
    for s in (128, 512, 1024):
        prompt = torch.randint(0, 1000, (1, s), device=device)
        with_cache = model.generate(prompt, new, temperature=0, use_cache=True)
        without = model.generate(prompt, new, temperature=0, use_cache=False)
        assert torch.equal(with_cache, without), "the cache changed the greedy tokens"
        env = {"model": model, "prompt": prompt, "new": new}
        t = [
            median(f"model.generate(prompt, new, temperature=0, use_cache={c})", env, rounds)
            for c in (False, True)
        ]
        print(f"{s:>6} {t[0] * 1e3:>10.1f} {t[1] * 1e3:>10.1f} {t[0] / t[1]:>16.1f}x")


def training_check(device: torch.device) -> bool:
    """The language-model script's first 20 steps on ``device`` and on the CPU: same losses."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_odyssey as script

    data = script.Data(bpe=False)
    config = dict(script.BASE, dropout=0.0)  # dropout's masks differ between devices
    ids = data.ids["words"]
    settings = {k: config[k] for k in ("steps", "context", "batch_size", "lr", "weight_decay")}
    losses = {}
    for where in (torch.device("cpu"), device):
        glove = script.glove_matrix(data.vocab)
        model = script.make_model(config, len(data.vocab), 0, glove).to(where)
        _, losses[where] = script.train(
            model, ids["train"], ids["valid"], **settings, seed=0, stop_after=20, log=print
        )
    cpu, there = losses[torch.device("cpu")], losses[device]
    diff = max(abs(a - b) for a, b in zip(cpu, there))
    print(
        f"\ntrain_odyssey on {device}: 20 steps, last loss {there[-1]:.4f} "
        f"(CPU {cpu[-1]:.4f}), largest difference of a step's loss {diff:.1e}"
    )
    return diff < 1e-2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "gpu-check: no CUDA device here (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, built for CUDA {torch.version.cuda}). Run it on a machine "
            "with an NVIDIA GPU and torch's CUDA build (`make TORCH_INDEX= env`).",
            file=sys.stderr,
        )
        return 2
    print(f"gpu-check on {device}: {device_name(device)}", flush=True)
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_devices.py",
            "-q",
            "-rs",
            "-p",
            "no:randomly",
            "-k",
            device.type,
        ],
        cwd=ROOT,
        check=False,
    )
    if tests.returncode:
        print(f"gpu-check: the library tests failed on {device}", file=sys.stderr)
    attention_times(device, args.rounds)
    decoding_times(device, args.rounds)
    trains = training_check(device)
    failed = tests.returncode or not trains
    print(
        f"\ngpu-check on {device}: tests {'failed' if tests.returncode else 'passed'}, "
        f"training {'matches the CPU' if trains else 'DIFFERS from the CPU'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
