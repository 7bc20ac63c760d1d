"""attnlib.efficient: the log-sum-exp of tiled attention and flash_attention's backward by hand.

gradcheck (float64, finite differences) proves the hand-written backward; autograd through exact
attention at larger sizes (float32) checks it against PyTorch's own derivative.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import causal_mask, scaled_dot_product_attention
from attnlib.decoding import sliding_window_mask
from attnlib.efficient import flash_attention, tiled_attention
from hypothesis import given, settings
from hypothesis import strategies as st

N, H, L, S, D, BLOCK = 2, 3, 5, 7, 4, 3  # all different; L and S not multiples of BLOCK


def inputs(*shapes, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, dtype=dtype, generator=gen).requires_grad_() for s in shapes]


def padding_mask():
    """(N, 1, 1, S): the first sequence has 5 real keys, the second all 7."""
    keep = torch.ones(N, 1, 1, S, dtype=torch.bool)
    keep[0, ..., 5:] = False
    return keep


def exact_grads(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    """Output and gradients by autograd through attnlib's exact attention."""
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    kk, vv = k2, v2
    if enable_gqa:
        kk = k2.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        vv = v2.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    if is_causal:
        causal = causal_mask(q.shape[-2], k.shape[-2])
        mask = causal if mask is None else mask & causal
    out, _ = scaled_dot_product_attention(q2, kk, vv, mask=mask, scale=scale)
    return out, (q2, k2, v2)


# ---------------------------------------------------------------- the log-sum-exp


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 3, 8])
def test_lse_is_the_logsumexp_of_the_scaled_masked_scores(causal, block_size):
    q, k, v = (t.detach() for t in inputs((N, H, L, D), (N, H, S, D), (N, H, S, D)))
    mask = padding_mask()
    out, lse = tiled_attention(
        q, k, v, mask=mask, is_causal=causal, block_size=block_size, return_lse=True
    )
    assert lse.shape == (N, H, L)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~mask, -math.inf)
    if causal:
        scores = scores.masked_fill(~causal_mask(L, S), -math.inf)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1))
    assert torch.equal(
        out, tiled_attention(q, k, v, mask=mask, is_causal=causal, block_size=block_size)
    )


def test_lse_matches_the_query_leading_dims():
    q, k, v = (t.detach() for t in inputs((L, D), (S, D), (S, 6)))
    out, lse = tiled_attention(q, k, v, block_size=BLOCK, return_lse=True)
    assert out.shape == (L, 6) and lse.shape == (L,)
    q5 = q.expand(2, 3, 4, L, D)
    assert tiled_attention(q5, k, v, return_lse=True)[1].shape == (2, 3, 4, L)


def test_row_with_nothing_to_attend_has_lse_minus_inf_and_zero_output():
    q, k, v = (t.detach() for t in inputs((L, D), (S, D), (S, D)))
    mask = torch.ones(L, S, dtype=torch.bool)
    mask[2] = False
    for fn in (tiled_attention, flash_attention):
        out, lse = fn(q, k, v, mask=mask, block_size=BLOCK, return_lse=True)
        assert lse[2] == -math.inf and torch.isfinite(lse[[0, 1, 3, 4]]).all()
        assert torch.equal(out[2], torch.zeros(D, dtype=out.dtype))
    # a float mask of -inf, and S = 0 (no key at all), give the same
    blocked = torch.zeros(L, S, dtype=q.dtype).masked_fill(~mask, -math.inf)
    assert tiled_attention(q, k, v, mask=blocked, return_lse=True)[1][2] == -math.inf
    out, lse = tiled_attention(q, k[:0], v[:0], return_lse=True)
    assert (lse == -math.inf).all() and not out.any()


# ---------------------------------------------------------------- forward


@pytest.mark.parametrize("causal", [False, True])
def test_flash_forward_is_tiled_bit_for_bit(causal):
    q, k, v = inputs((N, H, 37, 16), (N, H, 50, 16), (N, H, 50, 8), dtype=torch.float32)
    mask = torch.rand(N, 1, 37, 50, generator=torch.Generator().manual_seed(1)) > 0.3
    got = flash_attention(q, k, v, mask=mask, is_causal=causal, block_size=16, return_lse=True)
    want = tiled_attention(q, k, v, mask=mask, is_causal=causal, block_size=16, return_lse=True)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert flash_attention(q, k, v).grad_fn is not None


# ---------------------------------------------------------------- gradcheck (float64)

CASES = {  # name -> (key/value heads, keyword arguments of flash_attention)
    "plain": (H, {}),
    "causal": (H, {"is_causal": True}),
    "padding": (H, {"mask": padding_mask()}),
    "padding + causal": (H, {"mask": padding_mask(), "is_causal": True}),
    "sliding window": (H, {"mask": sliding_window_mask(L, 2, S)}),
    "float mask": (H, {"mask": torch.randn(H, L, S, dtype=torch.float64)}),
    "scale": (H, {"scale": 0.7}),
    "grouped keys, G = 1": (1, {"enable_gqa": True}),
    "grouped keys, G = 1, causal": (1, {"enable_gqa": True, "is_causal": True}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name):
    G, kwargs = CASES[name]
    q, k, v = inputs((N, H, L, D), (N, G, S, D), (N, G, S, D))

    def fn(q, k, v):
        return flash_attention(q, k, v, block_size=BLOCK, return_lse=True, **kwargs)

    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_gradcheck_grouped_keys_with_a_per_head_mask():
    """H = 4 query heads share G = 2 key heads; the mask differs per query head."""
    q, k, v = inputs((N, 4, L, D), (N, 2, S, D), (N, 2, S, 3))
    mask = torch.rand(N, 4, L, S, generator=torch.Generator().manual_seed(2)) > 0.4
    mask[..., 0] = True  # every row attends somewhere: lse finite

    def fn(q, k, v):
        return flash_attention(
            q, k, v, mask=mask, block_size=BLOCK, enable_gqa=True, return_lse=True
        )

    assert torch.autograd.gradcheck(fn, (q, k, v))
    out, (q2, k2, v2) = exact_grads(q, k, v, mask=mask, enable_gqa=True)
    torch.testing.assert_close(fn(q, k, v)[0], out)


def test_gradcheck_broadcast_batch_dimensions():
    """key and value shared by the batch: their gradients are summed over it."""
    q, k, v = inputs((N, H, L, D), (H, S, D), (1, H, S, D))
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash_attention(q, k, v, block_size=BLOCK, is_causal=True), (q, k, v)
    )


def test_gradcheck_and_zero_gradients_for_a_row_with_nothing_to_attend():
    q, k, v = inputs((N, H, L, D), (N, H, S, D), (N, H, S, D))
    mask = sliding_window_mask(L, 2, S)
    mask[3] = False  # query 3 sees no key
    fn = lambda q, k, v: flash_attention(q, k, v, mask=mask, block_size=BLOCK)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))
    fn(q, k, v).pow(2).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert not q.grad[..., 3, :].any()


# ---------------------------------------------------------------- against autograd (float32)


def compare(kwargs, G=4, dtype=torch.float32, sizes=(2, 4, 300, 257, 32), block_size=64):
    """Max |flash - exact| over the output and the three gradients, for one upstream gradient."""
    n, h, length, s, d = sizes
    q, k, v = inputs((n, h, length, d), (n, G, s, d), (n, G, s, d), dtype=dtype, seed=3)
    grad = torch.randn(n, h, length, d, dtype=dtype, generator=torch.Generator().manual_seed(4))
    out = flash_attention(q, k, v, block_size=block_size, **kwargs)
    out.backward(grad)
    ref, ref_inputs = exact_grads(q, k, v, **kwargs)
    ref.backward(grad)
    diffs = [(out - ref).abs().max().item()]
    for mine, theirs in zip((q, k, v), ref_inputs):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=2e-5, rtol=1e-4)
        diffs.append((mine.grad - theirs.grad).abs().max().item())
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)
    return diffs


@pytest.mark.parametrize(
    "name",
    ["plain", "causal", "padding", "sliding window", "grouped keys", "grouped keys, causal"],
)
def test_gradients_equal_autograd_through_exact_attention(name):
    n, s = 2, 257
    pad = torch.ones(n, 1, 1, s, dtype=torch.bool)
    pad[1, ..., 200:] = False
    kwargs, G = {
        "plain": ({}, 4),
        "causal": ({"is_causal": True}, 4),
        "padding": ({"mask": pad}, 4),
        "sliding window": ({"mask": sliding_window_mask(300, 50, s)}, 4),
        "grouped keys": ({"enable_gqa": True}, 2),
        "grouped keys, causal": ({"enable_gqa": True, "is_causal": True}, 1),
    }[name]
    diffs = compare(kwargs, G=G)
    assert max(diffs) < 2e-5, diffs


def test_gradients_equal_pytorchs_fused_kernel():
    q, k, v = inputs((1, 2, 500, 64), (1, 2, 500, 64), (1, 2, 500, 64), dtype=torch.float32)
    flash_attention(q, k, v, is_causal=True).sum().backward()
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q2, k2, v2, is_causal=True).sum().backward()
    for mine, theirs in zip((q, k, v), (q2, k2, v2)):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=1e-4)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(1, 5),
    st.integers(1, 10),
    st.booleans(),
    st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]),
    st.booleans(),
)
def test_property_gradients_equal_exact(seed, L, S, d, block_size, causal, heads, padded):
    h, g = heads
    q, k, v = inputs((h, L, d), (g, S, d), (g, S, d + 1), seed=seed)
    mask = None
    if padded:  # a random boolean mask; some rows may see nothing
        mask = torch.rand(h, L, S, generator=torch.Generator().manual_seed(seed)) > 0.5
    kwargs = {"mask": mask, "is_causal": causal, "enable_gqa": g != h}
    grad = torch.randn(h, L, d + 1, dtype=torch.float64)
    out = flash_attention(q, k, v, block_size=block_size, **kwargs)
    out.backward(grad)
    ref, ref_inputs = exact_grads(q, k, v, **kwargs)
    ref.backward(grad)
    torch.testing.assert_close(out, ref)
    for mine, theirs in zip((q, k, v), ref_inputs):
        torch.testing.assert_close(mine.grad, theirs.grad)


# ---------------------------------------------------------------- what is saved


def saved_bytes(fn, *args):
    """Bytes of the distinct storages autograd keeps for backward while ``fn(*args)`` runs."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return sum(storages.values()), out


def test_flash_saves_order_L_d_and_tiled_order_L_S():
    n = 512
    q, k, v = inputs((1, 1, n, 16), (1, 1, n, 16), (1, 1, n, 16), dtype=torch.float32)
    flash, _ = saved_bytes(lambda *a: flash_attention(*a, is_causal=True), q, k, v)
    assert flash == 4 * (4 * n * 16 + n)  # Q, K, V, O and lse, float32
    tiled, _ = saved_bytes(lambda *a: tiled_attention(*a, is_causal=True), q, k, v)
    assert tiled > 4 * n * n // 2  # at least the causal half of the weights, block by block


# ---------------------------------------------------------------- bad input


def test_bad_flags():
    q = torch.randn(2, L, D)
    for name in ("return_lse", "enable_gqa", "is_causal"):
        with pytest.raises(TypeError, match=rf"^{name} must be a bool; got int$"):
            flash_attention(q, q, q, **{name: 1})
    with pytest.raises(TypeError, match=r"^return_lse must be a bool; got str$"):
        tiled_attention(q, q, q, return_lse="yes")


def test_bad_grouped_keys():
    q, kv = torch.randn(N, 4, L, D), torch.randn(N, 3, S, D)
    with pytest.raises(
        ValueError, match=r"heads of key \(G=3\) must divide the heads of query \(H=4\)"
    ):
        flash_attention(q, kv, kv, enable_gqa=True)
    with pytest.raises(ValueError, match=r"key and value must have the same number of heads G"):
        flash_attention(q, torch.randn(N, 2, S, D), torch.randn(N, 1, S, D), enable_gqa=True)
    with pytest.raises(
        ValueError, match=r"^query must be at least 3-D; got 2-D with shape \(5, 4\)$"
    ):
        flash_attention(torch.randn(L, D), torch.randn(S, D), torch.randn(S, D), enable_gqa=True)
    bad_mask = torch.ones(3, L, S, dtype=torch.bool)  # 3 heads: neither 1 nor H = 4
    with pytest.raises(
        ValueError, match=r"mask must have shape \(\.\.\., H, L, S\) = \(2, 4, 5, 7\)"
    ):
        flash_attention(
            q, torch.randn(N, 2, S, D), torch.randn(N, 2, S, D), mask=bad_mask, enable_gqa=True
        )


def test_float_mask_that_requires_grad_is_refused():
    q = torch.randn(L, D)
    bias = torch.zeros(L, L, requires_grad=True)
    with pytest.raises(ValueError, match=r"mask must not require a gradient.*mask\.detach\(\)"):
        flash_attention(q, q, q, mask=bias)
    flash_attention(q, q, q, mask=bias.detach())


def test_the_forward_checks_apply():
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1; got 0$"):
        flash_attention(torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4), block_size=0)
    with pytest.raises(ValueError, match=r"same last dimension d_k; got query \(5, 4\)"):
        flash_attention(torch.randn(5, 4), torch.randn(7, 3), torch.randn(7, 3))
