"""Train the pointer heads of the chapter "Training attention"; write data/pointer_heads.json.

The chapter trains an :class:`attnlib.MultiHeadAttention` ``(50, 2)`` on GloVe vectors so that
head 0 points from every word of a sentence to its country's capital and head 1 to the country.
This script repeats that training with the same data, seeds and settings (the code below follows
the chapter's cells) and writes the two trained projections for the attention explorer, which
runs the heads in the reader's browser. The chapter loads the file and checks it against the
heads it has just trained (weights to within 1e-3, the same pointer on 2,000 test sentences),
so a file that no longer matches the chapter fails the chapter's tests.

The file holds ``embed_dim``, ``num_heads``, ``head_names`` and PyTorch's stored blocks
``q_proj_weight`` (:math:`W_Q^\\top`) and ``k_proj_weight`` (:math:`W_K^\\top`) as nested lists.
It is written atomically (a temporary file renamed over the old one). Training takes a few
seconds on one CPU thread and is deterministic: running the script twice gives a
byte-identical file.

Usage (from the project root)::

    python scripts/train_pointer_heads.py                 # writes data/pointer_heads.json
    python scripts/train_pointer_heads.py --out /tmp/heads.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import attnlib
import torch
import torch.nn.functional as F
from _atomic import write_atomic
from attnlib.experiment import reproducible

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "pointer_heads.json"

# (country, nationality, capital): the chapter's 40 triples, in the chapter's order
TRIPLES = [
    tuple(t.split())
    for t in """
france french paris; germany german berlin; italy italian rome; spain spanish madrid;
japan japanese tokyo; china chinese beijing; russia russian moscow; egypt egyptian cairo;
greece greek athens; portugal portuguese lisbon; austria austrian vienna;
poland polish warsaw; sweden swedish stockholm; norway norwegian oslo;
finland finnish helsinki; denmark danish copenhagen; ireland irish dublin;
hungary hungarian budapest; turkey turkish ankara; iran iranian tehran; iraq iraqi baghdad;
syria syrian damascus; lebanon lebanese beirut; jordan jordanian amman;
kenya kenyan nairobi; thailand thai bangkok; vietnam vietnamese hanoi;
indonesia indonesian jakarta; philippines filipino manila; cuba cuban havana;
peru peruvian lima; colombia colombian bogota; venezuela venezuelan caracas;
canada canadian ottawa; australia australian canberra; pakistan pakistani islamabad;
afghanistan afghan kabul; nepal nepalese kathmandu; ukraine ukrainian kiev;
belgium belgian brussels
""".replace("\n", " ").split(";")
]
HEAD_NAMES = ["capital", "country"]
PAIRS = 2  # triples per sentence: 6 words
TRAIN_COUNTRIES = 28  # the other 12 are never seen in training
STEPS, BATCH, LR = 400, 64, 3e-3
SPLIT_SEED, INIT_SEED, TRAIN_SEED = 0, 0, 1


def capital_batch(triple_vectors, ids, n, generator):
    """``n`` sentences of two shuffled triples: inputs (n, 6, 50), targets (n, 2 heads, 6)."""
    pick = torch.rand(n, len(ids), generator=generator).argsort(-1)[:, :PAIRS]  # (n, 2)
    chosen = ids[pick]  # (n, 2) triple numbers
    order = torch.rand(n, 3 * PAIRS, generator=generator).argsort(-1)  # (n, 6) slot of each word
    slots = triple_vectors[chosen].reshape(n, 3 * PAIRS, 50)  # (n, 6, 50) in slot order
    X = slots.gather(1, order.unsqueeze(-1).expand(-1, -1, 50))  # (n, 6, 50) shuffled
    position_of_slot = order.argsort(-1)  # (n, 6): inverse permutation
    first_slot = 3 * (order // 3)  # (n, 6): slot of the country of each word's triple
    capital = position_of_slot.gather(1, first_slot + 2)  # (n, 6)
    country = position_of_slot.gather(1, first_slot)  # (n, 6)
    return X, torch.stack([capital, country], dim=1)


def pointer_loss(model, X, targets):
    """Negative log of the weight each head puts on the right word."""
    _, weights = model(X)  # (N, 2, 6, 6)
    log_weights = weights.clamp_min(1e-12).log()
    return F.nll_loss(log_weights.reshape(-1, 3 * PAIRS), targets.reshape(-1))


def train_heads() -> attnlib.MultiHeadAttention:
    """The chapter's ``retriever``: W_Q and W_K of MultiHeadAttention(50, 2), trained."""
    glove = attnlib.load_glove()
    triple_vectors = torch.stack([glove.matrix(t) for t in TRIPLES])  # (40, 3, 50)
    split = torch.randperm(len(TRIPLES), generator=torch.Generator().manual_seed(SPLIT_SEED))
    train_ids = split[:TRAIN_COUNTRIES]
    torch.manual_seed(INIT_SEED)
    model = attnlib.MultiHeadAttention(50, 2)
    generator = torch.Generator().manual_seed(TRAIN_SEED)
    optimiser = torch.optim.Adam(model.parameters(), lr=LR)
    with reproducible():
        for _ in range(STEPS):
            loss = pointer_loss(model, *capital_batch(triple_vectors, train_ids, BATCH, generator))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model


def write_pointer_heads(model: attnlib.MultiHeadAttention, path: Path) -> None:
    """The explorer's file: the stored q_proj and k_proj weights (W_Q^T, W_K^T) as lists."""
    state = model.state_dict()
    heads = {
        "embed_dim": model.embed_dim,
        "num_heads": model.num_heads,
        "head_names": HEAD_NAMES,
        "q_proj_weight": state["q_proj.weight"].tolist(),
        "k_proj_weight": state["k_proj.weight"].tolist(),
    }
    write_atomic(path, json.dumps(heads))  # the old file or the new one, never half of one


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT})")
    args = parser.parse_args(argv)
    write_pointer_heads(train_heads(), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
