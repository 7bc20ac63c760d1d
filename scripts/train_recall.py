"""Multi-query associative recall (MQAR, Arora et al. 2023, "Zoology"): which attention
remembers, and how much memory it takes.

Each sequence lists ``PAIRS`` key-value pairs, then asks for every key again in a random
order; the model must say the value that followed the key: ``k1 v1 k2 v2 ... | k7 v7 k2 v2 ...``,
scored on the value after each asked key. Five token mixers, each in the same small model (the
induction model's scale: ``E = 64``, no MLP; four layers), with memories of several sizes:

- ``softmax``: causal softmax attention with RoPE, ``H = 2`` heads; its memory, the key-value
  cache, grows with the text: ``2 L E`` numbers a layer after ``L`` tokens;
- ``window``: the same, each token seeing its last ``w`` tokens only: ``2 w E``, for the
  windows of :data:`WINDOWS`;
- ``linear``: linear attention, a state of ``H (D^2 + D)`` numbers a layer whatever ``L`` is,
  ``D = E / H``: more heads, a smaller state (:data:`HEADS`);
- ``delta``: DeltaNet (the delta rule), ``H D^2``;
- ``hybrid``: three DeltaNet layers of ``H`` heads, then one softmax layer of 2 (Qwen3-Next's
  and Kimi Linear's 3:1).

Every block is ``x + Mixer(Conv(LN(x)))`` with a short causal depthwise convolution (4 tokens)
before every mixer, so that each can bind a key to the value after it in one layer (as Zoology,
DeltaNet and Qwen3-Next's linear layers do; attention could learn it with a previous-token head,
more slowly). Writes ``data/recall/results.json`` atomically; ``tests/test_recall.py`` checks it
against this script and replays the first steps of a run.

    .venv/bin/python scripts/train_recall.py                # everything (make recall), ~40 min
    .venv/bin/python scripts/train_recall.py --only delta --sizes 8 --out /tmp/recall
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _atomic import write_atomic
from attnlib import MultiHeadAttention, causal_mask
from attnlib.decoding import sliding_window_mask
from attnlib.experiment import machine
from attnlib.linear_attention import LinearAttention
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "recall"

KEYS = 64  # keys are tokens 1 .. 64, values 65 .. 128; token 0 is never used
PAIRS = 16  # key-value pairs per sequence, then as many queries: 4 * PAIRS - 1 inputs
E, LAYERS, CONV = 64, 4, 4
HEADS = (2, 4, 8, 16)  # of the linear layers: D = 32, 16, 8, 4
WINDOWS = (4, 8, 16, 32)
MIXERS = {
    "softmax": ("softmax",) * LAYERS,
    "window": ("window",) * LAYERS,
    "linear": ("linear",) * LAYERS,
    "delta": ("delta",) * LAYERS,
    "hybrid": ("delta", "delta", "delta", "softmax"),
}
# the sizes each mixer is trained at: heads of its linear layers, or window (softmax: 2 heads)
SIZES = {"softmax": (2,), "window": WINDOWS, "linear": HEADS, "delta": HEADS, "hybrid": HEADS}
TRAIN = dict(steps=1000, batch_size=32, lr=3e-3, weight_decay=0.1, warmup=0.1)
SEED, TEST_SEED, TEST_SIZE = 0, 1000, 1024
LOG_EVERY = 50
REPLAY_STEPS = 10


def recall_batch(n: int, generator: torch.Generator, pairs: int = PAIRS):
    """``n`` sequences and their targets: inputs ``(n, 4 pairs - 1)``, targets the same shape
    with ``-100`` (ignored) everywhere but after each asked key, where the target is its value."""
    keys = torch.stack([torch.randperm(KEYS, generator=generator)[:pairs] for _ in range(n)]) + 1
    values = torch.randint(KEYS + 1, 2 * KEYS + 1, (n, pairs), generator=generator)
    order = torch.stack([torch.randperm(pairs, generator=generator) for _ in range(n)])
    listed = torch.stack([keys, values], dim=2).flatten(1)  # (n, 2 pairs): k1 v1 k2 v2 ...
    asked = torch.stack([keys.gather(1, order), values.gather(1, order)], dim=2).flatten(1)
    sequence = torch.cat([listed, asked], dim=1)  # (n, 4 pairs)
    inputs, targets = sequence[:, :-1], sequence[:, 1:].clone()  # (n, 4 pairs - 1) each
    scored = torch.zeros_like(targets, dtype=torch.bool)
    scored[:, 2 * pairs :: 2] = True  # the input is an asked key, the target its value
    return inputs, targets.masked_fill(~scored, -100)


class Block(nn.Module):
    """``x + Mixer(Conv(LN(x)))``: one layer of the recall models. ``size``: the window of a
    ``"window"`` layer, the heads of a linear layer (softmax layers have 2 heads)."""

    def __init__(self, mixer: str, size: int):
        super().__init__()
        self.mixer, self.window = mixer, size if mixer == "window" else None
        self.ln = nn.LayerNorm(E)
        self.conv = nn.Conv1d(E, E, CONV, groups=E, padding=CONV - 1)  # causal: keep L outputs
        if mixer in ("softmax", "window"):
            self.attn = MultiHeadAttention(E, 2, positions="rope")
        else:
            self.attn = LinearAttention(E, size, rule=mixer, conv_size=0)

    def forward(self, x):
        L = x.shape[1]
        y = self.conv(self.ln(x).transpose(1, 2))[..., :L].transpose(1, 2)  # (N, L, E)
        if self.mixer == "softmax":
            return x + self.attn(y, mask=causal_mask(L), need_weights=False)[0]
        if self.mixer == "window":
            mask = sliding_window_mask(L, self.window)  # (L, L)
            return x + self.attn(y, mask=mask, need_weights=False)[0]
        return x + self.attn(y)

    def state_size(self, L: int) -> int:
        """Numbers one sequence keeps in this layer after ``L`` tokens (the convolution's last
        ``CONV - 1`` inputs too)."""
        conv = (CONV - 1) * E
        if self.mixer == "softmax":
            return conv + 2 * L * E
        if self.mixer == "window":
            return conv + 2 * min(L, self.window) * E
        return conv + self.attn.state_size


class RecallModel(nn.Module):
    def __init__(self, mixers, size: int):
        super().__init__()
        self.embedding = nn.Embedding(2 * KEYS + 1, E)
        self.blocks = nn.ModuleList(Block(m, size) for m in mixers)
        self.ln_f = nn.LayerNorm(E)
        self.head = nn.Linear(E, 2 * KEYS + 1)

    def forward(self, ids):
        h = self.embedding(ids)  # (N, L, E)
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))  # (N, L, V)

    def state_size(self, L: int) -> int:
        return sum(block.state_size(L) for block in self.blocks)


def make_model(name: str, size: int, seed: int = SEED) -> RecallModel:
    torch.manual_seed(seed)
    return RecallModel(MIXERS[name], size)


@torch.no_grad()
def accuracy(model, inputs, targets) -> float:
    """The share of asked keys whose value the model ranks first."""
    model.eval()
    predicted = model(inputs).argmax(-1)  # (N, L)
    scored = targets != -100
    model.train()
    return (predicted[scored] == targets[scored]).float().mean().item()


def train(model, *, steps, batch_size, lr, weight_decay, warmup, seed=SEED, stop_after=None):
    """AdamW with a linear warm-up then a cosine decay (one cycle); returns the loss of every
    step and the test accuracy every ``LOG_EVERY`` steps."""
    generator = torch.Generator().manual_seed(seed)
    test = recall_batch(TEST_SIZE, torch.Generator().manual_seed(TEST_SEED))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, lr, total_steps=steps, pct_start=warmup
    )
    losses, curve = [], {"step": [], "accuracy": []}
    for step in range(1, (stop_after or steps) + 1):
        inputs, targets = recall_batch(batch_size, generator)
        logits = model(inputs)  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % LOG_EVERY == 0 or step == steps:
            curve["step"].append(step)
            curve["accuracy"].append(accuracy(model, *test))
    return losses, curve


def run(name: str, size: int, log=print) -> dict:
    model = make_model(name, size)
    start = time.perf_counter()
    losses, curve = train(model, **TRAIN)
    seconds = time.perf_counter() - start
    L = 4 * PAIRS - 1
    record = {
        "mixers": list(MIXERS[name]),
        "size": size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "state_size": model.state_size(L),
        "accuracy": curve["accuracy"][-1],
        "curve": curve,
        "losses": losses[:: LOG_EVERY // 5],
        "replay_losses": losses[:REPLAY_STEPS],
        "seconds": seconds,
        "threads": torch.get_num_threads(),
    }
    log(
        f"{name} {size}: accuracy {record['accuracy']:.3f}, state {record['state_size']:,} "
        f"numbers, {seconds:.0f} s"
    )
    return record


def settings() -> dict:
    return {
        "keys": KEYS,
        "pairs": PAIRS,
        "embed_dim": E,
        "layers": LAYERS,
        "conv": CONV,
        "mixers": {k: list(v) for k, v in MIXERS.items()},
        "sizes": {k: list(v) for k, v in SIZES.items()},
        "train": TRAIN,
        "seed": SEED,
        "test_seed": TEST_SEED,
        "test_size": TEST_SIZE,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(MIXERS), default=list(MIXERS))
    parser.add_argument("--sizes", nargs="+", type=int, help="default: each mixer's SIZES")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--merge", nargs="+", type=Path, help="merge these --out folders")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.merge:
        results = {"settings": settings(), "machine": machine(), "runs": {}}
        for folder in args.merge:
            part = json.loads((folder / "results.json").read_text())
            if part["settings"] != results["settings"]:
                raise SystemExit(f"{folder}: made with other settings; cannot merge")
            for name, by_width in part["runs"].items():
                results["runs"].setdefault(name, {}).update(by_width)
    else:
        results = {"settings": settings(), "machine": machine(), "runs": {}}
        for name in args.only:
            for size in args.sizes or SIZES[name]:
                results["runs"].setdefault(name, {})[str(size)] = run(name, size)
    results["runs"] = {
        name: dict(sorted(results["runs"][name].items(), key=lambda kv: int(kv[0])))
        for name in MIXERS
        if name in results["runs"]
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "results.json", json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
