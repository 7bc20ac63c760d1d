"""Additive float masks on every path that takes a mask.

A float mask is added to the scaled scores exactly as ``F.scaled_dot_product_attention``'s
``attn_mask``; ``-inf`` blocks a key; a row that is all ``-inf`` gives zeros, never NaN.
Oracles: ``F.scaled_dot_product_attention`` and ``torch.nn.MultiheadAttention`` (float
``attn_mask``), with all-different sizes (E=12, H=3, D=4, L=5, S=7, N=2).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import (
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    SelfAttention,
    attention_weights,
    scaled_dot_product_attention,
)
from attnlib.convert import naive_from_fused, to_torch
from attnlib.efficient import tiled_attention
from attnlib.positions import alibi_bias
from hypothesis import given
from hypothesis import strategies as st

E, H, D, L, S, N = 12, 3, 4, 5, 7, 2
NEG_INF = -math.inf


def float_mask(*shape, seed=0, p_block=0.3, dtype=torch.float32):
    """Random biases with some -inf entries, and at least one finite entry per row."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.randn(*shape, generator=g, dtype=dtype)
    blocked = torch.rand(*shape, generator=g) < p_block
    blocked[..., 0] = False
    return mask.masked_fill(blocked, NEG_INF)


def qkv(seed=0, batch=(N, H), dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(*batch, L, D, generator=g, dtype=dtype),
        torch.randn(*batch, S, D, generator=g, dtype=dtype),
        torch.randn(*batch, S, 6, generator=g, dtype=dtype),
    )


@pytest.mark.parametrize("mask_shape", [(L, S), (N, H, L, S), (N, 1, L, S), (H, 1, S), (S,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_float_mask_equals_torch(mask_shape, dtype):
    q, k, v = qkv(1, dtype=dtype)
    mask = float_mask(*mask_shape, seed=2, dtype=dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    full = mask.expand(N, H, L, S)  # F.sdpa raises IndexError on a 1-D mask (torch 2.13)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=full))
    torch.testing.assert_close(w.sum(-1), torch.ones(N, H, L, dtype=dtype))
    assert (w[(mask == NEG_INF).expand_as(w)] == 0).all()


def test_weights_by_hand():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    mask = torch.tensor([0.0, math.log(2.0), NEG_INF])
    # scores (1, 0, -) / sqrt 2 plus (0, ln 2, -inf): e^{0.7071} : 2 e^{0} : 0
    a, b = math.exp(1 / math.sqrt(2)), 2.0
    expected = torch.tensor([[a / (a + b), b / (a + b), 0.0]])
    torch.testing.assert_close(attention_weights(q, k, mask=mask), expected)


def test_boolean_and_float_forms_agree():
    q, k, v = qkv(3)
    allowed = float_mask(N, H, L, S, seed=4) > -1.0  # a boolean mask
    allowed[..., 0] = True
    as_float = torch.zeros(allowed.shape).masked_fill(~allowed, NEG_INF)
    out_b, w_b = scaled_dot_product_attention(q, k, v, mask=allowed)
    out_f, w_f = scaled_dot_product_attention(q, k, v, mask=as_float)
    torch.testing.assert_close(out_b, out_f)
    torch.testing.assert_close(w_b, w_f)


def test_float_mask_is_added_after_scaling():
    q, k, v = qkv(5)
    mask = float_mask(L, S, seed=6)
    for scale in (0.1, 1.0, 3.0):
        _, w = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
        expected = torch.softmax(q @ k.transpose(-2, -1) * scale + mask, dim=-1)
        torch.testing.assert_close(w, expected)


@pytest.mark.parametrize("path", ["weights", "sdpa", "tiled", "self", "fused", "fast", "naive"])
def test_all_minus_inf_row_gives_zeros_not_nan(path):
    q, k, v = qkv(7, batch=(N,))
    mask = float_mask(N, L, S, seed=8)
    mask[:, 2] = NEG_INF  # query 2 sees nothing
    if path == "weights":
        out = attention_weights(q, k, mask=mask)
    elif path == "sdpa":
        out = torch.cat(scaled_dot_product_attention(q, k, v, mask=mask), dim=-1)
    elif path == "tiled":
        out = tiled_attention(q, k, v, mask=mask, block_size=3)
    else:
        x, kv = torch.randn(N, L, E), torch.randn(N, S, E)
        if path == "self":
            out, _ = SelfAttention(E, head_dim=D, bias=True)(x, mask=mask, key=kv)
        else:
            cls = NaiveMultiHeadAttention if path == "naive" else MultiHeadAttention
            m = cls(E, H, bias=False)
            out, _ = m(x, kv, mask=mask, need_weights=path != "fast")
    assert not out.isnan().any()
    assert (out[:, 2] == 0).all()
    assert (out[:, [0, 1, 3, 4]] != 0).any(dim=-1).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 3, 7, 128])
@pytest.mark.parametrize("mask_shape", [(L, S), (N, H, L, S), (N, H, 1, S), (S,)])
def test_tiled_float_mask_equals_exact(causal, block_size, mask_shape):
    q, k, v = qkv(9)
    mask = float_mask(*mask_shape, seed=10)
    full = mask.expand(N, H, L, S)  # F.sdpa raises IndexError on a 1-D mask (torch 2.13)
    if causal:
        full = full + torch.where(torch.ones(L, S).tril().bool(), 0.0, NEG_INF)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=full)
    out = tiled_attention(q, k, v, mask=mask, is_causal=causal, block_size=block_size)
    torch.testing.assert_close(out, expected)


def test_tiled_boolean_mask_equals_exact():
    q, k, v = qkv(11)
    mask = float_mask(N, 1, L, S, seed=12) > -0.5
    mask[..., 1] = True
    out = tiled_attention(q, k, v, mask=mask, block_size=2)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_shape", [(L, S), (N, L, S), (N, H, L, S), (N, 1, S)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multihead_float_mask_equals_torch_nn(cls, need_weights, mask_shape, dtype):
    torch.manual_seed(13)
    fused = MultiHeadAttention(E, H, bias=True)
    with torch.no_grad():
        for p in fused.parameters():
            p.normal_(0.0, 0.5)  # random biases too
    m = (fused if cls is MultiHeadAttention else naive_from_fused(fused)).to(dtype)
    ref = to_torch(fused).to(dtype)
    query, key = torch.randn(N, L, E, dtype=dtype), torch.randn(N, S, E, dtype=dtype)
    value = torch.randn(N, S, E, dtype=dtype)
    mask = float_mask(*mask_shape, seed=14, dtype=dtype)
    out, w = m(query, key, value, mask=mask, need_weights=need_weights)
    # torch.nn.MultiheadAttention wants a float attn_mask of shape (L, S) or (N*H, L, S)
    full = mask.unsqueeze(1) if len(mask_shape) == 3 else mask  # (N, 1, L|1, S)
    full = full.expand(N, H, L, S).reshape(N * H, L, S)  # (N*H, L, S)
    expected, expected_w = ref(query, key, value, attn_mask=full, average_attn_weights=False)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(w, expected_w)
    else:
        assert w is None


def test_multihead_float_mask_cast_to_query_dtype_on_the_fast_path():
    m = MultiHeadAttention(E, H).double()
    x = torch.randn(L, E, dtype=torch.float64)
    mask = float_mask(L, L, seed=15)  # float32 mask, float64 input
    slow, _ = m(x, mask=mask)
    fast, _ = m(x, mask=mask, need_weights=False)
    torch.testing.assert_close(fast, slow)
    assert fast.dtype == torch.float64


def test_alibi_per_head_mask_unbatched_multihead():
    torch.manual_seed(16)
    m = MultiHeadAttention(E, H)
    x = torch.randn(L, E)
    bias = alibi_bias(H, L)  # (H, L, L)
    out, w = m(x, mask=bias)
    fast, _ = m(x, mask=bias, need_weights=False)
    torch.testing.assert_close(fast, out)
    naive_out, naive_w = naive_from_fused(m)(x, mask=bias)
    torch.testing.assert_close(naive_out, out)
    torch.testing.assert_close(naive_w, w)


def test_self_attention_float_mask():
    torch.manual_seed(17)
    head = SelfAttention(E, head_dim=D, bias=True)
    x = torch.randn(N, L, E)
    mask = float_mask(L, L, seed=18)
    out, w = head(x, mask=mask)
    q, k, v = head.q_proj(x), head.k_proj(x), head.v_proj(x)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@given(
    seed=st.integers(0, 2**16),
    Lq=st.integers(1, 6),
    Sk=st.integers(1, 6),
    shift=st.floats(-50, 50),
)
def test_property_a_constant_added_to_a_row_changes_nothing(seed, Lq, Sk, shift):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(Lq, 3, generator=g), torch.randn(Sk, 3, generator=g)
    mask = torch.randn(Lq, Sk, generator=g)
    w = attention_weights(q, k, mask=mask)
    torch.testing.assert_close(attention_weights(q, k, mask=mask + shift), w)


@pytest.mark.parametrize(
    "fn",
    [
        lambda m: attention_weights(torch.randn(L, D), torch.randn(S, D), mask=m),
        lambda m: tiled_attention(torch.randn(L, D), torch.randn(S, D), torch.randn(S, D), mask=m),
        lambda m: MultiHeadAttention(E, H)(torch.randn(L, E), torch.randn(S, E), mask=m),
        lambda m: MultiHeadAttention(E, H)(
            torch.randn(L, E), torch.randn(S, E), mask=m, need_weights=False
        ),
    ],
    ids=["weights", "tiled", "fused", "fast"],
)
def test_bad_float_mask_shape(fn):
    with pytest.raises(ValueError, match=r"mask must have shape .*\(broadcastable\); got \(5, 6\)"):
        fn(torch.zeros(L, S - 1))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_tiled_refuses_integer_mask(dtype):
    with pytest.raises(TypeError, match=rf"mask must be boolean .* got dtype {dtype}"):
        tiled_attention(
            torch.randn(L, D),
            torch.randn(S, D),
            torch.randn(S, D),
            mask=torch.ones(L, S, dtype=dtype),
        )
