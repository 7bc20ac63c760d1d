"""attnlib.multihead: fused and naive multi-head attention (and the forward signature they
share with attnlib.SelfAttention).

Dimension sizes are all different (E=12, H=3 or 4, D=E/H, L=5, S=7, N=2) so that an axis
mix-up cannot pass. torch.nn.MultiheadAttention itself is the oracle in test_convert.py.
"""

import inspect
import math

import attnlib.attention as attention_module
import pytest
import torch
import torch.nn.functional as F
from attnlib import MultiHeadAttention, NaiveMultiHeadAttention, SelfAttention, causal_mask
from attnlib.convert import naive_from_fused
from hypothesis import given
from hypothesis import strategies as st

E, L, S, N = 12, 5, 7, 2


def by_hand(m: MultiHeadAttention, query, key, value, mask=None):
    """Multi-head attention written out head by head with explicit slices; ``mask`` is
    ``(..., H, L, S)``."""
    D = m.head_dim
    q, k, v = m.q_proj(query), m.k_proj(key), m.v_proj(value)
    heads, weights = [], []
    for h in range(m.num_heads):
        cols = slice(h * D, (h + 1) * D)
        scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(D)
        if mask is not None:
            scores = scores.masked_fill(~mask.select(-3, h), -math.inf)
        w = torch.softmax(scores, dim=-1)
        heads.append(w @ v[..., cols])
        weights.append(w)
    return m.out_proj(torch.cat(heads, dim=-1)), torch.stack(weights, dim=-3)


@pytest.mark.parametrize("H", [1, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_fused_matches_head_by_head(H, bias, batched):
    m = MultiHeadAttention(E, H, bias=bias)
    batch = (N,) if batched else ()
    query, key, value = (
        torch.randn(*batch, L, E),
        torch.randn(*batch, S, E),
        torch.randn(*batch, S, E),
    )
    out, w = m(query, key, value)
    expected_out, expected_w = by_hand(m, query, key, value)
    assert out.shape == (*batch, L, E) and w.shape == (*batch, H, L, S)
    torch.testing.assert_close(out, expected_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w, expected_w, atol=1e-6, rtol=1e-5)


def test_key_and_value_default_to_query():
    m = MultiHeadAttention(E, 3)
    x = torch.randn(N, L, E)
    out, w = m(x)
    torch.testing.assert_close(out, m(x, x, x)[0])
    assert w.shape == (N, 3, L, L)
    kv = torch.randn(N, S, E)
    torch.testing.assert_close(m(x, kv)[0], m(x, kv, kv)[0])


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("mask_shape", ["LS", "NLS", "NHLS"])
def test_masks_of_every_documented_shape(cls, mask_shape):
    torch.manual_seed(1)
    m = cls(E, 3)
    query, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    full = torch.rand(N, 3, L, S) > 0.5
    full[..., 0] = True
    if mask_shape == "LS":
        mask, full = full[0, 0], full[0, 0].expand(N, 3, L, S)
    elif mask_shape == "NLS":
        mask, full = full[:, 0], full[:, :1].expand(N, 3, L, S)
    else:
        mask = full
    out, w = m(query, kv, mask=mask)
    assert (w[~full] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(N, 3, L))
    fused = m if cls is MultiHeadAttention else None
    if fused is not None:
        expected_out, expected_w = by_hand(m, query, kv, kv, mask=full)
        torch.testing.assert_close(out, expected_out, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(w, expected_w, atol=1e-6, rtol=1e-5)


def test_unbatched_per_head_mask():
    m = MultiHeadAttention(E, 4)
    x = torch.randn(L, E)
    mask = torch.rand(4, L, L) > 0.5
    mask[..., 1] = True
    out, w = m(x, mask=mask)
    assert out.shape == (L, E) and w.shape == (4, L, L)
    assert (w[~mask] == 0).all()
    out_b, w_b = m(x.unsqueeze(0), mask=mask.unsqueeze(0))
    torch.testing.assert_close(out, out_b[0])
    torch.testing.assert_close(w, w_b[0])


CLASSES = [SelfAttention, MultiHeadAttention, NaiveMultiHeadAttention]


def build(cls, bias=False):
    """A module of ``cls`` with E=12: one head of size 12, or 4 heads of size 3."""
    return cls(E, bias=bias) if cls is SelfAttention else cls(E, 4, bias=bias)


@pytest.mark.parametrize("cls", CLASSES)
def test_one_forward_signature(cls):
    """forward(query, key=None, value=None, *, mask=None, need_weights=True, cache=None) for
    both multi-head classes; the single head has no cache."""
    params = list(inspect.signature(cls.forward).parameters.values())[1:]  # without self
    names = [p.name for p in params]
    extra = [] if cls is SelfAttention else ["cache"]
    assert names == ["query", "key", "value", "mask", "need_weights", *extra]
    assert [p.default for p in params[1:]] == [None, None, None, True, *[None] * len(extra)]
    kinds = [p.kind for p in params]
    assert kinds[:3] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 3
    assert set(kinds[3:]) == {inspect.Parameter.KEYWORD_ONLY}  # everything after value


@pytest.mark.parametrize("cls", CLASSES)
def test_positional_arguments_in_the_order_query_key_value(cls):
    m = build(cls, bias=True)
    query, key, value = torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E)
    mask = causal_mask(L, S)
    out, w = m(query, key, value, mask=mask)
    out_kw, w_kw = m(query=query, key=key, value=value, mask=mask, need_weights=True)
    assert torch.equal(out, out_kw) and torch.equal(w, w_kw)
    assert m(query, key, value, mask=mask, need_weights=False)[1] is None
    with pytest.raises(TypeError, match="positional argument"):
        m(query, key, value, mask)  # mask is keyword-only
    self_out, _ = m(query)  # key and value default to query
    torch.testing.assert_close(self_out, m(query, query, query)[0])


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("batched", [False, True])
def test_need_weights_false_gives_the_same_output(cls, batched, monkeypatch):
    """need_weights=False takes F.scaled_dot_product_attention's path in all three classes
    (attnlib's own scaled_dot_product_attention, which forms the weights, is not called) and
    gives the same output."""
    m = build(cls, bias=True)
    batch = (N,) if batched else ()
    query, kv = torch.randn(*batch, L, E), torch.randn(*batch, S, E)
    fully_masked = causal_mask(L, S)
    fully_masked[1] = False  # query 1 sees nothing
    masks = [
        None,
        causal_mask(L, S),
        fully_masked,
        torch.zeros(L, S).masked_fill(~fully_masked, -math.inf),
    ]
    slow = [m(query, kv, mask=mask) for mask in masks]

    def refuse(*args, **kwargs):
        raise AssertionError("need_weights=False formed the weights")

    calls = []
    monkeypatch.setattr(attention_module, "scaled_dot_product_attention", refuse)
    monkeypatch.setattr(
        attention_module.F,
        "scaled_dot_product_attention",
        lambda *a, _f=F.scaled_dot_product_attention, **k: calls.append(1) or _f(*a, **k),
    )
    for mask, (out, w) in zip(masks, slow):
        out_fast, w_fast = m(query, kv, mask=mask, need_weights=False)
        assert w is not None and w_fast is None
        torch.testing.assert_close(out_fast, out, atol=1e-6, rtol=1e-5)
    assert len(calls) == len(masks) * (4 if cls is NaiveMultiHeadAttention else 1)


def test_need_weights_false_with_fully_masked_row_gives_zeros():
    m = MultiHeadAttention(E, 3)
    with torch.no_grad():
        m.out_proj.weight.copy_(torch.eye(E))  # see the heads' output directly
    x = torch.randn(L, E)
    mask = causal_mask(L)
    mask[2] = False  # query 2 attends to nothing
    out, w = m(x, mask=mask)
    out_fast, _ = m(x, mask=mask, need_weights=False)
    assert not torch.isnan(out_fast).any()
    assert torch.equal(out[2], torch.zeros(E)) and torch.equal(out_fast[2], torch.zeros(E))
    assert torch.equal(w[:, 2], torch.zeros(3, L))
    torch.testing.assert_close(out_fast, out, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("H", [1, 3, 4])
def test_naive_equals_fused(H):
    fused = MultiHeadAttention(E, H, bias=True)
    naive = naive_from_fused(fused)
    assert len(naive.heads) == H and naive.heads[0].q_proj.weight.shape == (E // H, E)
    query, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    torch.testing.assert_close(naive(query, kv)[0], fused(query, kv)[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(naive(query, kv)[1], fused(query, kv)[1], atol=1e-6, rtol=1e-5)


def test_no_hidden_state_is_stored():
    m = MultiHeadAttention(E, 3)
    before = set(vars(m))
    m(torch.randn(L, E))
    assert set(vars(m)) == before


def test_one_head_of_fused_attention_with_identity_weights_is_plain_attention():
    X = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    m = MultiHeadAttention(4, 1)
    with torch.no_grad():
        for p in (m.q_proj, m.k_proj, m.v_proj, m.out_proj):
            p.weight.copy_(torch.eye(4))
    out, w = m(X)
    torch.testing.assert_close(w[0, 0], torch.tensor([0.45186276, 0.27406862, 0.27406862]))
    torch.testing.assert_close(
        out[0], torch.tensor([0.4519, 0.6852, 0.5481, 1.0]), atol=5e-5, rtol=0
    )


def test_extra_repr():
    assert "embed_dim=12, num_heads=3, bias=True" in repr(MultiHeadAttention(12, 3, bias=True))
    assert "num_heads=4" in repr(NaiveMultiHeadAttention(12, 4))


# ---------------------------------------------------------------- properties


@given(st.integers(0, 2**31 - 1), st.sampled_from([1, 2, 3, 6]), st.integers(1, 7))
def test_property_self_attention_is_permutation_equivariant(seed, H, L_):
    g = torch.Generator().manual_seed(seed)
    m = MultiHeadAttention(6, H, bias=True)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    x = torch.randn(L_, 6, generator=g)
    perm = torch.randperm(L_, generator=g)
    out, w = m(x)
    out_p, w_p = m(x[perm])
    torch.testing.assert_close(out_p, out[perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w_p, w[:, perm][:, :, perm], atol=1e-6, rtol=1e-5)


@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.integers(1, 6))
def test_property_multihead_rows_sum_to_one_with_masks(seed, L_, S_):
    g = torch.Generator().manual_seed(seed)
    m = MultiHeadAttention(E, 4)
    query, kv = torch.randn(N, L_, E, generator=g), torch.randn(N, S_, E, generator=g)
    mask = torch.rand(N, 4, L_, S_, generator=g) > 0.6
    mask.scatter_(-1, torch.randint(0, S_, (N, 4, L_, 1), generator=g), True)
    empty = torch.rand(N, 4, L_, generator=g) < 0.2
    mask[empty] = False
    _, w = m(query, kv, mask=mask)
    torch.testing.assert_close(w.sum(-1), torch.where(empty, 0.0, 1.0))


@given(st.integers(0, 2**31 - 1), st.integers(1, 7), st.integers(0, 6))
def test_property_causal_multihead_ignores_the_future(seed, L_, t):
    t = t % L_
    g = torch.Generator().manual_seed(seed)
    m = MultiHeadAttention(E, 3, bias=True)
    x = torch.randn(N, L_, E, generator=g)
    x2 = x.clone()
    x2[:, t + 1 :] = torch.randn(N, L_ - t - 1, E, generator=g) * 10
    mask = causal_mask(L_)
    torch.testing.assert_close(m(x2, mask=mask)[0][:, : t + 1], m(x, mask=mask)[0][:, : t + 1])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_bad_embed_dim_not_divisible_by_heads(cls):
    with pytest.raises(
        ValueError, match=r"embed_dim must be divisible by num_heads; got embed_dim=12, num_heads=5"
    ):
        cls(12, 5)


@pytest.mark.parametrize("bad", [0, -2, 2.0, True])
def test_bad_num_heads(bad):
    error = ValueError if type(bad) is int else TypeError  # a wrong value, or a wrong type
    with pytest.raises(error, match="num_heads must be a positive integer; got"):
        MultiHeadAttention(12, bad)


def test_bad_key_size():
    m = MultiHeadAttention(E, 3)
    with pytest.raises(ValueError, match=r"key must have shape \(N=2, S, E=12\); got \(2, 7, 10\)"):
        m(torch.randn(N, L, E), torch.randn(N, S, 10))
    with pytest.raises(ValueError, match=r"key must have shape \(N=2, S, E=12\); got \(3, 7, 12\)"):
        m(torch.randn(N, L, E), torch.randn(3, S, E))
    with pytest.raises(ValueError, match=r"query must have shape \(L, E=12\); got \(5, 8\)"):
        m(torch.randn(L, 8))


def test_bad_value_length():
    m = MultiHeadAttention(E, 3)
    with pytest.raises(
        ValueError, match=r"value must have one row per key, S=7; got value \(2, 6, 12\)"
    ):
        m(torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, 6, E))


@pytest.mark.parametrize("shape", [(1, L, E), (N, 1, L, E), (E,)])
def test_bad_rank(shape):
    m = MultiHeadAttention(E, 3)
    x = torch.randn(*shape)
    if x.dim() == 3:  # batched query with an unbatched key
        with pytest.raises(ValueError, match=r"key must be 3-D; got 2-D with shape \(7, 12\)"):
            m(x, torch.randn(S, E))
    else:
        with pytest.raises(ValueError, match=rf"query must be 2-D or 3-D; got {x.dim()}-D"):
            m(x)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((L, L), r"\(2, 3, 5, 7\)"),
        ((N, L, L), r"\(2, 5, 7\)"),
        ((3, L, S), r"\(2, 5, 7\)"),  # (H, L, S) is not accepted for a batched input
        ((N, 4, L, S), r"\(2, 3, 5, 7\)"),
    ],
)
def test_bad_mask_shape(shape, expected):
    m = MultiHeadAttention(E, 3)
    mask = torch.ones(shape, dtype=torch.bool)
    with pytest.raises(
        ValueError,
        match=rf"mask must have shape \(L, S\), \(N, L, S\) or \(N, H, L, S\) = {expected}.*got",
    ):
        m(torch.randn(N, L, E), torch.randn(N, S, E), mask=mask)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("dtype", [torch.long, torch.uint8, torch.int32])
def test_bad_mask_dtype(cls, dtype):
    m = cls(E, 3)
    with pytest.raises(
        TypeError,
        match=r"mask must be boolean \(True = may attend\) or floating point \(added to the "
        rf"scores, -inf = blocked\); got dtype {dtype}",
    ):
        m(torch.randn(L, E), mask=torch.zeros(L, L, dtype=dtype))


def test_bad_input_type():
    m = MultiHeadAttention(E, 3)
    with pytest.raises(TypeError, match="query must be a torch.Tensor; got ndarray"):
        m(torch.randn(L, E).numpy())
    with pytest.raises(
        TypeError, match="query must be a floating-point tensor; got dtype torch.int64"
    ):
        m(torch.ones(L, E, dtype=torch.long))


def test_sdpa_reference_for_fast_path():
    """The fast path really is F.sdpa on the projected heads."""
    m = MultiHeadAttention(E, 3)
    x = torch.randn(N, L, E)
    q = m.q_proj(x).view(N, L, 3, 4).transpose(1, 2)
    k = m.k_proj(x).view(N, L, 3, 4).transpose(1, 2)
    v = m.v_proj(x).view(N, L, 3, 4).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(N, L, E)
    torch.testing.assert_close(m(x, need_weights=False)[0], m.out_proj(heads))


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_key_padding_mask_broadcasts_over_queries(cls):
    # A (N, 1, S) key-padding mask means the same as its expansion to (N, L, S).
    mha = cls(E, 3)
    x, y = torch.randn(N, L, E), torch.randn(N, S, E)
    keep = torch.ones(N, 1, S, dtype=torch.bool)
    keep[0, 0, -3:] = False  # the last three keys of sentence 0 are padding
    out, w = mha(x, y, mask=keep)
    expected_out, expected_w = mha(x, y, mask=keep.expand(N, L, S))
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(w, expected_w)
    assert w[0, :, :, -3:].abs().max() == 0  # no weight on padding, in every head and query
    assert w[1, :, :, -3:].min() > 0
