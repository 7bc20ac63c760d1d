"""The checks of the exercises: each compares your code with ``attnlib`` and PyTorch.

Every exercise has one check function, ``check_<name>(fn, run)``, that calls ``fn`` (your
function or class) on several cases and compares what comes back with an oracle: PyTorch,
``attnlib``, or a case computed by hand. The sizes are drawn at random, all different, from a
generator seeded per exercise, and the tensors are float64, so a transposed matrix or a wrong
axis shows as a wrong shape or a wrong value, and the tolerance can be tight.

:func:`run` gives one ``(case, message)`` per case, the message ``None`` when the case
passes; :func:`check` prints them, one line each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import attnlib
import torch
import torch.nn.functional as F
from attnlib.bpe import train_bpe
from attnlib.corpus import NGramModel
from attnlib.decoding import PreallocatedCache
from attnlib.efficient import tiled_attention
from attnlib.linear_attention import delta_rule_recurrent
from attnlib.positions import rotary_embedding
from attnlib.pretrained import wordpiece_tokenize
from attnlib.seq2seq import AdditiveAttention
from torch import Tensor

F64 = torch.float64


class Mismatch(AssertionError):
    """A result that differs from the oracle; its message says where and by how much."""


@dataclass(frozen=True)
class Exercise:
    """An exercise: its id (``ex03b``), the name of its stub, and where the book teaches it."""

    id: str
    name: str
    chapter: int
    section: str
    checks: Callable

    @property
    def title(self) -> str:
        return f"{self.id} {self.name}"


EXERCISES: dict[str, Exercise] = {}


def exercise(id: str, name: str, chapter: int, section: str):
    """Register ``check_<name>`` as the checks of exercise ``id``."""

    def register(checks):
        EXERCISES[name] = Exercise(id, name, chapter, section, checks)
        return checks

    return register


class Run:
    """The results of one exercise's cases, in order: ``(case, None)`` or ``(case, message)``."""

    def __init__(self):
        self.results: list[tuple[str, str | None]] = []

    @contextmanager
    def case(self, label: str) -> Iterator[None]:
        """One case: a :class:`Mismatch` or an error inside is recorded, not raised.

        ``NotImplementedError`` goes through: the exercise is not written yet.
        """
        try:
            yield
        except NotImplementedError:
            raise
        except Mismatch as e:
            self.results.append((label, str(e)))
        except Exception as e:  # your code raised: say what, in one line
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.results.append((label, f"raised {type(e).__name__}: {first}"))
        else:
            self.results.append((label, None))


# ---------------------------------------------------------------- comparisons


def _index(i: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, i)) + "]" if i else ""


def same(what: str, got, expected: Tensor, by: str, *, rtol=1e-7, atol=1e-10) -> None:
    """Raise :class:`Mismatch` unless ``got`` is a tensor of ``expected``'s shape and values.

    The message names ``what``, the first position that differs (both values there) and the
    oracle ``by``; floats are compared within ``rtol`` and ``atol``, integers exactly.
    """
    if not isinstance(got, Tensor):
        raise Mismatch(f"{what} is a {type(got).__name__}, expected a tensor")
    if got.shape != expected.shape:
        raise Mismatch(
            f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)} ({by})"
        )
    if got.dtype != expected.dtype:
        raise Mismatch(f"{what} has dtype {got.dtype}, expected {expected.dtype}")
    if expected.is_floating_point():
        wrong = ~torch.isclose(got, expected, rtol=rtol, atol=atol)
    else:
        wrong = got != expected
    if wrong.any():
        first = tuple(wrong.nonzero()[0].tolist())
        g, e = got[first].item(), expected[first].item()
        raise Mismatch(
            f"{what}{_index(first)} is {g:.6g}, expected {e:.6g} ({by})"
            + (f"; {int(wrong.sum())} of {wrong.numel()} values differ" if first else "")
        )


def _tuple(what: str, got, n: int) -> tuple:
    if not isinstance(got, tuple) or len(got) != n:
        kind = f"a tuple of {len(got)}" if isinstance(got, tuple) else type(got).__name__
        raise Mismatch(f"{what} must return a tuple of {n}; it returned {kind}")
    return got


def _shape(what: str, got, shape: tuple[int, ...]) -> None:
    if not isinstance(got, Tensor):
        raise Mismatch(f"{what} is a {type(got).__name__}, expected a tensor")
    if got.shape != shape:
        raise Mismatch(f"{what} has shape {tuple(got.shape)}, expected {shape}")


def _sizes(g: torch.Generator, n: int, lo: int = 2, hi: int = 9) -> list[int]:
    """``n`` different sizes in ``lo .. hi``, drawn with ``g``."""
    return (torch.randperm(hi - lo + 1, generator=g)[:n] + lo).tolist()


def _randn(g: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=g, dtype=F64)


# ---------------------------------------------------------------- 1. GloVe


@exercise("ex01", "nearest_neighbours", 1, "Nearest neighbours")
def check_nearest_neighbours(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(1)
    E, k = _sizes(g, 2, 3, 9)
    V = 40
    vectors, vector = _randn(g, V, E), _randn(g, E)
    by = "attnlib.cosine_matrix, then topk"
    lengths = torch.rand(V, 1, generator=g, dtype=F64) * 100 + 0.01
    for label, table, kk in [
        (f"k={k}, V={V}, E={E}", vectors, k),
        ("rows of very different lengths (a cosine ignores length)", vectors * lengths, k),
        (f"k = V = {V}: every row, in order", vectors, V),
    ]:
        with run.case(label):
            expected = attnlib.cosine_matrix(vector[None], table)[0].topk(kk).indices
            same("indices", fn(vector, table, kk), expected, by)


# ---------------------------------------------------------------- 2. Cosine similarity


@exercise("ex02", "cosine_matrix", 2, "All the cosines with one matrix product")
def check_cosine_matrix(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(2)
    L, S, E = _sizes(g, 3)
    a, b = _randn(g, L, E), _randn(g, S, E)
    by = "attnlib.cosine_matrix"
    with run.case(f"L={L}, S={S}, E={E}"):
        same("cosines", fn(a, b), attnlib.cosine_matrix(a, b), by)
    with run.case("rows of different lengths"):
        scaled = a * torch.arange(1, L + 1, dtype=F64)[:, None] ** 3
        expected = F.cosine_similarity(scaled[:, None], b[None], dim=-1)
        same("cosines", fn(scaled, b), expected, "F.cosine_similarity")
    with run.case("a with itself (ones on the diagonal)"):
        same("cosines", fn(a, a), attnlib.cosine_matrix(a), by)


# ---------------------------------------------------------------- 3. Scaled dot-product attention


@exercise("ex03a", "softmax", 3, "Softmax")
def check_softmax(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(3)
    L, S, N = _sizes(g, 3)
    x = _randn(g, N, L, S)
    for label, scores, dim in [
        (f"(N={N}, L={L}, S={S}) along the last dimension", x, -1),
        ("along dim=1", x, 1),
        ("along dim=0", x[0], 0),
        ("scores near 1000 (no overflow)", x * 10 + 1000, -1),
        ("scores near -1000 (no 0/0)", x * 10 - 1000, -1),
    ]:
        with run.case(label):
            same("softmax", fn(scores, dim), torch.softmax(scores, dim), "torch.softmax")


@exercise("ex03b", "attention", 3, "Masks")
def check_attention(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(33)
    N, L, S, d_k, d_v = _sizes(g, 5, 2, 9)
    q, k, v = _randn(g, N, L, d_k), _randn(g, N, S, d_k), _randn(g, N, S, d_v)
    lengths = torch.randint(1, S + 1, (N,), generator=g)
    padding = (torch.arange(S) < lengths[:, None])[:, None, :]  # (N, 1, S)
    rand = torch.rand(N, L, S, generator=g) < 0.5
    rand[..., 0] = True  # every query sees at least one key
    H = 3
    cases = [
        (f"no mask (N={N}, L={L}, S={S}, d_k={d_k}, d_v={d_v})", q, k, v, None),
        ("causal mask (L, S), True where j <= i", q, k, v, attnlib.causal_mask(L, S)),
        ("padding mask (N, 1, S), False on the padded keys", q, k, v, padding),
        ("random mask (N, L, S), True = may attend", q, k, v, rand),
        (
            f"heads (N, H={H}, L, S) with a causal (L, S) mask",
            _randn(g, N, H, L, d_k),
            _randn(g, N, H, S, d_k),
            _randn(g, N, H, S, d_v),
            attnlib.causal_mask(L, S),
        ),
    ]
    for label, q_, k_, v_, mask in cases:
        with run.case(label):
            out, weights = _tuple("attention", fn(q_, k_, v_, mask), 2)
            expected = attnlib.attention_weights(q_, k_, mask=mask)
            same("weights", weights, expected, "attnlib.attention_weights")
            expected = F.scaled_dot_product_attention(q_, k_, v_, attn_mask=mask)
            same("output", out, expected, "F.scaled_dot_product_attention")


# ---------------------------------------------------------------- 4. Learned projections


@exercise("ex04", "attention_head", 4, "Causal attention: a mask buffer and dropout")
def check_attention_head(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(4)
    N, L, E, D = _sizes(g, 4)
    x = _randn(g, N, L, E)
    head = attnlib.SelfAttention(E, head_dim=D).double()
    w = [_randn(g, D, E) / math.sqrt(E) for _ in range(3)]
    with torch.no_grad():
        for proj, m in zip((head.q_proj, head.k_proj, head.v_proj), w):
            proj.weight.copy_(m)
    for causal in (False, True):
        with run.case(f"causal={causal} (N={N}, L={L}, E={E}, D={D})"):
            out, weights = _tuple("attention_head", fn(x, *w, causal), 2)
            mask = attnlib.causal_mask(L) if causal else None
            expected_out, expected_weights = head(x, mask=mask)
            by = "attnlib.SelfAttention with your weights"
            same("weights", weights, expected_weights.detach(), by)
            same("output", out, expected_out.detach(), by)


# ---------------------------------------------------------------- 5. Multi-head attention


def _torch_mha(g: torch.Generator, E: int, H: int) -> torch.nn.MultiheadAttention:
    mha = torch.nn.MultiheadAttention(E, H, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(_randn(g, 3 * E, E) / math.sqrt(E))
    return mha


@exercise("ex05a", "split_heads", 5, "Way 3: one fused projection, reshaped into heads")
def check_split_heads(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(5)
    N, L, H, D = _sizes(g, 4, 2, 7)
    E = H * D
    x = _randn(g, N, L, E)
    with run.case(f"head h is columns h*D:(h+1)*D (N={N}, L={L}, H={H}, D={D})"):
        expected = torch.stack([x[..., h * D : (h + 1) * D] for h in range(H)], dim=1)
        same("heads", fn(x, H), expected, "the column slices of x")
    with run.case("split, attend and merge as torch.nn.MultiheadAttention"):
        mha = _torch_mha(g, E, H)
        q, k, v = (fn(x @ w.T, H) for w in mha.in_proj_weight.detach().chunk(3))
        heads = F.scaled_dot_product_attention(q, k, v)  # (N, H, L, D)
        out = torch.cat(heads.unbind(1), dim=-1) @ mha.out_proj.weight.detach().T
        same("output", out, mha(x, x, x)[0].detach(), "torch.nn.MultiheadAttention")


@exercise("ex05b", "merge_heads", 5, "Way 3: one fused projection, reshaped into heads")
def check_merge_heads(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(55)
    N, L, H, D = _sizes(g, 4, 2, 7)
    E = H * D
    heads = _randn(g, N, H, L, D)
    with run.case(f"the heads side by side (N={N}, H={H}, L={L}, D={D})"):
        same("merged", fn(heads), torch.cat(heads.unbind(1), dim=-1), "torch.cat of the heads")
    with run.case("split, attend and merge as torch.nn.MultiheadAttention"):
        x = _randn(g, N, L, E)
        mha = _torch_mha(g, E, H)
        q, k, v = (
            (x @ w.T).unflatten(-1, (H, D)).transpose(1, 2)
            for w in mha.in_proj_weight.detach().chunk(3)
        )
        out = fn(F.scaled_dot_product_attention(q, k, v)) @ mha.out_proj.weight.detach().T
        same("output", out, mha(x, x, x)[0].detach(), "torch.nn.MultiheadAttention")


# ---------------------------------------------------------------- 6. Training attention


@exercise("ex06", "attention_backward", 6, "The backward pass of attention")
def check_attention_backward(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(6)
    N, H, L, S, d_k, d_v = _sizes(g, 6, 2, 9)
    for label, batch in [
        (f"(N={N}, L={L}, S={S}, d_k={d_k}, d_v={d_v})", (N,)),
        (f"heads (N, H={H}, L, S)", (N, H)),
    ]:
        q, k, v = _randn(g, *batch, L, d_k), _randn(g, *batch, S, d_k), _randn(g, *batch, S, d_v)
        grad = _randn(g, *batch, L, d_v)
        with run.case(label):
            got = _tuple("attention_backward", fn(q, k, v, grad), 3)
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            F.scaled_dot_product_attention(*leaves).backward(grad)
            for name, mine, leaf in zip(("dQ", "dK", "dV"), got, leaves):
                same(name, mine, leaf.grad, "autograd through F.scaled_dot_product_attention")


# ---------------------------------------------------------------- 7. Positions


@exercise("ex07", "rope", 7, "Rotary position embedding (RoPE)")
def check_rope(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(7)
    N, H, L, half = _sizes(g, 4, 2, 9)
    D = 2 * half
    by = "attnlib.positions.rotary_embedding"
    for label, x, base in [
        (f"(L={L}, D={D})", _randn(g, L, D), 10000.0),
        (f"(N={N}, H={H}, L, D)", _randn(g, N, H, L, D), 10000.0),
        ("base=100", _randn(g, L, D), 100.0),
    ]:
        with run.case(label):
            same("rotated", fn(x, base), rotary_embedding(x, base=base), by)


# ---------------------------------------------------------------- 8. A language model


@exercise("ex08a", "layer_norm", 8, "The transformer block")
def check_layer_norm(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(8)
    N, L, E = _sizes(g, 3)
    x, w, b = _randn(g, N, L, E), _randn(g, E), _randn(g, E)
    for label, x_, eps in [
        (f"(N={N}, L={L}, E={E}), random weight and bias", x, 1e-5),
        ("eps=0.5 (inside the square root)", x, 0.5),
        ("rows with a mean near 1000", x + 1000, 1e-5),
    ]:
        with run.case(label):
            expected = F.layer_norm(x_, (E,), w, b, eps)
            same("normalised", fn(x_, w, b, eps), expected, "F.layer_norm", rtol=1e-6)


@exercise("ex08b", "block_mlp", 8, "The transformer block")
def check_block_mlp(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(88)
    N, L, H, D = _sizes(g, 4, 2, 6)
    E = H * D
    block = attnlib.TransformerBlock(E, H, mlp_ratio=2.5).double().eval()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(_randn(g, *p.shape) / math.sqrt(p.shape[-1]))
    weights = [
        t.detach()
        for t in (block.ln2.weight, block.ln2.bias, block.mlp[0].weight, block.mlp[0].bias)
        + (block.mlp[2].weight, block.mlp[2].bias)
    ]
    x = _randn(g, N, L, E)
    by = "attnlib.TransformerBlock"
    with torch.no_grad():
        with run.case(f"x + MLP(LN(x)) (N={N}, L={L}, E={E}, F={round(2.5 * E)})"):
            same("output", fn(x, *weights), x + block.mlp(block.ln2(x)), f"{by}'s ln2 and mlp")
        with run.case("the whole block, attention then your MLP half"):
            after_attention = x + block.attn(block.ln1(x))[0]
            same("output", fn(after_attention, *weights), block(x)[0], by)


def _close(what: str, got, expected: float, by: str) -> None:
    if not isinstance(got, (float, int)) and not (isinstance(got, Tensor) and got.numel() == 1):
        raise Mismatch(f"{what} is a {type(got).__name__}, expected a float")
    if not math.isclose(float(got), expected, rel_tol=1e-9, abs_tol=1e-12):
        raise Mismatch(f"{what} is {float(got):.6g}, expected {expected:.6g} ({by})")


@exercise("ex08c", "kneser_ney", 8, "Counting words: the baselines")
def check_kneser_ney(fn, run: Run) -> None:
    with run.case("by hand, ids 1 2 1 2 1 3, V=4"):
        ids = [1, 2, 1, 2, 1, 3]
        # c(1 2) = 2, c(1 .) = 3, N1+(1 .) = 2; p(2) = (N1+(. 2) + 1) / (3 bigrams + V) = 2/7
        _close("p(2 | 1)", fn(ids, 1, 2, 4, 0.75), 1.25 / 3 + 0.75 * 2 / 3 * 2 / 7, "by hand")
    g = torch.Generator().manual_seed(9)
    V = 9
    ids = torch.randint(0, V - 1, (80,), generator=g).tolist()  # V-1 never occurs
    prev, word = ids[10], ids[11]
    unseen = next(w for w in range(V) if (prev, w) not in zip(ids, ids[1:]))
    cases = [
        (f"a seen bigram ({prev}, {word}), 80 random ids, V={V}", prev, word, 0.75),
        (f"an unseen bigram ({prev}, {unseen})", prev, unseen, 0.75),
        (f"a previous word that never occurs ({V - 1}, {word})", V - 1, word, 0.75),
        ("discount 0.4", prev, word, 0.4),
    ]
    for label, u, w, delta in cases:
        with run.case(label):
            expected = NGramModel(ids, 2, V, delta).prob(w, (u,))
            _close(f"p({w} | {u})", fn(ids, u, w, V, delta), expected, "attnlib.corpus.NGramModel")


@exercise("ex08d", "bpe_merge", 8, "Subword tokens: byte-level BPE")
def check_bpe_merge(fn, run: Run) -> None:
    hand = [
        ("by hand, a a a with the pair (a, a) gives aa a", {("a", "a", "a"): 1}, ("a", "a")),
        (
            "by hand, low x5, lower x2, newest x6, widest x3",
            {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3},
            ("e", "s"),
        ),
    ]
    for label, words, pair in hand:
        with run.case(label):
            got_pair, merged = _tuple("bpe_merge", fn(dict(words)), 2)
            if tuple(got_pair) != pair:
                raise Mismatch(f"the pair is {got_pair}, expected {pair} (by hand)")
            expected = {_merged(w, *pair): n for w, n in words.items()}
            if merged != expected:
                raise Mismatch(f"the words are {merged}, expected {expected}")
    g = torch.Generator().manual_seed(10)
    words = {}
    for _ in range(12):
        length = int(torch.randint(2, 7, (), generator=g))
        word = tuple("abcd"[i] for i in torch.randint(0, 4, (length,), generator=g).tolist())
        words[word] = words.get(word, 0) + int(torch.randint(1, 6, (), generator=g))
    with run.case(f"{len(words)} random words of the letters abcd"):
        got_pair, merged = _tuple("bpe_merge", fn(dict(words)), 2)
        # one line per occurrence: each line is a pre-token; "\n" pairs with nothing
        text = "\n".join("".join(w) for w, n in words.items() for _ in range(n))
        pair = train_bpe(text, 1, min_frequency=1)[0]
        if tuple(got_pair) != pair:
            raise Mismatch(f"the pair is {got_pair}, expected {pair} (attnlib.bpe.train_bpe)")
        for word, n in words.items():
            want = _merged(word, *pair)
            if merged.get(want) != n:
                raise Mismatch(f"{word} should become {want} (count {n}); got {merged}")
        if len(merged) != len(words):
            raise Mismatch(f"{len(merged)} words after the merge, expected {len(words)}")


def _merged(word: tuple[str, ...], a: str, b: str) -> tuple[str, ...]:
    """``word`` of one-letter tokens with ``a b`` merged, from the left, by a regular expression."""
    return tuple(re.findall(re.escape(a + b) + "|.", "".join(word)))


# ---------------------------------------------------------------- 9. A real encoder


@exercise("ex09", "wordpiece", 9, "Word pieces")
def check_wordpiece(fn, run: Run) -> None:
    vocab = {"the", "un", "##aff", "##able", "ship", "##s", "a", "##a", "ab", "##b", "##ba"}
    by = "attnlib.pretrained.wordpiece_tokenize"
    for word in ["unaffable", "ships", "the", "shipx", "aab", "abba", "xyz"]:
        with run.case(f"the word {word!r}"):
            expected = wordpiece_tokenize(word, vocab)
            got = fn(word, vocab)
            if list(got) != expected:
                raise Mismatch(f"{word!r} gives {got}, expected {expected} ({by})")
    g = torch.Generator().manual_seed(11)
    letters = "abc"
    pieces = {
        "".join(letters[i] for i in torch.randint(0, 3, (n,), generator=g).tolist())
        for n in torch.randint(1, 4, (20,), generator=g).tolist()
    }
    vocab = pieces | {"##" + p for p in pieces if len(p) < 3}
    with run.case(f"40 random words, a random vocabulary of {len(vocab)} pieces"):
        for _ in range(40):
            n = int(torch.randint(1, 9, (), generator=g))
            word = "".join(letters[i] for i in torch.randint(0, 3, (n,), generator=g).tolist())
            expected, got = wordpiece_tokenize(word, vocab), fn(word, vocab)
            if list(got) != expected:
                raise Mismatch(f"{word!r} gives {got}, expected {expected} ({by})")


# ---------------------------------------------------------------- 10. Induction heads


@exercise("ex10", "induction_score", 10, "Finding the heads")
def check_induction_score(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(12)
    N, H, T = _sizes(g, 3, 2, 9)
    L = 2 * T + 1
    causal = attnlib.causal_mask(L)
    with run.case(f"a perfect induction head scores 1 (T={T})"):
        A = causal / causal.sum(-1, keepdim=True)
        for t in range(T + 1, L):
            A[t] = 0
            A[t, t - T + 1] = 1
        same("score", fn(A.to(F64), T), torch.tensor(1.0, dtype=F64), "by hand")
    with run.case("a uniform causal head"):
        A = (causal / causal.sum(-1, keepdim=True)).to(F64)
        expected = (1 / torch.arange(T + 2, L + 1, dtype=F64)).mean()  # row t spreads 1/(t+1)
        same("score", fn(A, T), expected, "by hand: the mean of 1/(t+1)")
    with run.case(f"random causal weights (N={N}, H={H}, 2T+1={L}, 2T+1)"):
        scores = _randn(g, N, H, L, L).masked_fill(~causal, -math.inf)
        A = torch.softmax(scores, dim=-1)
        expected = torch.zeros(N, H, dtype=F64)
        for t in range(T + 1, 2 * T + 1):
            expected += A[:, :, t, t - T + 1] / T
        same("scores", fn(A, T), expected, "a loop over t")


# ---------------------------------------------------------------- 11. Inference


@exercise("ex11", "cached_attention_step", 11, "With a cache written by hand")
def check_cached_attention_step(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(13)
    N, H, L, D, D_v = _sizes(g, 5)
    q, k, v = _randn(g, N, H, L, D), _randn(g, N, H, L, D), _randn(g, N, H, L, D_v)
    with run.case(f"the first step, cache None, gives the first value (N={N}, H={H})"):
        out, ck, cv = _tuple(
            "cached_attention_step", fn(None, None, q[..., :1, :], k[..., :1, :], v[..., :1, :]), 3
        )
        same("output", out, v[..., :1, :], "by hand")
        same("cache_k", ck, k[..., :1, :], "by hand")
    with run.case(f"{L} steps equal causal attention (L={L}, D={D}, D_v={D_v})"):
        ck = cv = None
        outs = []
        for t in range(L):
            step = (q[..., t : t + 1, :], k[..., t : t + 1, :], v[..., t : t + 1, :])
            out, ck, cv = _tuple("cached_attention_step", fn(ck, cv, *step), 3)
            outs.append(out)
        same("cache_k after the last step", ck, k, "the keys of every step")
        same("cache_v after the last step", cv, v, "the values of every step")
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        same(
            "outputs",
            torch.cat(outs, dim=-2),
            expected,
            "F.scaled_dot_product_attention(is_causal=True)",
        )


# ---------------------------------------------------------------- 12. torch.nn.MultiheadAttention


@exercise("ex12", "torch_mha_forward", 12, "Step by step through `F.multi_head_attention_forward`")
def check_torch_mha_forward(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(14)
    N, L, S, H, D = _sizes(g, 5, 2, 7)
    E = H * D
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(_randn(g, *p.shape) / math.sqrt(E))
    params = [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias]
    params = [p.detach() for p in params]
    x, memory = _randn(g, N, L, E), _randn(g, N, S, E)
    by = "torch.nn.MultiheadAttention"
    for label, q, kv in [
        (f"self-attention (N={N}, L={L}, E={E}, H={H})", x, x),
        (f"cross-attention onto S={S} keys", x, memory),
    ]:
        with run.case(label):
            out, weights = _tuple("torch_mha_forward", fn(q, kv, kv, *params, H), 2)
            expected_out, expected_weights = mha(q, kv, kv)
            same("weights", weights, expected_weights.detach(), by)
            same("output", out, expected_out.detach(), by)


# ---------------------------------------------------------------- 13. Keras MultiHeadAttention


@exercise("ex13", "keras_kernels", 13, "How PyTorch's matrices become Keras kernels")
def check_keras_kernels(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(15)
    N, L, H, D = _sizes(g, 4, 2, 7)
    E = H * D
    w_q, w_o = _randn(g, E, E), _randn(g, E, E)
    x, heads = _randn(g, N, L, E), _randn(g, N, L, H, D)
    with run.case(f"the query kernel (E={E}, H={H}, D={D})"):
        K_q, _ = _tuple("keras_kernels", fn(w_q, w_o, H), 2)
        _shape("K_q", K_q, (E, H, D))
        expected = (x @ w_q.T).unflatten(-1, (H, D))
        same(
            "einsum('nle,ehd->nlhd', x, K_q)",
            torch.einsum("nle,ehd->nlhd", x, K_q),
            expected,
            "x W_q^T cut into heads",
        )
    with run.case("the output kernel"):
        _, K_o = _tuple("keras_kernels", fn(w_q, w_o, H), 2)
        _shape("K_o", K_o, (H, D, E))
        expected = heads.flatten(-2) @ w_o.T
        same(
            "einsum('nlhd,hde->nle', heads, K_o)",
            torch.einsum("nlhd,hde->nle", heads, K_o),
            expected,
            "the heads side by side times W_o^T",
        )


# ---------------------------------------------------------------- 14. Cross-attention


@exercise("ex14", "additive_attention", 14, "Two scores: Bahdanau's and the dot product")
def check_additive_attention(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(16)
    N, L, S, D_q, D_k, D_v, A = _sizes(g, 7, 2, 9)
    attn = AdditiveAttention(D_q, D_k, A).double()
    w_q, w_k, v = _randn(g, A, D_q), _randn(g, A, D_k), _randn(g, A)
    with torch.no_grad():
        attn.q_proj.weight.copy_(w_q)
        attn.k_proj.weight.copy_(w_k)
        attn.v.weight.copy_(v[None])
    query, key = _randn(g, N, L, D_q), _randn(g, N, S, D_k)
    by = "attnlib.seq2seq.AdditiveAttention"
    for label, value in [
        (f"value = key (N={N}, L={L}, S={S}, D_q={D_q}, D_k={D_k}, A={A})", key),
        (f"values of their own size D_v={D_v}", _randn(g, N, S, D_v)),
    ]:
        with run.case(label):
            out, weights = _tuple("additive_attention", fn(query, key, value, w_q, w_k, v), 2)
            expected_out, expected_weights = attn(query, key, value)
            same("weights", weights, expected_weights.detach(), by)
            same("output", out, expected_out.detach(), by)


# ---------------------------------------------------------------- 15. Making attention fast


@exercise("ex15", "tiled_attention", 15, "Tiled attention by hand")
def check_tiled_attention(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(17)
    N, L, d_k, d_v = _sizes(g, 4, 2, 9)
    S = 23
    q, k, v = _randn(g, N, L, d_k), _randn(g, N, S, d_k), _randn(g, N, S, d_v)
    cases = [
        (f"block_size=4, S={S} not a multiple (N={N}, L={L}, d_k={d_k}, d_v={d_v})", q, 4),
        ("block_size=1", q, 1),
        (f"block_size={S + 9}, more than S: one block", q, S + 9),
        ("large scores, queries x 40 (the running maximum)", q * 40, 5),
    ]
    for label, q_, block in cases:
        with run.case(label):
            got = fn(q_, k, v, block)
            expected = F.scaled_dot_product_attention(q_, k, v)
            same("output", got, expected, "F.scaled_dot_product_attention")
            mine = tiled_attention(q_, k, v, block_size=block)
            same("output", got, mine, "attnlib.efficient.tiled_attention")
    with run.case(f"no tensor of all the scores, (..., L, S) = (..., {L}, {S}), at block_size=4"):
        with _Shapes() as seen:
            fn(q, k, v, 4)
        if (L, S) in seen.shapes or F.scaled_dot_product_attention in seen.functions:
            raise Mismatch(
                f"all the scores were computed at once (a tensor of shape (..., {L}, {S}), or "
                "F.scaled_dot_product_attention); compute one block of keys at a time"
            )


class _Shapes(torch.overrides.TorchFunctionMode):
    """Records the torch functions called inside it, and the last two dimensions of every
    tensor they return."""

    def __init__(self):
        super().__init__()
        self.shapes: set[tuple[int, ...]] = set()
        self.functions: set = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.functions.add(func)
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, Tensor):
                self.shapes.add(tuple(t.shape[-2:]))
        return out


# ---------------------------------------------------------------- 16. Attention's memory


@exercise("ex16", "PreallocatedCache", 16, "Preallocated: write in place")
def check_preallocated_cache(cls, run: Run) -> None:
    g = torch.Generator().manual_seed(18)
    N, G, D, D_v = _sizes(g, 4)
    steps = [3, 1, 2, 1]
    keys = [_randn(g, N, G, n, D) for n in steps]
    values = [_randn(g, N, G, n, D_v) for n in steps]
    max_len = sum(steps) + 2
    by = "attnlib.decoding.PreallocatedCache"
    with run.case(f"steps of {steps} tokens (N={N}, G={G}, D={D}, D_v={D_v}, max_len={max_len})"):
        cache, oracle = cls(max_len), PreallocatedCache(max_len)
        if cache.length != 0:
            raise Mismatch(f"length is {cache.length} before the first step, expected 0")
        pointers = set()
        for i, (key, value) in enumerate(zip(keys, values)):
            got = _tuple("update", cache.update(key, value), 2)
            expected = oracle.update(key, value)
            same(f"keys after step {i}", got[0], expected[0], by)
            same(f"values after step {i}", got[1], expected[1], by)
            if cache.length != oracle.length:
                raise Mismatch(f"length after step {i} is {cache.length}, expected {oracle.length}")
            pointers.add(got[0].untyped_storage().data_ptr())
        if len(pointers) != 1:
            raise Mismatch(
                f"the keys lie in {len(pointers)} different buffers over {len(steps)} steps; "
                "expected views of one buffer, allocated at the first step"
            )
    with run.case(f"a step past max_len={max_len} raises ValueError"):
        cache = cls(max_len)
        cache.update(keys[0], values[0])
        too_long = max_len - steps[0] + 1
        try:
            cache.update(_randn(g, N, G, too_long, D), _randn(g, N, G, too_long, D_v))
        except ValueError:
            pass
        else:
            raise Mismatch(f"writing {too_long} more tokens after {steps[0]} did not raise")


# ---------------------------------------------------------------- 17. Today's attention


@exercise("ex17", "delta_rule_step", 17, "Linear attention and DeltaNet")
def check_delta_rule_step(fn, run: Run) -> None:
    g = torch.Generator().manual_seed(19)
    N, H, D, D_v = _sizes(g, 4)
    T = 10
    q, k, v = _randn(g, N, H, T, D), _randn(g, N, H, T, D), _randn(g, N, H, T, D_v)
    k = k / k.norm(dim=-1, keepdim=True)  # unit keys
    beta = torch.rand(N, H, T, generator=g, dtype=F64) * 0.9 + 0.05
    alpha = torch.rand(N, H, T, generator=g, dtype=F64) * 0.5 + 0.5
    state = _randn(g, N, H, D, D_v)
    by = "attnlib.linear_attention.delta_rule_recurrent"
    for label, decay in [
        (f"one step from a random state (N={N}, H={H}, D={D}, D_v={D_v})", alpha),
        ("alpha = 1: DeltaNet without the gate", torch.ones_like(alpha)),
    ]:
        with run.case(label):
            t = slice(0, 1)
            out, S = _tuple(
                "delta_rule_step",
                fn(state, q[..., 0, :], k[..., 0, :], v[..., 0, :], beta[..., 0], decay[..., 0]),
                2,
            )
            expected_out, expected_S = delta_rule_recurrent(
                q[..., t, :],
                k[..., t, :],
                v[..., t, :],
                beta[..., t],
                decay=decay[..., t],
                state=state,
            )
            same("state", S, expected_S, by)
            same("output", out, expected_out[..., 0, :], by)
    with run.case(f"{T} steps from a zero state"):
        S = torch.zeros(N, H, D, D_v, dtype=F64)
        outs = []
        for t in range(T):
            out, S = _tuple(
                "delta_rule_step",
                fn(S, q[..., t, :], k[..., t, :], v[..., t, :], beta[..., t], alpha[..., t]),
                2,
            )
            outs.append(out)
        expected_out, expected_S = delta_rule_recurrent(q, k, v, beta, decay=alpha)
        same("outputs", torch.stack(outs, dim=-2), expected_out, by)
        same("state after the last step", S, expected_S, by)


# ---------------------------------------------------------------- running the checks


def _find(name: str) -> Exercise:
    for ex in EXERCISES.values():
        if name in (ex.name, ex.id):
            return ex
    raise KeyError(f"no exercise {name!r}; the exercises are {', '.join(EXERCISES)}")


def where(ex: Exercise) -> str:
    """Where the book teaches the exercise: ``chapter 3, section "Masks"``."""
    return f'chapter {ex.chapter}, section "{ex.section}"'


def run(name: str, fn=None) -> list[tuple[str, str | None]]:
    """Run the checks of exercise ``name`` on ``fn``; return ``(case, message)`` per case.

    ``fn`` defaults to the stub of that name in :mod:`exercises.stubs`, your code. The
    message is ``None`` for a case that passes. ``NotImplementedError`` is raised through.
    """
    ex = _find(name)
    if fn is None:
        from exercises import stubs

        fn = getattr(stubs, ex.name)
    result = Run()
    ex.checks(fn, result)
    return result.results


def one_line(name: str, fn=None) -> str | None:
    """What is wrong with ``fn`` in one line, or ``None`` if it passes every check.

    The line names the exercise and either says it is not implemented yet (and where the book
    teaches it) or gives the first failing case, its message, and how many more fail.
    """
    ex = _find(name)
    try:
        results = run(name, fn)
    except NotImplementedError:
        return f"{ex.title}: not implemented yet (see {where(ex)})"
    failures = [(case, message) for case, message in results if message is not None]
    if not failures:
        return None
    case, message = failures[0]
    more = f" (and {len(failures) - 1} more; check({ex.name!r}) lists them)" if failures[1:] else ""
    return f"{ex.title}: {case}: {message}{more}"


def check(name: str, fn=None) -> None:
    """Run the checks of exercise ``name`` on ``fn`` and print one line per case.

    Call it in a notebook cell after writing your function::

        from exercises import check
        check("attention", my_attention)

    Args:
        name: the exercise, by its name (``"attention"``) or id (``"ex03b"``).
        fn: your function (your class for ``PreallocatedCache``); by default the one in
            ``lib/exercises/stubs.py``.
    """
    ex = _find(name)
    label = fn.__name__ if fn is not None and hasattr(fn, "__name__") else f"stubs.{ex.name}"
    try:
        results = run(name, fn)
    except NotImplementedError:
        print(f"{ex.title}: not implemented yet (see {where(ex)})")
        return
    passed = sum(message is None for _, message in results)
    print(f"{ex.title} ({label}): {passed} of {len(results)} checks pass")
    for case, message in results:
        print(f"  ok    {case}" if message is None else f"  FAIL  {case}: {message}")
