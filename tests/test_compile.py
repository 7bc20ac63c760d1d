"""Arguments are checked once, at the public entry, and the library traces as one graph.

- A spy counts the calls of the ``_checks`` functions in one forward of each multi-head class
  (E=12, H=4, N=2, L=5, causal mask): at most 8, nested calls included; as many in a forward
  of the language model, whatever its number of layers, and at most 2 per token generated.
- ``torch.compile(fullgraph=True)`` traces every public attention entry, the block and the
  language model, with no mask, a boolean mask and a float mask, and gives the eager result.
  The ``"eager"`` backend runs Dynamo's tracing (where a branch on tensor values would fail
  the ``fullgraph=True`` compile) without generating code, which keeps the test fast.
"""

from __future__ import annotations

import collections
import importlib
import math
import pkgutil

import attnlib
import attnlib._checks as checks
import pytest
import torch
from attnlib import (
    LanguageModel,
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    SelfAttention,
    TransformerBlock,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
)

E, H, N, L, S = 12, 4, 2, 5, 7


@pytest.fixture
def check_calls(monkeypatch):
    """A Counter of the calls of every ``check_*`` function of ``attnlib._checks``, wherever it
    is called from (the modules import the functions by name: each module's name is patched,
    and ``_checks``' own, so that a check calling another check counts both)."""
    counts = collections.Counter()
    names = [n for n in dir(checks) if n.startswith("check_")]
    modules = [
        importlib.import_module(f"attnlib.{m.name}") for m in pkgutil.iter_modules(attnlib.__path__)
    ]

    def spy(name, original):
        def counted(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        return counted

    for name in names:
        original = getattr(checks, name)
        counted = spy(name, original)
        for module in modules:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted)
    return counts


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_at_most_8_checks_per_forward(cls, need_weights, check_calls):
    torch.manual_seed(0)
    m = cls(E, H)
    x, key, value = torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E)
    mask, cross_mask = causal_mask(L), causal_mask(L, S)
    check_calls.clear()
    m(x, mask=mask, need_weights=need_weights)
    assert 1 <= sum(check_calls.values()) <= 8, dict(check_calls)
    check_calls.clear()  # cross-attention: three distinct tensors
    m(x, key, value, mask=cross_mask, need_weights=need_weights)
    assert sum(check_calls.values()) <= 8, dict(check_calls)


def test_the_block_checks_once(check_calls):
    """The block checks ``x`` and the mask; its attention layer does not check them again."""
    block = TransformerBlock(E, H)
    x, mask = torch.randn(N, L, E), causal_mask(L)
    check_calls.clear()
    block(x, mask=mask)
    assert sum(check_calls.values()) <= 4, dict(check_calls)


@pytest.mark.parametrize("num_layers", [1, 4, 12])
@pytest.mark.parametrize("window", [None, 3])
def test_the_model_checks_once(num_layers, window, check_calls):
    """The model checks ids (and the cache) and calls its blocks' private forward: at most 8
    check calls per forward, whatever num_layers (with 4 layers it made 14: every block's
    public forward checked again)."""
    lm = LanguageModel(30, E, H, num_layers, max_len=16, window=window).eval()
    ids = torch.randint(0, 30, (N, L))
    check_calls.clear()
    lm(ids, need_weights=True)
    assert 1 <= sum(check_calls.values()) <= 8, dict(check_calls)
    cache = lm.new_cache()
    lm(ids, cache=cache)
    check_calls.clear()
    lm(ids[:, :1], cache=cache)
    assert 1 <= sum(check_calls.values()) <= 8, dict(check_calls)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_checks_the_prompt_once(use_cache, check_calls):
    """generate checks its arguments on entry, then runs the model's private forward: at most
    2 check calls per generated token plus a constant for the prompt (41 for 5 tokens)."""
    lm = LanguageModel(30, E, H, 4, max_len=32).eval()
    ids = torch.randint(0, 30, (N, L))
    counts = []
    for tokens in (1, 5, 20):
        check_calls.clear()
        lm.generate(ids, tokens, temperature=0, use_cache=use_cache)
        counts.append(sum(check_calls.values()))
    assert counts[0] <= 8, counts
    assert counts[2] - counts[1] <= 2 * 15 and counts[1] - counts[0] <= 2 * 4, counts


# ---------------------------------------------------------------- torch.compile


def masks(kind: str, shape: tuple[int, ...]):
    """No mask, a boolean (causal, one row fully blocked) or a float mask (ALiBi-like)."""
    if kind == "none":
        return None
    allowed = torch.ones(*shape, dtype=torch.bool).tril()
    allowed[..., 1, :] = False  # a row with nothing to attend to: zeros, not NaN
    if kind == "bool":
        return allowed
    bias = -torch.arange(shape[-1], dtype=torch.float32) / 4
    return torch.where(allowed, bias, -math.inf)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled(fn):
    return torch.compile(fn, fullgraph=True, backend="eager")


def assert_same(got, expected):
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
    elif expected is None:
        assert got is None
    else:
        torch.testing.assert_close(got, expected)


KINDS = ["none", "bool", "float"]


@pytest.mark.parametrize("kind", KINDS)
def test_compile_functions(kind):
    torch.manual_seed(0)
    q, k, v = torch.randn(N, L, 8), torch.randn(N, S, 8), torch.randn(N, S, 6)
    mask = masks(kind, (L, S))

    def weights(q, k):
        return attention_weights(q, k, mask=mask)

    def sdpa(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask=mask, scale=0.3)

    assert_same(compiled(weights)(q, k), weights(q, k))
    assert_same(compiled(sdpa)(q, k, v), sdpa(q, k, v))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cls", [SelfAttention, MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_compile_attention_modules(cls, kind, need_weights):
    torch.manual_seed(0)
    m = (cls(E, bias=True) if cls is SelfAttention else cls(E, H, bias=True)).eval()
    x, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    mask = masks(kind, (L, S))

    def call(x, kv):
        return m(x, kv, mask=mask, need_weights=need_weights)

    assert_same(compiled(call)(x, kv), call(x, kv))


@pytest.mark.parametrize("kind", KINDS)
def test_compile_block(kind):
    torch.manual_seed(0)
    block = TransformerBlock(E, H).eval()
    x = torch.randn(N, L, E)
    mask = masks(kind, (L, L))

    def call(x):
        return block(x, mask=mask, need_weights=True)

    assert_same(compiled(call)(x), call(x))


@pytest.mark.parametrize(
    "positions,window",
    [("learned", None), ("alibi", None), ("rope", 3)],
    ids=["bool causal mask", "float ALiBi mask", "bool window mask"],
)
def test_compile_language_model(positions, window):
    """The model makes its own masks: causal (boolean), ALiBi's float bias, a window."""
    torch.manual_seed(0)
    lm = LanguageModel(30, E, 3, 2, max_len=16, positions=positions, window=window).eval()
    ids = torch.randint(0, 30, (N, L))

    def call(ids):
        return lm(ids, need_weights=True)

    assert_same(compiled(call)(ids), call(ids))


def test_compile_skips_only_the_value_check_of_ids():
    """Under compile the ids' range (a test of their values) is not checked; eager checks."""
    lm = LanguageModel(30, E, H, 1, max_len=16).eval()
    with pytest.raises(ValueError, match=r"ids must hold token indices in 0\.\.29"):
        lm(torch.tensor([[3, 30]]))


def test_compiled_masked_path_keeps_a_blocked_inf_value_out():
    """Under compile the exact weighted sum runs without testing the values first."""
    q, k, v = torch.randn(L, 4), torch.randn(S, 4), torch.randn(S, 3)
    v[-1, 0], v[-2, 1] = math.inf, math.nan  # keys 5 and 6: blocked for every query
    mask = causal_mask(L, S)

    def sdpa(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask=mask)

    out, _ = compiled(sdpa)(q, k, v)
    assert out.isfinite().all()
    assert_same(out, sdpa(q, k, v)[0])
    v[0, 2] = -math.inf  # key 0 is seen by every query: -inf reaches every output
    out, _ = compiled(sdpa)(q, k, v)
    assert (out[:, 2] == -math.inf).all() and out[:, :2].isfinite().all()
