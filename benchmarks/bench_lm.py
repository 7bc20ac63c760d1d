"""The language model: cached against recomputed generation, and a training step against
the same stack built from ``nn.TransformerEncoderLayer``.

**Generation.** The book's model size (V = 5,629, E = 50, H = 5, 2 layers, ALiBi positions so
that any length works) decodes one token after a context of S tokens, two ways: **recompute**
runs the model on all S tokens (what ``generate(use_cache=False)`` does each step); **cache**
runs it on the newest token with a ``ModelCache`` holding S - 1 positions (reset before every
call). Both give the same logits (checked first). Goal at S = 512: cache at least 10x faster.

**Training step.** Forward, cross-entropy, backward and an AdamW step on a batch of 32
windows of 64 tokens, for ``attnlib.LanguageModel`` (learned positions) and for a model of the
same sizes whose blocks are ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")``
with the same causal mask (``is_causal=True``). Goal: attnlib's step at most 1.2x PyTorch's.
Ratios are medians over interleaved rounds, with their range.

Usage::

    python benchmarks/bench_lm.py [--threads 2] [--rounds 5]
"""

from __future__ import annotations

import argparse

import _common
import torch
import torch.nn.functional as F
from attnlib import LanguageModel, causal_mask
from torch import nn

V, E, H, LAYERS = 5629, 50, 5, 2


def generation_calls(S: int):
    """Recompute vs cache for the step after S - 1 tokens (functions of no argument)."""
    torch.manual_seed(0)
    lm = LanguageModel(V, E, H, LAYERS, max_len=S, positions="alibi").eval()
    lm.requires_grad_(False)
    ids = torch.randint(0, V, (1, S))
    cache = lm.new_cache()
    lm(ids[:, :-1], cache=cache)  # prefill S - 1 tokens
    kept = [(c.key, c.value, c.length) for c in cache.layers]

    def recompute():
        return lm(ids)[0][:, -1]

    def cached():
        for c, (k, v, n) in zip(cache.layers, kept):
            c.key, c.value, c.length = k, v, n
        return lm(ids[:, -1:], cache=cache)[0][:, -1]

    torch.testing.assert_close(cached(), recompute(), atol=1e-4, rtol=1e-4)
    return {"recompute": recompute, "cache": cached}, cache


class TorchStack(nn.Module):
    """The same model with PyTorch's encoder layers (tied read-out, learned positions)."""

    def __init__(self, max_len: int):
        super().__init__()
        self.token_embedding = nn.Embedding(V, E)
        self.position_embedding = nn.Embedding(max_len, E)
        layer = nn.TransformerEncoderLayer(
            E, H, 4 * E, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(E)
        self.lm_head = nn.Linear(E, V, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids):
        L = ids.shape[1]
        x = self.token_embedding(ids) + self.position_embedding(torch.arange(L))
        mask = nn.Transformer.generate_square_subsequent_mask(L)
        x = self.encoder(x, mask=mask, is_causal=True)
        return self.lm_head(self.ln_f(x)), None


def training_calls(N: int = 32, L: int = 64):
    torch.manual_seed(0)
    ids = torch.randint(0, V, (N, L + 1))
    models = {
        "attnlib": LanguageModel(V, E, H, LAYERS, max_len=L),
        "nn.TransformerEncoderLayer": TorchStack(L),
    }
    calls = {}
    for name, model in models.items():
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model=model, optimizer=optimizer):
            logits, _ = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss

        calls[name] = step
    assert causal_mask(3).dtype == torch.bool
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(_common.machine() + f"; V={V}, E={E}, H={H}, {LAYERS} layers, float32\n")
    ok = True
    for S in (64, 128, 256, 512):
        calls, cache = generation_calls(S)
        m = _common.rounds(calls, "one decoding step", f"S={S}", n=args.rounds, min_run_time=0.1)
        _common.compare(m)
        goal = ">= 10" if S == 512 else ""
        line = _common.ratio_line(
            f"S={S}: recompute / cache", _common.ratio(m["recompute"], m["cache"]), goal
        )
        print(line + f"; cache {cache.nbytes / cache.length:.0f} bytes per token")
        ok &= "FAIL" not in line
    m = _common.rounds(training_calls(), "training step", "N=32, L=64", n=args.rounds)
    _common.compare(m)
    line = _common.ratio_line(
        "attnlib / nn.TransformerEncoderLayer",
        _common.ratio(m["attnlib"], m["nn.TransformerEncoderLayer"]),
        "<= 1.2",
    )
    print(line)
    ok &= "FAIL" not in line
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
