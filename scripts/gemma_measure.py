"""Gemma 3 270M (attnlib.gemma3) measured on what the book's small models cannot show: writes
``data/gemma3/results.json`` for the chapter "A real decoder" (about 30 minutes on 2 cores).

- **bits per byte** on the *Odyssey*'s test books (XXIII-XXIV, the split of
  ``scripts/train_odyssey.py``: the same bytes), each book read whole through the model's own
  caches in pieces of 512 tokens; and on text it cannot have read in training, the book's own
  prose (the markdown of three chapters, written in 2026, its first 40,000 bytes);
- **attention sinks**: the mass each head of each layer puts on the first token (``<bos>``),
  on 8 held-out passages of 512 tokens;
- **StreamingLLM** (Xiao et al., 2024): the first 4,096 tokens of the test books read a piece
  of 64 tokens at a time, the loss of every token, three ways: as trained (the global layers
  see everything), the global layers cut to a window of the last 512 tokens
  (``SinkCache(512, sinks=0)``), and the same window plus the first 4 tokens
  (``SinkCache(512, sinks=4)``); the local layers keep their own 512 (``RollingCache``);
- **induction**: 5 sequences of 100 random pieces repeated once: the loss on each copy and each
  head's induction score (attention from a token of the second copy to the token after its
  first occurrence);
- **passkey retrieval**: a five-digit key in *Odyssey* text at depths 10 %, 50 % and 90 % of
  contexts of 512, 1,024, 2,048 and 4,096 tokens (1x to 8x the local window), 2 keys each,
  with all layers and with the global layers cut to the window; a retrieval counts when all
  five digits are the model's greedy choices.

Usage::

    python scripts/gemma_measure.py [--quick] [--resume]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import torch
from _atomic import atomic_path
from attnlib import gemma3
from attnlib.corpus import read_books
from attnlib.decoding import KVCache, ModelCache, RollingCache, SinkCache

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
OUT = DATA / "gemma3" / "results.json"
PROSE_CHAPTERS = ("03_scaled_dot_product_attention", "induction_heads", "11_inference")
WINDOW, SINKS, PIECE = 512, 4, 64
PROSE_BYTES = 40_000
LENGTHS, DEPTHS, KEYS = (512, 1024, 2048, 4096), (0.1, 0.5, 0.9), 2


def test_books() -> list[str]:
    """Odyssey books XXIII and XXIV: train_odyssey's test split."""
    return list(read_books(DATA / "odyssey.txt").values())[22:]


def odyssey_ids(tok) -> list[int]:
    """The test books' ids, ``<bos>`` before each book."""
    return [i for book in test_books() for i in tok.encode(book)]


def filler_ids(tok) -> list[int]:
    """The pass-key filler: Odyssey books I and II (no ``<bos>``)."""
    return tok.encode("\n\n".join(list(read_books(DATA / "odyssey.txt").values())[:2]), False)


def book_prose(limit: int = PROSE_BYTES) -> str:
    """The markdown cells of three chapters of this book, joined by blank lines, up to the last
    whole cell within ``limit`` bytes."""
    text = ""
    for name in PROSE_CHAPTERS:
        nb = json.loads((ROOT / "chapters" / f"{name}.ipynb").read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                more = (text + "\n\n" if text else "") + "".join(cell["source"])
                if len(more.encode("utf-8")) > limit:
                    return text
                text = more
    return text


def caches(model, global_cache=None) -> ModelCache:
    """One cache per layer: ``RollingCache(512)`` in the local layers, ``global_cache()`` (a
    ``KVCache`` by default: everything) in the global ones."""
    make = global_cache or KVCache
    return ModelCache([RollingCache(w) if w else make() for w in model.windows])


@torch.no_grad()
def read(model, ids: list[int], cache: ModelCache, piece: int, score: bool = True):
    """Feed ``ids`` through ``cache`` ``piece`` tokens at a time; the nats of every token after
    the first (``score``), else the last residual stream of the last piece."""
    ids = torch.tensor(ids)
    nats = []
    for start in range(0, len(ids), piece):
        step = ids[start : start + piece]
        h = model.hidden_states(step[None], cache=cache)[-1][0]  # (l, E)
        if score:
            logits = model.read_out(h[:-1] if start + piece >= len(ids) else h)  # (l', V)
            targets = ids[start + 1 : start + 1 + len(logits)]
            logp = logits.log_softmax(-1)[torch.arange(len(targets)), targets]
            nats.append(-logp)
    return torch.cat(nats) if score else h


def bits_per_byte(model, tok, texts: list[str]) -> dict:
    """Each text read whole from ``<bos>``: nats of its tokens, its bytes, bits per byte."""
    total_nats, total_bytes, total_tokens = 0.0, 0, 0
    for text in texts:
        ids = tok.encode(text)  # <bos> first
        nats = read(model, ids, caches(model), WINDOW)
        total_nats += nats.double().sum().item()
        total_bytes += len(text.encode("utf-8"))
        total_tokens += len(ids) - 1
    return {
        "nats": total_nats,
        "tokens": total_tokens,
        "bytes": total_bytes,
        "bpb": total_nats / math.log(2) / total_bytes,
        "ppl_per_token": math.exp(total_nats / total_tokens),
    }


@torch.no_grad()
def sink_mass(model, tok, passages: list[list[int]]) -> list[list[float]]:
    """The mean attention each head of each layer puts on position 0, over every query after
    the first, averaged over the passages: ``[layer][head]``."""
    total = torch.zeros(model.num_layers, model.blocks[0].attn.num_heads, dtype=torch.float64)
    for ids in passages:
        _, weights = model(torch.tensor(ids)[None], need_weights=True)
        for i, w in enumerate(weights):  # (1, H, L, L)
            total[i] += w[0, :, 1:, 0].double().mean(-1)
    return (total / len(passages)).tolist()


def streaming(model, ids: list[int]) -> dict:
    """Per-token nats of ``ids`` read 64 tokens at a time, three ways (see the docstring)."""
    ways = {
        "as trained": None,
        "window": lambda: SinkCache(WINDOW, sinks=0),
        "window + 4 sinks": lambda: SinkCache(WINDOW, sinks=SINKS),
    }
    return {name: read(model, ids, caches(model, g), PIECE).tolist() for name, g in ways.items()}


@torch.no_grad()
def induction(model, seeds=range(5), T: int = 100) -> dict:
    """Loss on the first and second copy of ``T`` random pieces, and each head's score."""
    first, second, scores = [], [], []
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        block = torch.randint(1000, 200_000, (T,), generator=g)
        ids = torch.cat([torch.tensor([2]), block, block])[None]  # (1, 2T + 1)
        logits, weights = model(ids, need_weights=True)
        nats = -logits[0, :-1].log_softmax(-1)[torch.arange(2 * T), ids[0, 1:]]
        first.append(nats[: T - 1].mean().item())  # tokens 2 .. T: nothing to copy
        second.append(nats[T:].mean().item())  # the second copy: all of it can be copied
        q = torch.arange(T + 1, 2 * T + 1)  # queries of the second copy (positions)
        k = q - T + 1  # the token after the same token's first occurrence
        scores.append(torch.stack([w[0][:, q, k].mean(-1) for w in weights]))  # (layers, H)
    return {
        "T": T,
        "loss_first_copy": sum(first) / len(first),
        "loss_second_copy": sum(second) / len(second),
        "score": torch.stack(scores).mean(0).tolist(),
    }


def passkey_prompt(tok, filler: list[int], length: int, depth: float, key: str) -> tuple:
    """``<bos>``, an instruction, filler with the key at ``depth``, the question, the answer:
    ``length`` tokens in all; returns the ids and the answer's positions."""
    head = tok.encode("There is a pass key hidden in this text. Remember it.\n")
    needle = tok.encode(f" The pass key is {key}. Remember it: {key} is the pass key. ", False)
    tail = tok.encode("\nWhat is the pass key? The pass key is", False)
    answer = tok.encode(f" {key}", False)
    room = length - len(head) - len(needle) - len(tail) - len(answer)
    cut = int(room * depth)
    ids = head + filler[:cut] + needle + filler[cut:room] + tail + answer
    return ids, list(range(len(ids) - len(answer), len(ids)))


@torch.no_grad()
def passkey(model, tok, filler: list[int], lengths=LENGTHS, depths=DEPTHS, keys=KEYS) -> dict:
    out = {"lengths": list(lengths), "depths": list(depths), "keys": keys, "cells": []}
    g = torch.Generator().manual_seed(0)
    for length in lengths:
        for depth in depths:
            for trial in range(keys):
                key = "".join(str(d) for d in torch.randint(0, 10, (5,), generator=g).tolist())
                offset = 1000 * trial
                ids, answer = passkey_prompt(tok, filler[offset:], length, depth, key)
                for way in ("all layers", "no global"):
                    if way == "no global" and length <= WINDOW:
                        continue  # the same computation: every layer sees everything
                    # no global: the global layers keep the last 512 tokens too (a SinkCache
                    # without sinks, the cache that may stand in for a global layer's)
                    make = None if way == "all layers" else (lambda: SinkCache(WINDOW, sinks=0))
                    cache = caches(model, make)
                    read(model, ids[: answer[0] - 1], cache, WINDOW, score=False)
                    # the question's last token and the answer's tokens but the last
                    last = torch.tensor(ids[answer[0] - 1 : -1])[None]  # (1, A)
                    logits = model.read_out(model.hidden_states(last, cache=cache)[-1][0])
                    target = torch.tensor(ids[answer[0] :])  # (A,)
                    logp = logits.log_softmax(-1)[torch.arange(len(target)), target]
                    out["cells"].append(
                        {
                            "length": len(ids),
                            "depth": depth,
                            "key": key,
                            "way": way,
                            "right": int((logits.argmax(-1) == target).sum()),
                            "of": len(target),
                            "nats": -logp.sum().item(),
                        }
                    )
                    print(out["cells"][-1], flush=True)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run; writes nothing")
    parser.add_argument(
        "--resume", action="store_true", help="keep the measurements an unfinished run wrote"
    )
    args = parser.parse_args(argv)
    old = json.loads(OUT.read_text(encoding="utf-8")) if args.resume and OUT.exists() else {}
    torch.set_num_threads(min(2, torch.get_num_threads()))
    start = time.time()
    model, tok = gemma3.load_gemma3()
    books = test_books()
    ids = odyssey_ids(tok)
    filler = filler_ids(tok)
    results = {"model": "Gemma 3 270M, Q4_K_M dequantized to float32", "gguf": gemma3.GGUF_SHA256}
    if args.quick:
        print(passkey(model, tok, filler, lengths=(512,), depths=(0.5,), keys=1))
        print(induction(model, seeds=range(1), T=20)["loss_second_copy"])
        return
    timings = {}

    def step(name, fn):
        if args.resume and name in old:
            results[name], timings[name] = old[name], old["seconds"][name]
            return
        t = time.time()
        results[name] = fn()
        timings[name] = round(time.time() - t, 1)
        print(f"{name}: {timings[name]} s", flush=True)
        write(results | {"seconds": timings, "complete": False})  # a crash keeps what is done

    step("bpb_odyssey_test", lambda: bits_per_byte(model, tok, books))
    step("bpb_book_prose", lambda: bits_per_byte(model, tok, [book_prose()]))
    passages = [ids[s : s + WINDOW] for s in range(0, 8 * WINDOW, WINDOW)]
    passages = [[2] + p[1:] for p in passages]  # each passage begins with <bos>
    step("sink_mass", lambda: sink_mass(model, tok, passages))
    step("streaming", lambda: streaming(model, ids[:4096]))
    step("induction", lambda: induction(model))
    step("passkey", lambda: passkey(model, tok, filler))
    results["seconds"] = timings | {"total": round(sum(timings.values()), 1)}
    results["machine"] = f"{platform.machine()}, {torch.get_num_threads()} threads"
    write(results | {"complete": True})
    print(f"wrote {OUT} in {time.time() - start:.0f} s")


def write(results: dict) -> None:
    with atomic_path(OUT) as tmp:
        tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
