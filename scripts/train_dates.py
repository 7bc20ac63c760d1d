"""Train the three translators of the chapter "Cross-attention": dates in words to ISO dates.

Usage (``make dates``; about 6 minutes on one core)::

    .venv/bin/python scripts/train_dates.py [--out data/dates] [--steps-scale 1.0]

The task: a date written as a person writes it, in one of :data:`FORMS` ("the third day of
March, in the year 1900", "Sept. 3, 1900", "3rd March 1900", ...), to its ISO form
``1900-03-03``. The output reads the source out of order (year first, day last), so the
cross-attention maps show where each output character looks. Pairs are drawn by
:func:`make_pairs` from a seeded generator: dates from 1600 to 2099, and every date whose
day number is a multiple of 10 held out for testing, so that no test date is seen in training
in any form.

Three models, each trained from seed 0 with AdamW and teacher forcing:

- ``additive``: Bahdanau's model: a bidirectional GRU encoder, a GRU decoder whose query is its
  last state, and :class:`attnlib.seq2seq.AdditiveAttention` (``v^T tanh(W_q q + W_k k)``);
- ``dot``: the same model with the scaled dot product ``(W_q q) . (W_k k) / sqrt(d)``;
- ``transformer``: :class:`attnlib.seq2seq.EncoderDecoder` (2 + 2 layers, E = 64, 4 heads).

Writes ``data/dates/``: ``additive.pt``, ``dot.pt``, ``transformer.pt`` and ``results.json``
(the settings, each model's training losses, seconds and held-out accuracy, and its wrong
outputs). ``tests/test_dates.py`` checks them against this script.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _atomic import atomic_path, write_atomic
from attnlib import scaled_dot_product_attention
from attnlib.experiment import machine
from attnlib.seq2seq import AdditiveAttention, EncoderDecoder
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "dates"

MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
ABBREVIATIONS = ["Jan.", "Feb.", "March", "April", "May", "June",
                 "July", "Aug.", "Sept.", "Oct.", "Nov.", "Dec."]  # fmt: skip
UNITS = ["", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
TEENS = ["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
         "seventeenth", "eighteenth", "nineteenth"]  # fmt: skip


def ordinal_word(day: int) -> str:
    """1 -> "first", 23 -> "twenty-third", 30 -> "thirtieth"."""
    if day < 10:
        return UNITS[day]
    if day < 20:
        return TEENS[day - 10]
    tens = {2: "twenty", 3: "thirty"}[day // 10]
    return f"{tens}-{UNITS[day % 10]}" if day % 10 else {2: "twentieth", 3: "thirtieth"}[day // 10]


ONES = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
        "nineteen"]  # fmt: skip
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """1 .. 99 in words: 7 -> "seven", 64 -> "sixty-four"."""
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else "")


def year_words(year: int) -> str:
    """A year as Butler's contemporaries wrote it out: 1864 -> "eighteen hundred and
    sixty-four", 1900 -> "nineteen hundred", 2005 -> "two thousand and five"."""
    head = "two thousand" if year >= 2000 else f"{ONES[year // 100]} hundred"
    return head + (f" and {number_words(year % 100)}" if year % 100 else "")


def suffix(day: int) -> str:
    """1 -> "1st", 22 -> "22nd", 13 -> "13th"."""
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    return f"{day}" + {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


# Each form writes a date (d: day, m: month 1-12, y: year). Butler's Odyssey has none; his
# letters and note-books write "Sept. 23, 1864", "the 3rd of March" and "in the year 1900",
# and the last two forms spell the year out as his contemporaries did.
FORMS = [
    lambda d, m, y: f"the {ordinal_word(d)} day of {MONTHS[m - 1]}, in the year {y}",
    lambda d, m, y: f"{MONTHS[m - 1]} the {ordinal_word(d)}, {y}",
    lambda d, m, y: f"{suffix(d)} {MONTHS[m - 1]} {y}",
    lambda d, m, y: f"on the {suffix(d)} of {MONTHS[m - 1]}, {y}",
    lambda d, m, y: f"{ABBREVIATIONS[m - 1]} {d}, {y}",
    lambda d, m, y: f"{d} {MONTHS[m - 1]} {y}",
    lambda d, m, y: f"the {ordinal_word(d)} of {MONTHS[m - 1]} in the year of our Lord {y}",
    lambda d, m, y: f"in {MONTHS[m - 1]} {y}, on the {ordinal_word(d)}",
    lambda d, m, y: f"the {ordinal_word(d)} day of {MONTHS[m - 1]}, in the year {year_words(y)}",
    lambda d, m, y: f"{MONTHS[m - 1]} the {ordinal_word(d)}, {year_words(y)}",
]
FIRST, LAST = datetime.date(1600, 1, 1).toordinal(), datetime.date(2099, 12, 31).toordinal()
TOKEN = re.compile(r"\d|[a-z]+|[^\sa-z\d]")  # digits one by one, words, punctuation


def source_tokens(text: str) -> list[str]:
    """Lower-case words, single digits and punctuation: "Sept. 23" -> sept . 2 3."""
    return TOKEN.findall(text.lower())


def _closed_vocabulary() -> list[str]:
    words = set()
    for form in FORMS:
        for m in range(1, 13):
            for d in range(1, 32):
                words.update(source_tokens(form(d, m, 1987)))
    for year in range(1600, 2100):
        words.update(source_tokens(year_words(year)))
    return sorted(words)


PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SOURCE_VOCAB = [PAD, *_closed_vocabulary()]  # every token any form can write
TARGET_VOCAB = [PAD, BOS, EOS, *"0123456789-"]
SOURCE_ID = {t: i for i, t in enumerate(SOURCE_VOCAB)}
TARGET_ID = {t: i for i, t in enumerate(TARGET_VOCAB)}
MAX_LEN = 20  # the longest source has 17 tokens; a target 12 with <bos> and <eos>


def held_out(ordinal: int) -> bool:
    """Test dates: every date whose day number (days since 1 Jan. of year 1) ends in 0."""
    return ordinal % 10 == 0


def make_pairs(n: int, seed: int, split: str) -> list[tuple[str, str]]:
    """``n`` pairs (written date, ISO date) of ``split`` ("train" or "test"), each date and
    form drawn with ``torch.Generator().manual_seed(seed)``."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    while len(pairs) < n:
        ordinal = FIRST + int(torch.randint(LAST - FIRST + 1, (1,), generator=g))
        if held_out(ordinal) != (split == "test"):
            continue
        date = datetime.date.fromordinal(ordinal)
        form = FORMS[int(torch.randint(len(FORMS), (1,), generator=g))]
        pairs.append((form(date.day, date.month, date.year), date.isoformat()))
    return pairs


def encode(pairs) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids ``(n, MAX_LEN)`` and target ids ``(n, 12)`` (``<bos>`` ISO ``<eos>``), padded
    with 0."""
    source = torch.zeros(len(pairs), MAX_LEN, dtype=torch.long)
    target = torch.zeros(len(pairs), 12, dtype=torch.long)
    for i, (text, iso) in enumerate(pairs):
        ids = [SOURCE_ID[t] for t in source_tokens(text)]
        source[i, : len(ids)] = torch.tensor(ids)
        target[i] = torch.tensor([TARGET_ID[BOS], *(TARGET_ID[c] for c in iso), TARGET_ID[EOS]])
    return source, target


def decode_target(ids) -> str:
    """The ISO text of target ids, up to ``<eos>`` (``<bos>`` and padding dropped)."""
    out = []
    for i in ids.tolist():
        if TARGET_VOCAB[i] == EOS:
            break
        if TARGET_VOCAB[i] not in (PAD, BOS):
            out.append(TARGET_VOCAB[i])
    return "".join(out)


# ---- the recurrent models of Bahdanau et al. -----------------------------------------------
class DotAttention(nn.Module):
    """The scaled dot product of projected queries and keys, ``(W_q q) . (W_k k) / sqrt(A)``
    (:func:`attnlib.scaled_dot_product_attention`), with the interface of
    :class:`attnlib.seq2seq.AdditiveAttention`."""

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.q_proj = nn.Linear(query_dim, hidden_dim, bias=False)
        self.k_proj = nn.Linear(key_dim, hidden_dim, bias=False)

    def forward(self, query, key, value, *, mask=None):
        return scaled_dot_product_attention(self.q_proj(query), self.k_proj(key), value, mask=mask)


class RecurrentTranslator(nn.Module):
    """Bahdanau et al.'s model: a bidirectional GRU reads the source; at each step a GRU
    decoder attends from its last state ``s_{t-1}`` to the encoder's states, and reads the
    context with the previous output token.

    ``score``: ``"additive"`` or ``"dot"``.
    """

    def __init__(self, score: str, embed: int = 32, hidden: int = 64):
        super().__init__()
        self.score = score
        self.source_embedding = nn.Embedding(len(SOURCE_VOCAB), embed)
        self.target_embedding = nn.Embedding(len(TARGET_VOCAB), embed)
        self.encoder = nn.GRU(embed, hidden // 2, batch_first=True, bidirectional=True)
        self.init = nn.Linear(hidden, hidden)
        attention = AdditiveAttention if score == "additive" else DotAttention
        self.attention = attention(hidden, hidden, hidden)
        self.cell = nn.GRUCell(embed + hidden, hidden)
        self.out = nn.Linear(2 * hidden + embed, len(TARGET_VOCAB))

    def encode(self, source):
        mask = source != 0  # (N, S): the real tokens
        lengths = mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(
            self.source_embedding(source), lengths, batch_first=True, enforce_sorted=False
        )
        states, last = self.encoder(packed)  # last: (2, N, hidden / 2)
        states, _ = nn.utils.rnn.pad_packed_sequence(
            states, batch_first=True, total_length=source.shape[1]
        )  # (N, S, hidden)
        first_state = torch.tanh(self.init(torch.cat([last[0], last[1]], dim=-1)))  # (N, hidden)
        return states, mask, first_state

    def step(self, token, state, states, mask):
        """One output: logits ``(N, V_t)``, the new state, the weights ``(N, S)``."""
        context, weights = self.attention(
            state.unsqueeze(1), states, states, mask=mask.unsqueeze(1)
        )  # (N, 1, hidden), (N, 1, S)
        context, embedded = context.squeeze(1), self.target_embedding(token)
        state = self.cell(torch.cat([embedded, context], dim=-1), state)  # (N, hidden)
        logits = self.out(torch.cat([state, context, embedded], dim=-1))  # (N, V_t)
        return logits, state, weights.squeeze(1)

    def forward(self, source, target):
        """Teacher forcing: logits ``(N, L, V_t)`` for ``target[:, 1:]`` given ``target[:, :-1]``,
        and the weights ``(N, L, S)``."""
        states, mask, state = self.encode(source)
        logits, weights = [], []
        for t in range(target.shape[1]):
            out, state, w = self.step(target[:, t], state, states, mask)
            logits.append(out)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)

    @torch.no_grad()
    def generate(self, source, steps: int = 11):
        """Greedy ids ``(N, 1 + steps)`` from ``<bos>``, and the weights ``(N, steps, S)``."""
        states, mask, state = self.encode(source)
        token = torch.full((source.shape[0],), TARGET_ID[BOS], dtype=torch.long)
        ids, weights = [token], []
        for _ in range(steps):
            logits, state, w = self.step(token, state, states, mask)
            token = logits.argmax(-1)
            ids.append(token)
            weights.append(w)
        return torch.stack(ids, 1), torch.stack(weights, 1)


# ---- the models, trained -----------------------------------------------------------------
SETTINGS = {
    "additive": {"steps": 1500, "lr": 3e-3},
    "dot": {"steps": 1500, "lr": 3e-3},
    "transformer": {"steps": 2000, "lr": 1e-3},
}
TRANSFORMER = dict(embed_dim=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2)
BATCH, TRAIN_PAIRS, TEST_PAIRS, SEED = 64, 20_000, 1_000, 0


def make_model(name: str) -> nn.Module:
    torch.manual_seed(SEED)
    if name == "transformer":
        return EncoderDecoder(
            len(SOURCE_VOCAB), len(TARGET_VOCAB), **TRANSFORMER, max_len=MAX_LEN, dropout=0.1
        )
    return RecurrentTranslator(name)


def loss_of(model, source, target) -> torch.Tensor:
    """Cross-entropy of each next target token (teacher forcing)."""
    if isinstance(model, EncoderDecoder):
        logits, _ = model(source, target[:, :-1], source_mask=source != 0)
    else:
        logits, _ = model(source, target[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), target[:, 1:].flatten())


def train(
    model, source, target, *, steps: int, lr: float, stop_after: int | None = None, log=print
) -> list[float]:
    """AdamW, a linear warm-up over 5 % of the steps then a cosine to zero; batches drawn with
    a generator seeded from :data:`SEED`; returns each step's loss. ``stop_after``: stop after
    that many steps of the same schedule (the tests replay the first ones)."""
    g = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / warm
            if s < warm
            else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm)))
        ),
    )
    model.train()
    losses = []
    for step in range(steps if stop_after is None else stop_after):
        rows = torch.randint(len(source), (BATCH,), generator=g)
        loss = loss_of(model, source[rows], target[rows])
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if (step + 1) % 250 == 0:
            log(f"  step {step + 1:5d}  loss {sum(losses[-250:]) / 250:.4f}")
    return losses


def translate(model, source) -> list[str]:
    """Greedy ISO texts of ``source`` ids ``(n, MAX_LEN)``."""
    model.eval()
    if isinstance(model, EncoderDecoder):
        ids = model.generate(source, 11, bos_id=TARGET_ID[BOS], source_mask=source != 0)
    else:
        ids, _ = model.generate(source)
    return [decode_target(row) for row in ids]


def evaluate(model, pairs) -> tuple[float, list[dict]]:
    source, _ = encode(pairs)
    outputs = translate(model, source)
    wrong = [
        {"source": text, "expected": iso, "output": out}
        for (text, iso), out in zip(pairs, outputs)
        if out != iso
    ]
    return 1 - len(wrong) / len(pairs), wrong


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--steps-scale", type=float, default=1.0, help="for a quick try")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    source, target = encode(make_pairs(TRAIN_PAIRS, SEED, "train"))
    test = make_pairs(TEST_PAIRS, SEED + 1, "test")
    path = args.out / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {"models": {}}
    results.update(
        settings=SETTINGS,
        transformer=TRANSFORMER,
        batch=BATCH,
        train_pairs=TRAIN_PAIRS,
        test_pairs=TEST_PAIRS,
        seed=SEED,
        machine=machine(),
    )
    for name in args.only:
        steps = max(1, round(SETTINGS[name]["steps"] * args.steps_scale))
        print(f"{name}: {steps} steps")
        model = make_model(name)
        t0 = time.perf_counter()
        losses = train(model, source, target, steps=steps, lr=SETTINGS[name]["lr"])
        seconds = time.perf_counter() - t0
        accuracy, wrong = evaluate(model, test)
        print(f"{name}: held-out accuracy {accuracy:.1%} ({len(wrong)} wrong), {seconds:.0f} s")
        results["models"][name] = {
            "steps": steps,
            "parameters": sum(p.numel() for p in model.parameters()),
            "losses": [round(x, 5) for x in losses],
            "seconds": seconds,
            "accuracy": accuracy,
            "wrong": wrong,
        }
        with atomic_path(args.out / f"{name}.pt") as tmp:
            torch.save(model.state_dict(), tmp)
    write_atomic(path, json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
