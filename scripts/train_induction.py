"""Train the induction model of the chapter "What a head computes" and save it for the explorer.

The model and its training are exactly the chapter's (``chapters/induction_heads.ipynb``): an
attention-only :class:`attnlib.LanguageModel` with 2 layers of 2 heads, ``E = 64``, rotary
positions, no biases, an untied read-out, over 64 tokens plus a start token ``BOS`` (index 64),
trained with seed 0 for 1,000 AdamW steps on sequences ``BOS, T random tokens, the same T tokens``
(``T`` drawn from 6..16 at every step). One thread: the same numbers on every run.

Writes, atomically (a temporary file, then ``os.replace``):

* ``data/induction/model.pt``: the state dict (float32);
* ``data/induction/config.json``: the model's settings, the training settings, and what the
  trained model measures on the chapter's test batch (losses of the two copies, the heads'
  previous-token and induction scores), which ``tests/test_induction_model.py`` checks.

    .venv/bin/python scripts/train_induction.py              # make induction-model
    .venv/bin/python scripts/train_induction.py --out /tmp/induction
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _atomic import write_atomic
from attnlib import LanguageModel

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "induction"

V, BOS = 64, 64  # tokens 0..63, and a start token with index 64
T_MIN, T_MAX = 6, 16  # the length of the repeated block
MAX_LEN = 2 * T_MAX + 1
E, H, LAYERS = 64, 2, 2
D = E // H
SEED, STEPS, LR, WEIGHT_DECAY, BATCH = 0, 1000, 1e-3, 0.01, 32
TEST_SEED, TEST_N, TEST_T = 1000, 256, 12

CONFIG = dict(
    vocab_size=V + 1,
    embed_dim=E,
    num_heads=H,
    num_layers=LAYERS,
    max_len=MAX_LEN,
    positions="rope",
    mlp_ratio=0,
    tie_weights=False,
    bias=False,
)


def new_model(seed: int = SEED) -> LanguageModel:
    torch.manual_seed(seed)  # the initial weights
    return LanguageModel(**{k: v for k, v in CONFIG.items()})


def repeated_batch(n: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """n sequences: BOS, T random tokens, the same T tokens again -> (n, 2T + 1)."""
    tokens = torch.randint(0, V, (n, T), generator=generator)  # (n, T)
    return torch.cat([torch.full((n, 1), BOS), tokens, tokens], dim=1)


def test_batch() -> torch.Tensor:
    """The chapter's fixed test batch, (256, 25)."""
    return repeated_batch(TEST_N, TEST_T, torch.Generator().manual_seed(TEST_SEED))


def half_losses(model: LanguageModel, ids: torch.Tensor) -> tuple[float, float]:
    """Mean cross-entropy (nats) of the first copy, and of the second without its first token."""
    T = (ids.shape[1] - 1) // 2
    with torch.no_grad():
        logits, _ = model(ids[:, :-1])  # (N, 2T, V + 1)
    nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (N, 2T)
    return nll[:, :T].mean().item(), nll[:, T + 1 :].mean().item()


def head_scores(model: LanguageModel, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and induction score of every head: two (layers, H) tensors."""
    T = (ids.shape[1] - 1) // 2
    with torch.no_grad():
        _, weights = model(ids, need_weights=True)  # layers x (N, H, L, L)
    t = torch.arange(1, ids.shape[1])
    s = torch.arange(T + 1, 2 * T + 1)
    previous = torch.stack([w[:, :, t, t - 1].mean(dim=(0, 2)) for w in weights])
    induction = torch.stack([w[:, :, s, s - T + 1].mean(dim=(0, 2)) for w in weights])
    return previous, induction


def train(seed: int = SEED, steps: int = STEPS) -> LanguageModel:
    """The chapter's training loop (without its logging, which draws nothing at random)."""
    model = new_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    generator = torch.Generator().manual_seed(seed)  # the training data
    for _ in range(steps):
        T = int(torch.randint(T_MIN, T_MAX + 1, (), generator=generator))
        ids = repeated_batch(BATCH, T, generator)  # (32, 2T + 1)
        logits, _ = model(ids[:, :-1])  # (32, 2T, V + 1)
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def measure(model: LanguageModel) -> dict:
    """What the chapter prints about the trained model, on its test batch."""
    ids = test_batch()
    first, repeated = half_losses(model, ids)
    previous, induction = head_scores(model, ids)
    return {
        "first_copy_loss": first,
        "repeated_loss": repeated,
        "previous_token_score": previous.tolist(),  # [layer][head]
        "induction_score": induction.tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write (data/induction)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: the same sums in the same order on every run
    start = time.perf_counter()
    model = train()
    seconds = time.perf_counter() - start
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    config = {
        "model": CONFIG,
        "tokens": {"vocab": V, "bos": BOS, "T_min": T_MIN, "T_max": T_MAX},
        "train": {
            "seed": SEED,
            "steps": STEPS,
            "lr": LR,
            "weight_decay": WEIGHT_DECAY,
            "batch_size": BATCH,
            "threads": 1,
        },
        "test_batch": {"seed": TEST_SEED, "n": TEST_N, "T": TEST_T},
        "measured": measure(model),
    }
    write_atomic(args.out / "model.pt", buffer.getvalue())
    text = json.dumps(config, indent=1) + "\n"
    write_atomic(args.out / "config.json", text.encode("utf-8"))
    print(f"trained in {seconds:.1f} s; wrote {args.out}/model.pt and config.json")
    print(json.dumps(config["measured"], indent=1))


if __name__ == "__main__":
    main()
