"""attnlib.efficient: tiled attention (online softmax) equals exact attention."""

import pytest
import torch
import torch.nn.functional as F
from attnlib import causal_mask, scaled_dot_product_attention
from attnlib.efficient import tiled_attention
from hypothesis import given
from hypothesis import strategies as st

ATOL, RTOL = 1e-5, 1e-5


def exact(q, k, v, causal=False, scale=None):
    mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 3, 4, 7, 8, 128])
@pytest.mark.parametrize(("L", "S"), [(5, 7), (7, 5), (10, 10), (1, 9)])
def test_tiled_equals_exact(causal, block_size, L, S):
    q, k, v = torch.randn(L, 6), torch.randn(S, 6), torch.randn(S, 3)
    out = tiled_attention(q, k, v, is_causal=causal, block_size=block_size)
    assert out.shape == (L, 3)
    torch.testing.assert_close(out, exact(q, k, v, causal=causal), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_batched_heads(causal):
    N, H, L, S, D = 2, 3, 9, 11, 4  # S = 11 is not a multiple of block_size = 4
    q, k, v = torch.randn(N, H, L, D), torch.randn(N, H, S, D), torch.randn(N, H, S, D)
    out = tiled_attention(q, k, v, is_causal=causal, block_size=4)
    assert out.shape == (N, H, L, D)
    torch.testing.assert_close(out, exact(q, k, v, causal=causal), atol=ATOL, rtol=RTOL)


def test_tiled_broadcasts_batch_dimensions():
    q = torch.randn(2, 3, 5, 4)
    k, v = torch.randn(3, 7, 4), torch.randn(3, 7, 4)
    out = tiled_attention(q, k, v, block_size=2)
    torch.testing.assert_close(out, exact(q, k.expand(2, 3, 7, 4), v.expand(2, 3, 7, 4)))


def test_tiled_with_scale():
    q, k, v = torch.randn(5, 4), torch.randn(7, 4), torch.randn(7, 4)
    out = tiled_attention(q, k, v, block_size=3, scale=2.0)
    torch.testing.assert_close(out, exact(q, k, v, scale=2.0), atol=ATOL, rtol=RTOL)
    assert not torch.allclose(out, exact(q, k, v), atol=1e-3)


def test_tiled_is_stable_with_large_scores():
    """Scores around 1e4: the running maximum keeps every exponent <= 0."""
    q, k, v = torch.randn(6, 8) * 100, torch.randn(10, 8) * 100, torch.randn(10, 2)
    out = tiled_attention(q, k, v, block_size=3)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v)[0], atol=ATOL, rtol=RTOL)


def test_tiled_causal_with_more_queries_than_keys_never_divides_by_zero():
    q, k, v = torch.randn(8, 4), torch.randn(3, 4), torch.randn(3, 4)
    out = tiled_attention(q, k, v, is_causal=True, block_size=2)
    torch.testing.assert_close(out, exact(q, k, v, causal=True), atol=ATOL, rtol=RTOL)


def test_tiled_never_builds_the_full_score_matrix(monkeypatch):
    """Every product of the loop is at most (L, block_size) wide."""
    widths = []
    original = torch.Tensor.__matmul__

    def spy(a, b):
        result = original(a, b)
        widths.append(result.shape[-1])
        return result

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy)
    q, k, v = torch.randn(16, 4), torch.randn(40, 4), torch.randn(40, 4)
    tiled_attention(q, k, v, block_size=8)
    monkeypatch.undo()
    assert widths and max(widths) <= 8


# ---------------------------------------------------------------- property


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 12),
    st.integers(1, 12),
    st.integers(1, 6),
    st.integers(1, 14),
    st.booleans(),
    st.lists(st.integers(1, 3), max_size=2),
)
def test_property_tiled_equals_exact(seed, L, S, d, block_size, causal, batch):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, d, generator=g)
    k = torch.randn(*batch, S, d, generator=g)
    v = torch.randn(*batch, S, d + 2, generator=g)
    out = tiled_attention(q, k, v, is_causal=causal, block_size=block_size)
    torch.testing.assert_close(out, exact(q, k, v, causal=causal), atol=ATOL, rtol=RTOL)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("block_size", [0, -1, 1.5, True, "4"])
def test_bad_block_size(block_size):
    q = torch.randn(5, 4)
    error = ValueError if type(block_size) is int else TypeError  # a wrong value, or type
    got = (
        f"{block_size!r}" if error is ValueError else f"{type(block_size).__name__} {block_size!r}"
    )
    with pytest.raises(error, match=rf"block_size must be an integer >= 1; got {got}$"):
        tiled_attention(q, q, q, block_size=block_size)


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"same last dimension d_k; got query \(5, 4\)"):
        tiled_attention(torch.randn(5, 4), torch.randn(7, 3), torch.randn(7, 3))
    with pytest.raises(
        ValueError,
        match=r"value must have one row per key, shape \(\.\.\., S=7, d_v\); got \(6, 4\)",
    ):
        tiled_attention(torch.randn(5, 4), torch.randn(7, 4), torch.randn(6, 4))
    with pytest.raises(
        TypeError, match="value must be a floating-point tensor; got dtype torch.int64"
    ):
        tiled_attention(torch.randn(5, 4), torch.randn(7, 4), torch.ones(7, 4, dtype=torch.long))
