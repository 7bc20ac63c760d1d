"""attnlib.MultiHeadAttention against torch.nn.MultiheadAttention with the same weights.

Self-attention, N=8, L=256, E=512, H=8, float32, eval() and no_grad(). The torch module is
``attnlib.convert.to_torch`` of the attnlib one; outputs and weights are checked equal first.
Two modes: **weights** (attnlib's per-head weights; torch with ``average_attn_weights`` True,
its default, and False) and **no weights** (``need_weights=False`` for both: attnlib goes
through ``F.scaled_dot_product_attention``). ``NaiveMultiHeadAttention`` is timed for reference.
``--bias`` gives the modules biases, which sends torch's eval mode through its fused C++ path.

``--compile`` adds a third mode, **compiled**: ``torch.compile(fused, fullgraph=True)`` (Inductor,
or ``--backend``) against the same module in eager mode and against torch's module, all with the
weights returned. The compiled module is checked equal to the eager one first; its compile time
is printed and not timed.

Why torch's module is often the slower one here: it works in ``(L, N, E)`` order inside, so
with ``batch_first=True`` it transposes its inputs and its batched products read strided memory;
the same module with ``batch_first=False`` on ``(L, N, E)`` inputs takes about attnlib's time.

Goal: fused attnlib <= 1.05 x torch (in the weights mode, the faster torch variant), judged
on the median over interleaved rounds of the per-round ratio of medians; the range is printed.
The ``seq-first`` torch variants (``batch_first=False`` on ``(L, N, E)`` inputs) are printed for
information and are not part of the goal.

Usage::

    python benchmarks/bench_mha.py [--rounds 10] [--threads N] [--bias] [--compile]
"""

from __future__ import annotations

import argparse
import sys
import time

import _common
import attnlib
import torch
from attnlib.convert import naive_from_fused, to_torch
from torch import nn


def make_modules(E: int = 512, H: int = 8, bias: bool = False):
    """``(attnlib fused, torch, attnlib naive)``, the same weights, eval mode, no gradients."""
    torch.manual_seed(0)
    fused = attnlib.MultiHeadAttention(E, H, bias=bias)
    if bias:
        with torch.no_grad():
            for proj in (fused.q_proj, fused.k_proj, fused.v_proj, fused.out_proj):
                proj.bias.normal_()  # clearly non-zero
    modules = fused, to_torch(fused), naive_from_fused(fused)
    return [m.eval().requires_grad_(False) for m in modules]


def seq_first(mha):
    """The same torch module with ``batch_first=False`` (it then takes ``(L, N, E)`` inputs)."""
    copy = nn.MultiheadAttention(
        mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None, batch_first=False
    )
    copy.load_state_dict(mha.state_dict())
    return copy.eval().requires_grad_(False)


def variants(fused, mha, naive, x):
    """mode -> name -> function of no argument (what is timed). The ``seq-first`` variants
    (for information, not the goal) take ``(L, N, E)`` inputs and return ``(L, N, E)``,
    transposed back (a view) for the equality check."""
    sf, xt = seq_first(mha), x.transpose(0, 1).contiguous()  # (L, N, E)

    def sf_call(**kwargs):
        out, w = sf(xt, xt, xt, **kwargs)
        return out.transpose(0, 1), w

    return {
        "weights": {
            "attnlib fused": lambda: fused(x),
            "torch (averaged)": lambda: mha(x, x, x),
            "torch (per head)": lambda: mha(x, x, x, average_attn_weights=False),
            "torch seq-first (per head)": lambda: sf_call(average_attn_weights=False),
            "attnlib naive": lambda: naive(x),
        },
        "no weights": {
            "attnlib fused": lambda: fused(x, need_weights=False),
            "torch": lambda: mha(x, x, x, need_weights=False),
            "torch seq-first": lambda: sf_call(need_weights=False),
            "attnlib naive": lambda: naive(x, need_weights=False),
        },
    }


def compiled_variants(fused, mha, x, backend: str):
    """The compiled mode: ``(name -> function)``, after compiling and checking equal."""
    compiled = torch.compile(fused, fullgraph=True, backend=backend)
    start = time.perf_counter()
    with torch.no_grad():
        out, weights = compiled(x)  # the first call compiles
    print(
        f"torch.compile(fullgraph=True, backend={backend!r}): {time.perf_counter() - start:.1f} s"
    )
    expected_out, expected_weights = fused(x)
    torch.testing.assert_close(out, expected_out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-4, atol=1e-5)
    return {
        "attnlib compiled": lambda: compiled(x),
        "attnlib eager": lambda: fused(x),
        "torch (per head)": lambda: mha(x, x, x, average_attn_weights=False),
    }


def check_equal(fused, mha, naive, x) -> None:
    out, weights = fused(x)
    for mode in variants(fused, mha, naive, x).values():
        for name, fn in mode.items():
            got, w = fn()
            torch.testing.assert_close(got, out, rtol=1e-4, atol=1e-5, msg=name)
            if w is not None:
                expected = weights.mean(dim=1) if name == "torch (averaged)" else weights
                torch.testing.assert_close(w, expected, rtol=1e-4, atol=1e-5, msg=name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--bias", action="store_true")
    parser.add_argument("--compile", action="store_true", help="add the compiled mode")
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    parser.add_argument("--only-compiled", action="store_true", help="time the compiled mode only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(_common.machine())
    fused, mha, naive = make_modules(bias=args.bias)
    x = torch.randn(8, 256, 512, generator=torch.Generator().manual_seed(1))  # (N, L, E)
    check_equal(fused, mha, naive, x)
    print("outputs and weights of every variant equal\n")
    label = f"MHA N=8 L=256 E=512 H=8, bias={args.bias}"
    results, ok = {}, True
    modes = {} if args.only_compiled else variants(fused, mha, naive, x)
    if args.compile or args.only_compiled:
        modes["compiled"] = compiled_variants(fused, mha, x, args.backend)
    for mode, fns in modes.items():
        results[mode] = _common.rounds(fns, label, mode, n=args.rounds, threads=args.threads)
    _common.compare([m for mode in results.values() for ms in mode.values() for m in ms])
    print()
    for mode, times in results.items():
        if mode == "compiled":
            for a, b in [
                ("attnlib compiled", "attnlib eager"),
                ("attnlib compiled", "torch (per head)"),
                ("attnlib eager", "torch (per head)"),
            ]:
                print(_common.ratio_line(f"{mode}: {a} / {b}", _common.ratio(times[a], times[b])))
            continue
        torch_names = [n for n in times if n.startswith("torch") and "seq-first" not in n]
        fastest = min(torch_names, key=lambda n: _common.ratio(times[n], times[torch_names[0]])[0])
        for name in times:
            if name.startswith("attnlib"):
                goal = "<= 1.05" if name == "attnlib fused" else ""
                r = _common.ratio(times[name], times[fastest])
                line = _common.ratio_line(f"{mode}: {name} / {fastest}", r, goal)
                ok &= not line.endswith("FAIL")
                print(line)
        for name in times:
            if "seq-first" in name:  # information: torch's module without its transposes
                r = _common.ratio(times["attnlib fused"], times[name])
                print(_common.ratio_line(f"{mode}: attnlib fused / {name}", r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
