"""The checks themselves: every stub says where to read, and every check catches a wrong answer.

Each exercise gets one or more deliberately wrong solutions, the mistakes a reader makes (a
missing scale, the other mask convention, a transpose forgotten); its checks must fail on each
of them. A check that passes them all cannot fail, and would be a defect.
"""

import inspect
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from exercises import solutions as good
from exercises import stubs
from exercises.checks import EXERCISES, Mismatch, check, one_line, run, same


def test_every_chapter_has_an_exercise():
    assert len(EXERCISES) >= 12
    assert {ex.chapter for ex in EXERCISES.values()} == set(range(1, 18))
    assert len({ex.id for ex in EXERCISES.values()}) == len(EXERCISES)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_stub_says_where_to_read(name):
    """The stub raises NotImplementedError naming the chapter and section of the registry."""
    ex = EXERCISES[name]
    stub = getattr(stubs, name)
    assert stub.__doc__ and getattr(good, name)
    where = f'^see chapter {ex.chapter}, "[^"]+", section "{re.escape(ex.section)}"$'
    with pytest.raises(NotImplementedError, match=where):
        stub(*[None] * len(inspect.signature(stub).parameters))


def _unstable_softmax(x, dim=-1):
    return x.exp() / x.exp().sum(dim=dim, keepdim=True)


def _attention_unscaled(q, k, v, mask=None):
    return good.attention(q * math.sqrt(q.shape[-1]), k, v, mask)


def _attention_inverted_mask(q, k, v, mask=None):
    return good.attention(q, k, v, None if mask is None else ~mask | mask.all(-1, keepdim=True))


def _attention_wrong_axis(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-2)
    return weights @ v, weights


def _backward_without_rowsum(q, k, v, grad):
    scale = 1 / math.sqrt(q.shape[-1])
    A = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    dS = A * (grad @ v.transpose(-2, -1))
    return dS @ k * scale, dS.transpose(-2, -1) @ q * scale, A.transpose(-2, -1) @ grad


def _rope_rotate_half(x, base=10000.0):
    D = x.shape[-1]
    interleaved = torch.cat([x[..., : D // 2], x[..., D // 2 :]], dim=-1)
    return good.rope(interleaved.unflatten(-1, (2, D // 2)).transpose(-2, -1).flatten(-2), base)


def _layer_norm_unbiased(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b


def _mlp_tanh_gelu(x, lw, lb, w1, b1, w2, b2, eps=1e-5):
    y = torch.nn.functional.gelu(good.layer_norm(x, lw, lb, eps) @ w1.T + b1, approximate="tanh")
    return x + y @ w2.T + b2


def _kneser_ney_plain_unigram(ids, prev, word, V, discount=0.75):
    ids = list(ids)
    p_w = (ids.count(word) + 1) / (len(ids) + V)  # counts, not continuation counts
    total = sum(1 for u in ids[:-1] if u == prev)
    if total == 0:
        return p_w
    after = len({w for u, w in zip(ids, ids[1:]) if u == prev})
    c = sum(1 for u, w in zip(ids, ids[1:]) if (u, w) == (prev, word))
    return max(c - discount, 0) / total + discount * after / total * p_w


def _bpe_largest_pair_on_ties(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    best = max(counts.values())
    a, b = max(p for p, c in counts.items() if c == best)
    merged = {}
    for word, n in words.items():
        text = "\x00".join(word).replace(f"{a}\x00{b}", a + b)  # exact for one-letter tokens
        merged[tuple(text.split("\x00"))] = n
    return (a, b), merged


def _wordpiece_shortest_first(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def _induction_on_the_earlier_occurrence(weights, T):
    t = torch.arange(T + 1, 2 * T + 1)
    return weights[..., t, t - T].mean(-1)


def _step_before_append(cache_k, cache_v, q, k, v):
    if cache_k is None:
        return v, k, v
    out, _ = good.attention(q, cache_k, cache_v)
    return out, torch.cat([cache_k, k], -2), torch.cat([cache_v, v], -2)


def _mha_without_out_bias(q, k, v, w_in, b_in, w_out, b_out, H):
    return good.torch_mha_forward(q, k, v, w_in, b_in, w_out, torch.zeros_like(b_out), H)


def _keras_without_transpose(w_q, w_o, H):
    E = w_q.shape[0]
    return w_q.reshape(E, H, E // H), w_o.reshape(H, E // H, E)


def _additive_scaled(q, k, v, w_q, w_k, vec):
    return good.additive_attention(q, k, v, w_q, w_k, vec / math.sqrt(vec.shape[0]))


def _tiled_without_rescaling(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    m = q.new_full((*q.shape[:-1], 1), -math.inf)
    l, o = q.new_zeros(*q.shape[:-1], 1), q.new_zeros(*q.shape[:-1], v.shape[-1])  # noqa: E741
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start : start + block_size, :].transpose(-2, -1) * scale
        m = torch.maximum(m, s.amax(-1, keepdim=True))
        p = (s - m).exp()
        l, o = l + p.sum(-1, keepdim=True), o + p @ v[..., start : start + block_size, :]  # noqa: E741
    return o / l


class _CatCache:
    """Right values, but a new tensor every step (torch.cat), not views of one buffer."""

    def __init__(self, max_len):
        self.max_len, self.length, self.k, self.v = max_len, 0, None, None

    def update(self, key, value):
        if self.length + key.shape[-2] > self.max_len:
            raise ValueError("full")
        self.k = key if self.k is None else torch.cat([self.k, key], -2)
        self.v = value if self.v is None else torch.cat([self.v, value], -2)
        self.length += key.shape[-2]
        return self.k, self.v


class _UnboundedCache(good.PreallocatedCache):
    """Views of one buffer, but a step past max_len is silently cut instead of refused."""

    def update(self, key, value):
        room = self.max_len - self.length
        return super().update(key[..., :room, :], value[..., :room, :])


def _linear_attention_step(state, q, k, v, beta, alpha):
    new = alpha[..., None, None] * state + beta[..., None, None] * k[..., :, None] * v[..., None, :]
    return (q.unsqueeze(-2) @ new).squeeze(-2), new


WRONG = {
    "nearest_neighbours": [
        lambda u, vs, k: (vs @ u).topk(k).indices,  # dot products, not cosines
        lambda u, vs, k: good.nearest_neighbours(u, vs, k).flip(0),  # the least similar first
    ],
    "cosine_matrix": [
        lambda a, b: a @ b.T,
        lambda a, b: (a / a.norm(dim=0)) @ (b / b.norm(dim=0)).T,  # normalised by columns
    ],
    "softmax": [_unstable_softmax, lambda x, dim=-1: good.softmax(x, -1)],  # dim ignored
    "attention": [_attention_unscaled, _attention_inverted_mask, _attention_wrong_axis],
    "attention_head": [
        lambda x, wq, wk, wv, causal=False: good.attention_head(x, wq, wk, wv, False),
        lambda x, wq, wk, wv, causal=False: good.attention_head(x, wk, wq, wv, causal),
    ],
    "split_heads": [
        lambda x, H: x.view(x.shape[0], x.shape[1], H, -1),  # not transposed
        lambda x, H: x.reshape(x.shape[0], H, x.shape[1], -1),  # positions mixed into heads
    ],
    "merge_heads": [lambda x: x.reshape(x.shape[0], x.shape[2], -1)],  # not transposed first
    "attention_backward": [
        _backward_without_rowsum,
        lambda q, k, v, g: (lambda r: (r[0] * math.sqrt(q.shape[-1]), r[1], r[2]))(
            good.attention_backward(q, k, v, g)
        ),  # dQ without its 1/sqrt(d_k)
    ],
    "rope": [
        _rope_rotate_half,
        lambda x, base=10000.0: good.rope(torch.cat([x[..., :1, :] * 0, x], -2), base)[..., 1:, :],
    ],  # positions from 1
    "layer_norm": [
        _layer_norm_unbiased,
        lambda x, w, b, eps=1e-5: good.layer_norm(x, w, b, 0.0) + 0 * eps,  # eps ignored
    ],
    "block_mlp": [
        _mlp_tanh_gelu,
        lambda x, *ws, eps=1e-5: good.block_mlp(x, *ws, eps=eps) - x,  # no residual
    ],
    "kneser_ney": [
        _kneser_ney_plain_unigram,
        lambda ids, u, w, V, d=0.75: good.kneser_ney(ids, u, w, V, 0.75),  # discount ignored
    ],
    "bpe_merge": [
        _bpe_largest_pair_on_ties,
        lambda words: (good.bpe_merge(words)[0], dict(words)),  # the words not merged
    ],
    "wordpiece": [
        _wordpiece_shortest_first,
        lambda word, vocab: good.wordpiece(word, {p.removeprefix("##") for p in vocab}),
    ],
    "induction_score": [
        _induction_on_the_earlier_occurrence,
        lambda A, T: A[..., T + 1 :, :].diagonal(-T + 1, -2, -1).sum(-1) / (T + 1),
    ],
    "cached_attention_step": [_step_before_append],
    "torch_mha_forward": [
        _mha_without_out_bias,
        lambda *a: (lambda r: (r[0], r[1] * 0 + r[1].amax(-1, keepdim=True)))(
            good.torch_mha_forward(*a)
        ),
    ],
    "keras_kernels": [_keras_without_transpose],
    "additive_attention": [_additive_scaled],
    "tiled_attention": [
        _tiled_without_rescaling,
        lambda q, k, v, b: good.tiled_attention(q, k[..., :-1, :], v[..., :-1, :], b),  # S - 1
        lambda q, k, v, b: torch.nn.functional.scaled_dot_product_attention(q, k, v),  # all at once
        lambda q, k, v, b: good.attention(q, k, v)[0],  # the (L, S) weights, by hand
    ],
    "PreallocatedCache": [_CatCache, _UnboundedCache],
    "delta_rule_step": [
        _linear_attention_step,
        lambda S, q, k, v, beta, alpha: good.delta_rule_step(S, q, k, v, beta, alpha * 0 + 1),
    ],
}


def test_every_exercise_has_wrong_solutions():
    assert set(WRONG) == set(EXERCISES)


@pytest.mark.parametrize(
    "name, i", [(name, i) for name, wrongs in WRONG.items() for i in range(len(wrongs))]
)
def test_the_checks_catch_a_wrong_solution(name, i):
    results = run(name, WRONG[name][i])
    failing = [message for _, message in results if message is not None]
    assert failing, f"{name}: wrong solution {i} passes every check"


ROOT = Path(__file__).resolve().parents[2]


def _chapter_files() -> list[str]:
    """The numbered chapters in the order of _toc.yml, which numbers them 1, 2, ..."""
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    numbered = toc.split("- caption: Look up")[0]
    return re.findall(r"file: chapters/(\S+)", numbered)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_chapter_and_section_are_the_books(name):
    """The stub's chapter number, title and section are those of the chapter as the book has it."""
    ex = EXERCISES[name]
    notebook = ROOT / "chapters" / f"{_chapter_files()[ex.chapter - 1]}.ipynb"
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    headings = [
        line.lstrip("#").strip()
        for cell in cells
        if cell["cell_type"] == "markdown"
        for line in "".join(cell["source"]).splitlines()
        if line.startswith("#")
    ]
    title = re.search(r'"([^"]+)", section', _stub_message(name))[1]
    assert headings[0] == title, (notebook.name, headings[0])
    assert ex.section in headings, (notebook.name, ex.section)


def _stub_message(name: str) -> str:
    stub = getattr(stubs, name)
    with pytest.raises(NotImplementedError) as raised:
        stub(*[None] * len(inspect.signature(stub).parameters))
    return str(raised.value)


def test_the_site_page_lists_every_exercise_under_its_chapter():
    """chapters/exercises.md documents each stub once, under the heading of its chapter."""
    page = (ROOT / "chapters" / "exercises.md").read_text(encoding="utf-8")
    listed = {}
    for part in re.split(r"^## Chapter ", page, flags=re.M)[1:]:
        chapter = int(re.match(r"\d+", part)[0])
        for name in re.findall(
            r"^\.\. auto(?:function|class):: exercises\.stubs\.(\w+)", part, re.M
        ):
            listed[name] = chapter
    assert listed == {name: ex.chapter for name, ex in EXERCISES.items()}


# ---------------------------------------------------------------- what the reader sees


def test_check_prints_one_line_per_case(capsys):
    check("softmax", good.softmax)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ex03a softmax (softmax): 5 of 5 checks pass"
    assert len(lines) == 6 and all(line.startswith("  ok    ") for line in lines[1:])


def test_check_on_a_stub_prints_one_line(capsys):
    check("ex03a")  # the stub in stubs.py, found by its id
    out = capsys.readouterr().out
    assert out == 'ex03a softmax: not implemented yet (see chapter 3, section "Softmax")\n'


def test_an_error_in_the_readers_code_is_one_line_of_its_case():
    def broken(x, dim=-1):
        raise IndexError("dimension out of range\n(a second line)")

    results = run("softmax", broken)
    assert len(results) == 5
    assert all(m == "raised IndexError: dimension out of range" for _, m in results)


def test_an_unknown_exercise_is_named():
    with pytest.raises(KeyError, match="no exercise 'softmx'; the exercises are nearest_"):
        check("softmx", good.softmax)


def test_a_wrong_shape_and_a_wrong_value_are_located():
    with pytest.raises(Mismatch, match=r"^out has shape \(2, 3\), expected \(3, 2\) \(ref\)$"):
        same("out", torch.zeros(2, 3), torch.zeros(3, 2), "ref")
    expected = torch.zeros(2, 3, dtype=torch.float64)
    got = expected.clone()
    got[1, 2] = 0.5
    with pytest.raises(Mismatch, match=r"^out\[1, 2\] is 0.5, expected 0 \(ref\); 1 of 6 values"):
        same("out", got, expected, "ref")
    with pytest.raises(Mismatch, match="out has dtype torch.float32, expected torch.float64"):
        same("out", got.float(), expected, "ref")
    with pytest.raises(Mismatch, match="out is a list, expected a tensor"):
        same("out", [0.0], expected, "ref")


def test_make_exercises_prints_one_line_per_failing_exercise():
    """What `make exercises` prints: no traceback, one line per exercise that fails."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "lib/exercises/test_exercises.py"]
        + ["-q", "--tb=line", "-rN", "-n", "0", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout
    failed = int(re.search(r"(\d+) failed", out)[1]) if "failed" in out else 0
    lines = [line for line in out.splitlines() if re.match(r"ex\d\d[a-z]? ", line)]
    assert len(lines) == failed, out
    assert "Traceback" not in out and ".py:" not in out, out
    stubs_left = [ln for ln in lines if "not implemented yet (see chapter " in ln]
    assert all(ln.endswith('")') for ln in stubs_left), stubs_left


def test_the_failure_the_site_page_quotes_is_what_the_checks_say():
    """chapters/exercises.md quotes the line of an attention with the other mask convention."""

    def other_convention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, -math.inf)  # masks where the mask is True
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    page = (ROOT / "chapters" / "exercises.md").read_text(encoding="utf-8")
    quoted = " ".join(line[2:] for line in page.splitlines() if line.startswith("> "))
    assert one_line("attention", other_convention) == quoted
    # and its notebook example, the softmax without the maximum: "three cases of five"
    results = run("softmax", _unstable_softmax)
    assert "passes three cases of five" in page
    assert [case for case, message in results if message] == [
        "scores near 1000 (no overflow)",
        "scores near -1000 (no 0/0)",
    ]
