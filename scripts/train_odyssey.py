"""Train the book's language models on Butler's Odyssey (and Iliad): word and byte-level BPE.

Writes ``data/odyssey_lm/`` (atomically): ``model.pt`` (the main word model of seed 0, float32),
``vocab.txt`` (its words, index order, ``<unk>`` first), ``bpe_model.pt`` (the BPE model of
seed 0), ``sink_model.pt``, ``gate_model.pt``, ``gated_deltanet_model.pt`` and
``hybrid_model.pt`` (:data:`WEIGHTS`), ``merges.txt`` (the BPE
merges, learned on the training books by :func:`attnlib.bpe.train_bpe`) and ``results.json``:
the settings, every run (model x seed: its loss curve, validation and test scores, seconds,
threads and machine), and the count models. ``tests/test_odyssey_lm.py`` checks the files
against this script.

    .venv/bin/python scripts/train_odyssey.py                     # everything (make odyssey-lm)
    .venv/bin/python scripts/train_odyssey.py --only main --seeds 0 --steps 200 --out /tmp/lm
    .venv/bin/python scripts/train_odyssey.py --merge /tmp/a /tmp/b --out data/odyssey_lm
    torchrun --nproc_per_node 2 scripts/train_odyssey.py ...      # several processes (DDP)
    .venv/bin/python scripts/train_odyssey.py --device cuda ...   # on a GPU

The split: Odyssey books I-XXI and the whole Iliad train, Odyssey book XXII validates, books
XXIII-XXIV are the held-out test. Each run trains for a fixed number of steps (warm-up, then a
cosine decay to zero) and keeps its last weights: nothing is chosen on the validation text
but the count models' discount and the mixture weight. Scores read the text in windows of
``context`` tokens that start every ``context // 2`` tokens (:func:`attnlib.corpus.
token_log_probs`), so every token is predicted from at least half a context.

Under ``torchrun`` every process draws the same global batch from the same seeded generator
and trains on its share of it; DistributedDataParallel averages the gradients (gloo on CPUs,
NCCL on GPUs), so N processes take the same steps as one, up to float rounding (dropout
draws its own masks in each process). Only process 0 writes files.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _atomic import atomic_path, write_atomic
from attnlib import LanguageModel, MultiHeadAttention, load_glove
from attnlib.bpe import BPETokenizer, train_bpe
from attnlib.corpus import (
    CorpusVocabulary,
    NGramModel,
    batches,
    perplexity,
    read_books,
    token_log_probs,
    word_tokens,
)
from attnlib.encoder import PostNormBlock
from attnlib.experiment import machine
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
OUT = DATA / "odyssey_lm"

# The book's model, how it trains, and what each comparison model changes (the chapter's table).
BASE = dict(
    tokens="words",
    embed_dim=50,
    num_heads=5,
    num_layers=2,
    positions="learned",
    mlp_ratio=4.0,
    norm="pre",
    dropout=0.05,
    glove=True,
    window=None,
    freeze_embeddings=False,
    context=64,
    batch_size=32,
    lr=6e-3,
    weight_decay=0.1,
    steps=3000,
)
VARIANTS = {
    "main": {},
    "random_init": {"glove": False},
    "one_layer": {"num_layers": 1},
    "no_positions": {"positions": None},
    "no_attention": {"window": 1},
    "no_mlp": {"mlp_ratio": 0.0},
    "post_ln": {"norm": "post"},
    # bytes and subwords: no GloVe, a 4x longer context, the same 2,048 tokens a step
    "bpe": {"tokens": "bpe", "glove": False, "context": 256, "batch_size": 8},
    # attention's memory (the chapter of that name): a local layer of 16 under a global one,
    # and multi-head latent attention caching 25 numbers a token and layer instead of 100
    "local_global": {"window": [16, None]},
    "mla": {"latent_dim": 25},
    # attention as 2025 models train it (the chapter "Attention in today's models"): QK-norm,
    # a soft cap of 10 (about half the main model's largest logit, 22.6: a cap that binds),
    # a learned sink logit per head, an output gate
    "qk_norm": {"qk_norm": True},
    "softcap": {"softcap": 10.0},
    "sink": {"sink": True},
    "gate": {"gate": True},
    # linear attention (the same chapter): every layer linear attention, DeltaNet or Gated
    # DeltaNet, and a hybrid of one Gated DeltaNet layer under one of softmax attention (the
    # two-layer model's version of Qwen3-Next's 3:1)
    "linear": {"linear": "linear"},
    "deltanet": {"linear": "delta"},
    "gated_deltanet": {"linear": "gated_delta"},
    "hybrid": {"linear": ["gated_delta", None]},
}
OPTIONS = (
    "latent_dim",
    "qk_norm",
    "softcap",
    "sink",
    "gate",
    "linear",
)  # off unless a variant sets them
SEEDS = (0, 1, 2)
# the weights kept in data/odyssey_lm/: file -> (model, seed). The sink and gate models of seed
# 2 (the first seed whose weights were kept) show their heatmaps in "Attention in today's models"
WEIGHTS = {
    "model.pt": ("main", 0),
    "bpe_model.pt": ("bpe", 0),
    "sink_model.pt": ("sink", 2),
    "gate_model.pt": ("gate", 2),
    "gated_deltanet_model.pt": ("gated_deltanet", 0),
    "hybrid_model.pt": ("hybrid", 0),
}
NUM_MERGES = 3000
EVAL_EVERY = 250
REPLAY_STEPS = 20  # the first losses of each run, which tests/test_odyssey_lm.py replays
NGRAM_ORDERS = {"words": (1, 2, 3, 4), "bpe": (1, 2, 3, 4, 5, 6)}
DISCOUNTS = tuple(round(0.05 * k, 2) for k in range(10, 20))  # 0.5 .. 0.95, tuned on valid
MIX_WEIGHTS = tuple(round(0.05 * k, 2) for k in range(21))  # lambda of the model, 0 .. 1


# ---- data ---------------------------------------------------------------------------------
def load_texts() -> dict[str, list[str]]:
    """The books of each part: train (Odyssey I-XXI + Iliad), valid (XXII), test (XXIII-XXIV)."""
    odyssey = list(read_books(DATA / "odyssey.txt").values())
    iliad = list(read_books(DATA / "iliad.txt").values())
    return {"train": odyssey[:21] + iliad, "valid": odyssey[21:22], "test": odyssey[22:]}


def load_splits():
    """Word tokens of the three parts: train, valid, test."""
    texts = load_texts()
    return tuple([t for book in texts[part] for t in word_tokens(book)] for part in texts)


def build_vocab(train_tokens) -> CorpusVocabulary:
    """Words seen at least twice in training that GloVe knows, most frequent first."""
    return CorpusVocabulary.from_tokens(train_tokens, min_count=2, known=load_glove())


def glove_matrix(vocab: CorpusVocabulary) -> torch.Tensor:
    """The GloVe vectors of the vocabulary, ``(V, 50)``; ``<unk>`` gets their mean."""
    vectors = load_glove().matrix(vocab.words[1:])  # (V - 1, 50)
    return torch.cat([vectors.mean(0, keepdim=True), vectors])  # (V, 50)


class Data:
    """The ids of every part, by words and (with ``bpe=True``) by BPE, and their sizes.

    ``merges``: BPE merges to use; ``None`` learns them from the training books.
    """

    def __init__(self, *, bpe: bool = True, merges=None):
        texts = load_texts()
        self.bytes = {p: sum(len(b.encode("utf-8")) for b in books) for p, books in texts.items()}
        words = {p: [t for b in books for t in word_tokens(b)] for p, books in texts.items()}
        self.words = {p: len(tokens) for p, tokens in words.items()}
        self.vocab = build_vocab(words["train"])
        self.ids = {"words": {p: self.vocab.encode(tokens) for p, tokens in words.items()}}
        self.bpe = None
        if bpe:
            self.bpe = BPETokenizer(
                train_bpe(texts["train"], NUM_MERGES) if merges is None else merges
            )
            self.ids["bpe"] = {
                p: torch.cat([self.bpe.encode(b) for b in books]) for p, books in texts.items()
            }

    def vocab_size(self, tokens: str) -> int:
        return len(self.vocab) if tokens == "words" else len(self.bpe)

    def summary(self) -> dict:
        return {
            "bytes": self.bytes,
            "words": self.words,
            "tokens": {kind: {p: len(i) for p, i in ids.items()} for kind, ids in self.ids.items()},
            "vocab_size": {kind: self.vocab_size(kind) for kind in self.ids},
            "num_merges": NUM_MERGES if self.bpe else None,
        }


# ---- models -------------------------------------------------------------------------------
def make_model(config: dict, vocab_size: int, seed: int, embeddings=None) -> LanguageModel:
    """The model of ``config``, initialised from ``seed`` (and GloVe's ``embeddings``)."""
    torch.manual_seed(seed)
    model = LanguageModel(
        vocab_size,
        config["embed_dim"],
        config["num_heads"],
        config["num_layers"],
        max_len=config["context"],
        positions=config["positions"],
        mlp_ratio=config["mlp_ratio"],
        dropout=config["dropout"],
        window=config["window"],
        embeddings=embeddings if config["glove"] else None,
        freeze_embeddings=config["freeze_embeddings"],
        **{k: config[k] for k in OPTIONS if k in config},
    )
    if config["norm"] == "post":
        E, H = config["embed_dim"], config["num_heads"]
        model.blocks = nn.ModuleList(
            PostNormBlock(E, H, mlp_ratio=config["mlp_ratio"], dropout=config["dropout"])
            for _ in range(config["num_layers"])
        )
        model.blocks.apply(model._init_weights)
    return model


# ---- training -----------------------------------------------------------------------------
@torch.no_grad()
def attention_stats(model, windows) -> dict | None:
    """The largest attention logit and the sink mass of ``model`` on ``windows`` ``(B, L)``.

    ``max_logit``: the largest ``q^ . k^ / sqrt(D)`` over the softmax layers, heads and the
    causal pairs (before any soft cap, :meth:`attnlib.MultiHeadAttention.scores`);
    ``sink_mass``: the mean weight on a window's first token, over those layers, heads and the
    queries ``1 .. L-1`` (the first query has no other token). Linear-attention layers have
    neither and are left out; ``None`` for a model with no pre-LN multi-head attention layer.
    """
    softmax = [
        i
        for i, b in enumerate(model.blocks)
        if isinstance(b.attn, MultiHeadAttention) and not isinstance(b, PostNormBlock)
    ]
    if not softmax:
        return None
    was_training = model.training
    model.eval()
    inputs = {}  # each softmax block's attention input, LN_1(x)
    hooks = [
        model.blocks[i].ln1.register_forward_hook(
            lambda m, args, out, i=i: inputs.__setitem__(i, out)
        )
        for i in softmax
    ]
    try:
        _, weights = model(windows, need_weights=True)  # per layer (B, H, L, L) or None
    finally:
        for h in hooks:
            h.remove()
    L = windows.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=windows.device).tril()
    max_logit = max(
        model.blocks[i].attn.scores(inputs[i]).masked_fill(~causal, float("-inf")).max().item()
        for i in softmax
    )
    sink_mass = torch.stack([weights[i][:, :, 1:, 0].mean() for i in softmax]).mean().item()
    model.train(was_training)
    return {"max_logit": max_logit, "sink_mass": sink_mass}


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
    seed,
    eval_every=EVAL_EVERY,
    log=print,
    stop_after=None,
):
    """AdamW, a linear warm-up over 5 % of the steps, then a cosine decay to zero.

    Returns ``(curve, losses)``: the mean training loss and the validation perplexity every
    ``eval_every`` steps, and the loss of every step. The model keeps its last weights. In a
    ``torch.distributed`` process group, each process trains on its share of every batch, and
    the losses are those of this process's share.
    """
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    if batch_size % world:
        raise SystemExit(f"batch_size={batch_size} must be divisible by the {world} processes")
    device = next(model.parameters()).device
    train_ids, valid_ids = train_ids.to(device), valid_ids.to(device)
    net = model
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    generator = torch.Generator().manual_seed(seed)  # on the CPU, as batches() wants
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
    curve = {"step": [], "train_loss": [], "valid_ppl": [], "max_logit": [], "sink_mass": []}
    count = min(32, len(valid_ids) // context)
    windows = valid_ids[: count * context].view(count, context)  # (B, L), for attention_stats
    losses = []
    model.train()
    start = time.perf_counter()
    for step in range(1, (stop_after or steps) + 1):
        x, y = batches(train_ids, context, batch_size, generator)  # (B, L) each, every process
        x, y = x.chunk(world)[rank], y.chunk(world)[rank]  # this process's share (B / world, L)
        logits, _ = net(x)  # (B / world, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP: the gradients are averaged over the processes here
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % eval_every == 0 or step == steps:
            valid = math.exp(-token_log_probs(model, valid_ids, context).mean().item())
            curve["step"].append(step)
            curve["train_loss"].append(sum(losses[-eval_every:]) / len(losses[-eval_every:]))
            curve["valid_ppl"].append(valid)
            stats = attention_stats(model, windows)
            for key in ("max_logit", "sink_mass"):
                curve[key].append(None if stats is None else stats[key])
            log(
                f"  step {step:5d}  train loss {curve['train_loss'][-1]:.3f}  "
                f"valid ppl {valid:7.2f}  max logit "
                f"{'-' if stats is None else format(stats['max_logit'], '.1f')}  "
                f"({time.perf_counter() - start:.0f} s)"
            )
    return curve, losses


def score(model, ids, context) -> dict:
    """Cross-entropy of ``ids`` (nats, summed) and the number of tokens it scores."""
    log_p = token_log_probs(model, ids, context)  # (T - 1,)
    return {"nats": -log_p.sum().item(), "tokens": log_p.numel()}


def measures(nats: float, tokens: int, part: str, data: Data) -> dict:
    """Perplexity per token and per word, and bits per byte, of ``nats`` over ``tokens``."""
    return {
        "ppl": math.exp(nats / tokens),
        "word_ppl": math.exp(nats / data.words[part]),
        "bpb": nats / math.log(2) / data.bytes[part],
    }


# ---- count models -------------------------------------------------------------------------
def count_scores(model: NGramModel, ids) -> dict:
    """Cross-entropy (nats, summed) of a count model on ``ids`` and how many tokens it scores."""
    return {"nats": math.log(perplexity(model, ids)) * len(ids), "tokens": len(ids)}


def count_models(data: Data, log=print) -> dict:
    """Kneser-Ney n-grams of both tokenisations with the book's discount 0.75, and the order
    and discount that score best on the validation text."""
    results = {}
    for kind, orders in NGRAM_ORDERS.items():
        ids, V = data.ids[kind], data.vocab_size(kind)
        models, valid = {}, {}
        for n in orders:
            counted = NGramModel(ids["train"], n, V)
            for delta in DISCOUNTS if n > 1 else (0.75,):
                models[n, delta] = model = counted.with_discount(delta)
                valid[n, delta] = count_scores(model, ids["valid"])
        tuned = min(valid, key=lambda key: valid[key]["nats"])
        rows = [(f"{n}-gram", (n, d)) for n, d in models if d == 0.75]
        rows.append((f"{tuned[0]}-gram, discount {tuned[1]}", tuned))
        out = {}
        for label, key in rows:
            test = count_scores(models[key], ids["test"])
            out[label] = {
                "n": key[0],
                "discount": key[1],
                "valid": valid[key] | measures(**valid[key], part="valid", data=data),
                "test": test | measures(**test, part="test", data=data),
            }
            log(f"{kind} {label}: test {out[label]['test']}")
        results[kind] = out
    return results


# ---- one run ------------------------------------------------------------------------------
def run(name: str, seed: int, data: Data, steps: int, overrides: dict, device, log=print):
    config = dict(BASE, **VARIANTS[name], **overrides)
    if steps is not None:
        config["steps"] = steps
    kind = config["tokens"]
    ids = data.ids[kind]
    embeddings = glove_matrix(data.vocab) if config["glove"] else None
    model = make_model(config, data.vocab_size(kind), seed, embeddings).to(device)
    t0 = time.perf_counter()
    curve, losses = train(
        model,
        ids["train"],
        ids["valid"],
        **{k: config[k] for k in ("steps", "context", "batch_size", "lr", "weight_decay")},
        seed=seed,
        log=log,
    )
    seconds = time.perf_counter() - t0
    record = {
        "config": config,
        "seed": seed,
        "curve": curve,
        "replay_losses": losses[:REPLAY_STEPS],
        "seconds": seconds,
        "threads": torch.get_num_threads(),
        "processes": dist.get_world_size() if dist.is_initialized() else 1,
        "device": str(device),
        "machine": machine(),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    for part in ("valid", "test"):
        s = score(model, ids[part].to(device), config["context"])
        record[part] = s | measures(**s, part=part, data=data)
    log(
        f"{name} seed {seed}: valid ppl {record['valid']['ppl']:.2f}, test ppl "
        f"{record['test']['ppl']:.2f}, test {record['test']['bpb']:.4f} bits/byte, {seconds:.0f} s"
    )
    return model, record


# ---- files --------------------------------------------------------------------------------
def save_results(out: Path, results: dict) -> None:
    results["runs"] = {
        name: dict(sorted(results["runs"][name].items(), key=lambda kv: int(kv[0])))
        for name in VARIANTS
        if name in results["runs"]
    }
    write_atomic(out / "results.json", json.dumps(results, indent=1) + "\n")


def save_weights(path: Path, model) -> None:
    """``model``'s weights on the CPU; tied weights stay one tensor, saved once (a copy of
    each from a GPU would save the embedding twice)."""
    copies = {}  # (address, shape) on the device -> its copy on the CPU
    state = {
        k: copies.setdefault((v.data_ptr(), v.shape), v.detach().cpu().contiguous())
        for k, v in model.state_dict().items()
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def merge(folders: list[Path], out: Path) -> None:
    """One results.json (and its weights) from the ``--out`` folders of several runs.

    The folders must share ``base``, and each folder's variants must be those of this script
    (a folder made before a variant was added has fewer: the result has :data:`VARIANTS`). The
    data summary, the merges and the count models come from the first folder that has count
    models, so that runs with ``--no-counts`` (each a few models and seeds) merge with one run
    of ``--only`` (no model).
    """
    parts = [json.loads((f / "results.json").read_text()) for f in folders]
    first = next((i for i, part in enumerate(parts) if part["counts"]), 0)
    variants = json.loads(json.dumps(VARIANTS))  # as JSON holds them: lists, not tuples
    results = dict(parts[first], variants=variants, runs={})
    for folder, part in zip(folders, parts):
        if part["base"] != results["base"]:
            raise SystemExit(f"{folder}: its base differs from {folders[0]}'s; cannot merge")
        for name, change in part["variants"].items():
            if variants.get(name) != change:
                raise SystemExit(
                    f"{folder}: its variant {name!r} is {change}, this script's is "
                    f"{variants.get(name)}; cannot merge"
                )
        for name, seeds in part["runs"].items():
            if name == "bpe" and part["data"] != results["data"]:
                raise SystemExit(f"{folder}: its BPE data differs from {folders[first]}'s")
            results["runs"].setdefault(name, {}).update(seeds)
        for weights, (name, seed) in WEIGHTS.items():
            if str(seed) in part["runs"].get(name, {}) and folder.resolve() != out.resolve():
                state = torch.load(folder / weights, weights_only=True)
                with atomic_path(out / weights) as tmp:
                    torch.save(state, tmp)
    for name in ("vocab.txt", "merges.txt"):
        write_atomic(out / name, (folders[first] / name).read_text(encoding="utf-8"))
    save_results(out, results)
    print(f"merged {', '.join(results['runs'])} into {out}")


def run_in_parallel(args) -> None:
    """``--jobs N``: each model and seed in its own process of one thread, N at a time (and
    the count models in one more), each into a folder of ``<--out>.runs/``; then merge them."""
    work = args.out.with_name(args.out.name + ".runs")  # kept, with each run's log
    command = [sys.executable, str(Path(__file__).resolve()), "--threads", "1"]
    if args.steps is not None:
        command += ["--steps", str(args.steps)]
    if args.dropout is not None:
        command += ["--dropout", str(args.dropout)]
    jobs = [("counts", work / "counts", ["--only", "--seeds"])]
    for seed in args.seeds:
        for name in args.only:
            options = ["--only", name, "--seeds", str(seed), "--no-counts"]
            jobs.append((f"{name}, seed {seed}", work / f"{name}-{seed}", options))

    def one(job):
        label, out, options = job
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "log.txt", "w") as log:
            done = subprocess.run([*command, *options, "--out", str(out)], stdout=log, stderr=log)
        print(f"{label}: {'done' if done.returncode == 0 else 'FAILED, see ' + str(out)}")
        return done.returncode

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        failed = sum(code != 0 for code in pool.map(one, jobs))
    if failed:
        raise SystemExit(f"{failed} runs failed; the others are in {work}")
    merge([out for _, out, _ in jobs], args.out)


# ---- main ---------------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", nargs="*", type=int, default=list(SEEDS))
    parser.add_argument("--steps", type=int, default=None, help="default: BASE's 3,000")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--no-counts", action="store_true", help="skip the count models")
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="combine the --out of runs into --out"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="run the models and seeds in this many processes"
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.jobs > 1:
        return run_in_parallel(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:  # started by torchrun
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        dist.init_process_group(backend)
    rank = dist.get_rank() if dist.is_initialized() else 0
    say = print if rank == 0 else (lambda *a, **k: None)
    overrides = {} if args.dropout is None else {"dropout": args.dropout}
    merges = None
    if (args.out / "merges.txt").exists():  # keep the merges of an earlier run in --out
        merges = BPETokenizer.load(args.out / "merges.txt").merges
    need_bpe = not args.no_counts or any(VARIANTS[n].get("tokens") == "bpe" for n in args.only)
    data = Data(bpe=need_bpe, merges=merges)
    say(f"data: {json.dumps(data.summary())}; threads {torch.get_num_threads()}")
    results = {
        "base": BASE,
        "variants": VARIANTS,
        "data": data.summary(),
        "eval": "windows of context tokens every context // 2 tokens; last weights",
        "counts": {},
        "runs": {},
    }
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "vocab.txt", "\n".join(data.vocab.words) + "\n")
        if data.bpe is not None:
            data.bpe.save(args.out / "merges.txt")
        if not args.no_counts:
            results["counts"] = count_models(data, log=say)
            save_results(args.out, results)
    for seed in args.seeds:
        for name in args.only:
            steps = {} if args.steps is None else {"steps": args.steps}
            say(f"{name}, seed {seed}: {dict(BASE, **VARIANTS[name], **overrides, **steps)}")
            model, record = run(name, seed, data, args.steps, overrides, device, log=say)
            if rank == 0:
                results["runs"].setdefault(name, {})[str(seed)] = record
                for weights, kept in WEIGHTS.items():
                    if kept == (name, seed):
                        save_weights(args.out / weights, model)
                save_results(args.out, results)  # after every run: an interrupted run keeps them
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
