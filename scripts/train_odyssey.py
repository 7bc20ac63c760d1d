"""Train the book's language model on Butler's Odyssey (and Iliad), and its comparison models.

Writes ``data/odyssey_lm/`` (atomically): ``model.pt`` (the state dict of the main model,
float32), ``vocab.txt`` (one word per line, index order, ``<unk>`` first) and
``results.json`` (the configuration, the loss curves of every model, their held-out
perplexities, the count baselines, and the first steps' losses that ``tests/test_odyssey_lm.py``
replays). Deterministic for a given thread count: every draw comes from a seeded generator.

    .venv/bin/python scripts/train_odyssey.py            # everything (make odyssey-lm)
    .venv/bin/python scripts/train_odyssey.py --only main --steps 200 --out /tmp/lm

The split: Odyssey books I-XXI and the whole Iliad train, Odyssey book XXII validates (early
stopping: the weights of the best validation perplexity are kept), books XXIII-XXIV are the
held-out test that the chapter reports.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _atomic import atomic_path, write_atomic
from attnlib import LanguageModel, load_glove
from attnlib.corpus import NGramModel, WordVocabulary, batches, perplexity, read_books, word_tokens

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
OUT = DATA / "odyssey_lm"

# The book's model and what each comparison model changes (the chapter's table).
MAIN = dict(
    embed_dim=50,
    num_heads=5,
    num_layers=2,
    positions="learned",
    mlp_ratio=4.0,
    dropout=0.05,
    glove=True,
    window=None,
    freeze_embeddings=False,
)
VARIANTS = {
    "main": {},
    "random_init": {"glove": False},
    "one_layer": {"num_layers": 1},
    "no_positions": {"positions": None},
    "no_attention": {"window": 1},
    "frozen_glove": {"freeze_embeddings": True},
}
TRAIN = dict(
    context=64,
    batch_size=32,
    lr=6e-3,
    weight_decay=0.1,
    steps=5000,
    eval_every=250,
    seed=0,
    replay_steps=20,
)

# the settings that train() takes as keyword arguments
TRAIN_ARGS = ("steps", "context", "batch_size", "lr", "weight_decay", "eval_every", "seed")


def load_splits():
    """Token lists of the three parts: train (Odyssey I-XXI + Iliad), valid (XXII), test."""
    odyssey = read_books(DATA / "odyssey.txt")
    iliad = read_books(DATA / "iliad.txt")
    books = list(odyssey.values())

    def tokens(texts):
        return [t for text in texts for t in word_tokens(text)]

    return tokens(books[:21] + list(iliad.values())), tokens(books[21:22]), tokens(books[22:])


def build_vocab(train_tokens) -> WordVocabulary:
    """Words seen at least twice in training that GloVe knows, most frequent first."""
    return WordVocabulary.from_tokens(train_tokens, min_count=2, known=load_glove())


def glove_matrix(vocab: WordVocabulary) -> torch.Tensor:
    """The GloVe vectors of the vocabulary, ``(V, 50)``; ``<unk>`` gets their mean."""
    glove = load_glove()
    vectors = glove.matrix(vocab.words[1:])  # (V - 1, 50)
    return torch.cat([vectors.mean(0, keepdim=True), vectors])  # (V, 50)


def make_model(config: dict, vocab: WordVocabulary, max_len: int) -> LanguageModel:
    torch.manual_seed(TRAIN["seed"])
    return LanguageModel(
        len(vocab),
        config["embed_dim"],
        config["num_heads"],
        config["num_layers"],
        max_len=max_len,
        positions=config["positions"],
        mlp_ratio=config["mlp_ratio"],
        dropout=config["dropout"],
        window=config["window"],
        embeddings=glove_matrix(vocab) if config["glove"] else None,
        freeze_embeddings=config["freeze_embeddings"],
    )


def train(
    model,
    train_ids,
    valid_ids,
    *,
    steps,
    context,
    batch_size,
    lr,
    weight_decay,
    eval_every,
    seed,
    log=print,
    stop_after=None,
):
    """AdamW with a linear warm-up and a cosine decay; keeps the best validation weights."""
    generator = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0}],
        lr=lr,
    )
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
        ),
    )
    curve = {"step": [], "train_loss": [], "valid_ppl": []}
    losses, best, best_state = [], math.inf, None
    replay = []
    model.train()
    start = time.perf_counter()
    for step in range(1, (stop_after or steps) + 1):
        x, y = batches(train_ids, context, batch_size, generator)
        logits, _ = model(x)  # (N, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step <= TRAIN["replay_steps"]:
            replay.append(loss.item())
        if step % eval_every == 0 or step == steps:
            valid = perplexity(model, valid_ids, context)
            curve["step"].append(step)
            curve["train_loss"].append(sum(losses) / len(losses))
            curve["valid_ppl"].append(valid)
            losses = []
            if valid < best:
                best = valid
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            log(
                f"  step {step:5d}  train loss {curve['train_loss'][-1]:.3f}  "
                f"valid ppl {valid:7.2f}  ({time.perf_counter() - start:.0f} s)"
            )
    if best_state is not None:
        model.load_state_dict(best_state)
    return curve, replay, best


def merge(folders: list[Path], out: Path) -> None:
    """One results.json (and model.pt, vocab.txt) from runs that trained parts of the models."""
    runs = [json.loads((f / "results.json").read_text()) for f in folders]
    results = dict(runs[0], models={})
    for folder, run in zip(folders, runs):
        for key in ("config", "train", "tokens", "counts"):
            if run[key] != results[key]:
                raise SystemExit(f"{folder}: its {key} differs from {folders[0]}'s; cannot merge")
        results["models"].update(run["models"])
        if "main" in run["models"]:
            state = torch.load(folder / "model.pt", weights_only=True)
            with atomic_path(out / "model.pt") as tmp:
                torch.save(state, tmp)
    write_atomic(out / "vocab.txt", (folders[0] / "vocab.txt").read_text(encoding="utf-8"))
    results["models"] = {
        name: results["models"][name] for name in VARIANTS if name in results["models"]
    }
    write_atomic(out / "results.json", json.dumps(results, indent=1) + "\n")
    print(f"merged {', '.join(results['models'])} into {out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=TRAIN["steps"])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--eval-every", type=int, default=TRAIN["eval_every"])
    for key in (
        "context",
        "batch_size",
        "lr",
        "weight_decay",
        "dropout",
        "num_heads",
        "num_layers",
    ):
        parser.add_argument("--" + key.replace("_", "-"), type=float, default=None)
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        help="combine the outputs of runs of --only subsets (in these folders) into --out",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.threads:
        torch.set_num_threads(args.threads)
    train_tokens, valid_tokens, test_tokens = load_splits()
    vocab = build_vocab(train_tokens)
    train_ids, valid_ids, test_ids = (
        vocab.encode(t) for t in (train_tokens, valid_tokens, test_tokens)
    )
    settings = dict(TRAIN, steps=args.steps, eval_every=args.eval_every)
    main_config = dict(MAIN)
    for key in ("context", "batch_size", "lr", "weight_decay"):
        if getattr(args, key) is not None:
            settings[key] = type(TRAIN[key])(getattr(args, key))
    for key in ("dropout", "num_heads", "num_layers"):
        if getattr(args, key) is not None:
            main_config[key] = type(MAIN[key])(getattr(args, key))
    print(
        f"vocabulary {len(vocab)} words; train {len(train_ids)}, valid {len(valid_ids)}, "
        f"test {len(test_ids)} tokens; threads {torch.get_num_threads()}"
    )
    results = {
        "config": main_config,
        "variants": VARIANTS,
        "train": settings,
        "tokens": {"train": len(train_ids), "valid": len(valid_ids), "test": len(test_ids)},
        "counts": {},
        "models": {},
    }
    for n in (1, 2, 3):
        counts = NGramModel(train_ids, n, len(vocab))
        results["counts"][f"{n}-gram"] = {
            "valid_ppl": counts.perplexity(valid_ids),
            "test_ppl": counts.perplexity(test_ids),
        }
        print(f"{n}-gram: {results['counts'][f'{n}-gram']}")
    for name in args.only:
        config = dict(main_config, **VARIANTS[name])
        print(f"{name}: {config}")
        model = make_model(config, vocab, settings["context"])
        t0 = time.perf_counter()
        curve, replay, best = train(
            model,
            train_ids,
            valid_ids,
            **{k: settings[k] for k in TRAIN_ARGS},
        )
        seconds = time.perf_counter() - t0
        test = perplexity(model, test_ids, settings["context"])
        train_ppl = perplexity(model, train_ids[:20000], settings["context"])
        print(
            f"{name}: best valid {best:.2f}, test {test:.2f}, train {train_ppl:.2f}, "
            f"{seconds:.0f} s"
        )
        results["models"][name] = {
            "config": config,
            "curve": curve,
            "replay_losses": replay,
            "valid_ppl": best,
            "test_ppl": test,
            "train_ppl_first_20000": train_ppl,
            "seconds": seconds,
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        if name == "main":
            state = {k: v.contiguous() for k, v in model.state_dict().items()}
            with atomic_path(args.out / "model.pt") as tmp:
                torch.save(state, tmp)
        # after every model, so that an interrupted run keeps the models it finished
        write_atomic(args.out / "vocab.txt", "\n".join(vocab.words) + "\n")
        write_atomic(args.out / "results.json", json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
