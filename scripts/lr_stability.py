"""At which learning rate does the Odyssey model's attention break, and do QK-norm and
soft-capping keep it working? (Wortsman et al., 2023, "Small-scale proxies for large-scale
Transformer training instabilities": the attention logits grow without bound at large learning
rates, and QK-norm stops them.)

The book's word model (``scripts/train_odyssey.py``'s ``main``, ``qk_norm`` and ``softcap``)
trains for ``STEPS`` steps (the same warm-up and cosine decay, over 400 of its 3,000 steps) at each
learning rate of :data:`RATES`, seed 0, one thread. A run *diverges* when its validation
perplexity ends above that of the unigram counts (364 on the test books: it learned less than
word frequencies) or is not finite. Writes ``data/lr_stability.json`` atomically;
``tests/test_lr_stability.py`` checks it against this script.

    .venv/bin/python scripts/lr_stability.py            # 9 runs, about 15 min on one core
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import train_odyssey as lm
from _atomic import write_atomic

OUT = lm.DATA / "lr_stability.json"
NAMES = ("main", "qk_norm", "softcap")
RATES = (6e-3, 3e-2, 1.5e-1)  # the book's rate, 5 and 25 times larger
STEPS, EVAL_EVERY, SEED = 400, 50, 0
UNIGRAM_PPL = 364.3  # the 1-gram counts on the test books (data/odyssey_lm/results.json)


def one_run(name: str, lr: float, data) -> dict:
    config = dict(lm.BASE, **lm.VARIANTS[name], lr=lr, steps=STEPS)
    model = lm.make_model(config, data.vocab_size("words"), SEED, lm.glove_matrix(data.vocab))
    ids = data.ids["words"]
    start = time.perf_counter()
    curve, losses = lm.train(
        model,
        ids["train"],
        ids["valid"],
        **{k: config[k] for k in ("steps", "context", "batch_size", "lr", "weight_decay")},
        seed=SEED,
        eval_every=EVAL_EVERY,
        log=lambda line: None,
    )
    valid = curve["valid_ppl"][-1]
    record = {
        "config": config,
        "curve": curve,
        "losses": losses[::10],
        "valid_ppl": valid,
        "max_logit": max((m for m in curve["max_logit"] if math.isfinite(m)), default=None),
        "diverged": not math.isfinite(valid) or valid > UNIGRAM_PPL,
        "seconds": time.perf_counter() - start,
    }
    print(
        f"{name} lr {lr:g}: valid ppl {valid:.1f}, largest logit {record['max_logit']}, "
        f"{'diverged' if record['diverged'] else 'trained'} ({record['seconds']:.0f} s)",
        flush=True,
    )
    return record


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--merge", nargs="+", type=Path, help="merge these result files")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = {"names": list(NAMES), "rates": list(RATES), "steps": STEPS, "seed": SEED}
    results = {"settings": settings, "machine": lm.machine(), "runs": {}}
    if args.merge:
        for path in args.merge:
            part = json.loads(path.read_text())
            if part["settings"] != settings:
                raise SystemExit(f"{path}: made with other settings; cannot merge")
            for name, by_rate in part["runs"].items():
                results["runs"].setdefault(name, {}).update(by_rate)
    else:
        data = lm.Data(bpe=False)
        for name in args.only:
            for lr in RATES:
                results["runs"].setdefault(name, {})[f"{lr:g}"] = one_run(name, lr, data)
    results["runs"] = {n: results["runs"][n] for n in NAMES if n in results["runs"]}
    write_atomic(args.out, json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
