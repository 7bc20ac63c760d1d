"""Gemma 3 270M on the CPU: attnlib's model against transformers' on the same weights.

**The models.** attnlib's is :func:`attnlib.gemma3.load_gemma3` (float32, from the converted
GGUF file in the cache). transformers' is ``Gemma3ForCausalLM(Gemma3TextConfig(**config))``
given the state dict of :func:`attnlib.gemma3.read_gguf` (the same file dequantized to float32,
Hugging Face's names; about 30 s), or with ``--from-gguf`` transformers' own GGUF loader,
``Gemma3ForCausalLM.from_pretrained(folder, gguf_file=...)`` (about 75 s). Both run in eval
mode under ``torch.no_grad()``; transformers' attention is its default (``sdpa``).

**The prompt** is not text: seeded random ids in 1000 .. 199999 with ``<bos>`` (2) first, the
same for both models (the tokenizer does not enter the timing; any ids take the same time).
Before timing, each call's result is checked: the logits of the two models agree (largest
difference at most 1e-4 of the largest logit) and greedy generation gives the same tokens.

**Prompt tokens/s**: one forward pass over L = 128 and 512 tokens, no cache
(transformers: ``use_cache=False``). The main rows compare like with like: transformers'
``logits_to_keep=1`` against attnlib's ``model.read_out(model.hidden_states(ids)[-1][:, -1])``
(the last position's logits only); the all-logits rows (an (L, 262144) float32 tensor,
``model(ids)`` against transformers' default) follow. **Generated tokens/s**: greedy decoding
of 32 new tokens after a 64-token prompt, with caches, the whole call timed (prefill included):
``model.generate(ids, 32, temperature=0)`` against ``hf.generate(ids, max_new_tokens=32,
min_new_tokens=32, do_sample=False)``.

Times are medians of ``torch.utils.benchmark`` measurements in interleaved rounds; tokens/s is
tokens over a round's median time, given as the median over rounds and their range. Ratios are
attnlib / transformers in tokens/s (transformers' time over attnlib's, per round): median and
range. Goal: at least 0.8x on the prompt (last position) and generation rows.

Usage::

    python benchmarks/bench_gemma3.py [--threads 2] [--rounds 5] [--from-gguf] [--quick]
"""

from __future__ import annotations

import argparse
import time

import _common
import numpy as np
import torch

BOS = 2
GOAL = ">= 0.8"


def prompt_ids(length: int, seed: int = 0) -> torch.Tensor:
    """``(1, length)`` seeded random ids in 1000 .. 199999, ``<bos>`` first."""
    ids = torch.randint(1000, 200_000, (1, length), generator=torch.Generator().manual_seed(seed))
    ids[0, 0] = BOS
    return ids


def load_transformers(from_gguf: bool):
    """transformers' Gemma 3 270M in float32 (eval mode) on the GGUF file's weights."""
    import attnlib.gemma3
    import transformers
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    transformers.logging.set_verbosity_error()
    if from_gguf:
        p = attnlib.gemma3.gguf_path()
        hf = Gemma3ForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)
        how = "Gemma3ForCausalLM.from_pretrained(gguf_file=...)"
    else:
        config, state_dict, _ = attnlib.gemma3.read_gguf()
        hf = Gemma3ForCausalLM(Gemma3TextConfig(**config))
        state = {f"model.{k}": v for k, v in state_dict.items()}
        missing, unexpected = hf.load_state_dict(state, strict=False)
        assert not unexpected and missing == ["lm_head.weight"], (missing, unexpected)
        assert hf.lm_head.weight is hf.model.embed_tokens.weight  # tied
        how = "Gemma3ForCausalLM(Gemma3TextConfig(**config)) + read_gguf()'s state dict"
    hf.generation_config.pad_token_id = hf.config.pad_token_id
    return hf.eval().requires_grad_(False), how


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest ``|a - b|`` over the largest ``|b|``."""
    return ((a - b).abs().max() / b.abs().max()).item()


def prompt_calls(model, hf, L: int):
    """The four forward passes over an L-token prompt (functions of no argument), checked."""
    ids = prompt_ids(L)
    calls = {
        "attnlib, last position": lambda: model.read_out(model.hidden_states(ids)[-1][:, -1]),
        "transformers, logits_to_keep=1": lambda: hf(ids, use_cache=False, logits_to_keep=1).logits[
            :, -1
        ],
        "attnlib, all logits": lambda: model(ids)[0],
        "transformers, all logits": lambda: hf(ids, use_cache=False).logits,
    }
    out = {name: call() for name, call in calls.items()}  # (also the first warm-up)
    last = relative_difference(out["attnlib, last position"], out["transformers, logits_to_keep=1"])
    full = relative_difference(out["attnlib, all logits"], out["transformers, all logits"])
    assert out["attnlib, all logits"].shape == (1, L, model.vocab_size)
    assert last <= 1e-4 and full <= 1e-4, (last, full)
    print(
        f"L = {L}: logits equal (largest difference / largest logit: "
        f"last {last:.1e}, all {full:.1e})"
    )
    return calls


def generation_calls(model, hf, prompt: int, new: int):
    """Greedy generation of ``new`` tokens after ``prompt`` tokens, with caches, checked."""
    ids = prompt_ids(prompt, seed=1)
    calls = {
        "attnlib generate": lambda: model.generate(ids, new, temperature=0),
        "transformers generate": lambda: hf.generate(
            ids, max_new_tokens=new, min_new_tokens=new, do_sample=False
        ),
    }
    ours, theirs = (call() for call in calls.values())
    assert ours.shape == (1, prompt + new) and torch.equal(ours, theirs), (ours, theirs)
    print(f"generation: the same {new} tokens after {prompt}: {ours[0, prompt:].tolist()}")
    return calls


def tokens_per_s(tokens: int, measurements) -> str:
    rates = [tokens / m.median for m in measurements]
    return f"{np.median(rates):8.1f}  ({min(rates):.1f}-{max(rates):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--from-gguf", action="store_true", help="transformers' GGUF loader")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds, L = 128")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rounds = 2 if args.quick else args.rounds
    lengths = (128,) if args.quick else (128, 512)
    prompt, new = 64, (8 if args.quick else 32)

    import attnlib.gemma3

    start = time.perf_counter()
    model, _ = attnlib.gemma3.load_gemma3()
    model.requires_grad_(False)
    loaded = time.perf_counter()
    hf, how = load_transformers(args.from_gguf)
    print(_common.machine() + "; Gemma 3 270M (Q4_K_M dequantized), float32, batch 1")
    print(
        f"attnlib: load_gemma3() in {loaded - start:.0f} s; transformers: {how} in "
        f"{time.perf_counter() - loaded:.0f} s, attention {hf.config._attn_implementation!r}\n"
    )

    ok = True
    ratios, rows, all_times = [], [], []
    with torch.no_grad():
        for L in lengths:
            calls = prompt_calls(model, hf, L)
            m = _common.rounds(calls, "Gemma 3 270M forward", f"L={L}", rounds, 0.2, args.threads)
            all_times += [x for ms in m.values() for x in ms]
            rows += [(f"prompt L={L}, {name}", tokens_per_s(L, ms)) for name, ms in m.items()]
            for what, ours, theirs, goal in (
                ("last position", "attnlib, last position", "transformers, logits_to_keep=1", GOAL),
                ("all logits", "attnlib, all logits", "transformers, all logits", ""),
            ):
                r = _common.ratio(m[theirs], m[ours])  # time theirs / ours = tokens/s ours / theirs
                ratios.append(
                    _common.ratio_line(f"prompt L={L}, {what}: attnlib / transformers", r, goal)
                )
        calls = generation_calls(model, hf, prompt, new)
        m = _common.rounds(
            calls, "Gemma 3 270M generate", f"{prompt}+{new}", rounds, 0.2, args.threads
        )
        all_times += [x for ms in m.values() for x in ms]
        rows += [
            (f"generate {new} after {prompt}, {name}", tokens_per_s(new, ms))
            for name, ms in m.items()
        ]
        r = _common.ratio(m["transformers generate"], m["attnlib generate"])
        ratios.append(_common.ratio_line("generated tokens/s: attnlib / transformers", r, GOAL))

    print()
    _common.compare(all_times)
    print(f"\n{'tokens/s (median over rounds, range)':<58} tokens/s")
    for name, text in rows:
        print(f"{name:<58} {text}")
    print("\nattnlib / transformers in tokens/s (median of the per-round ratios, range):")
    for line in ratios:
        print(line)
        ok &= "FAIL" not in line
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
