"""attnlib.attention: softmax, masks, scaled dot-product attention, one head.

Hand-computed cases first (the 3 x 4 matrix of seeds 000/003, GloVe sentences), then
F.scaled_dot_product_attention as an oracle, hypothesis properties, and bad input.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import (
    SelfAttention,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)
from conftest import AMAZON_SENTENCE, SHIP_SENTENCE, X3_ROWS
from hypothesis import given
from hypothesis import strategies as st

# ---------------------------------------------------------------- by hand


def hand_attention(rows):
    """Self-attention of a list of rows with plain Python floats and math.exp."""
    d = len(rows[0])
    weights, outputs = [], []
    for q in rows:
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(d) for k in rows]
        exps = [math.exp(s) for s in scores]
        w = [e / sum(exps) for e in exps]
        weights.append(w)
        outputs.append([sum(w[j] * rows[j][c] for j in range(len(rows))) for c in range(d)])
    return weights, outputs


def test_x3_first_row_weights_to_1e7(X3):
    w = attention_weights(X3, X3)
    # q0 . k = (2, 1, 1) / sqrt(4) = (1, .5, .5): weights e / (e + 2 e^.5)
    expected = [0.45186276, 0.27406862, 0.27406862]
    torch.testing.assert_close(w[0], torch.tensor(expected), atol=1e-7, rtol=0)
    e, h = math.exp(1.0), math.exp(0.5)
    assert w[0, 0].item() == pytest.approx(e / (e + 2 * h), abs=1e-7)
    assert w[0, 1].item() == pytest.approx(h / (e + 2 * h), abs=1e-7)


def test_x3_all_rows_by_hand(X3):
    hand_w, hand_out = hand_attention(X3_ROWS)
    out, w = scaled_dot_product_attention(X3, X3, X3)
    torch.testing.assert_close(w, torch.tensor(hand_w), atol=1e-7, rtol=0)
    torch.testing.assert_close(out, torch.tensor(hand_out), atol=1e-6, rtol=0)


def test_x3_seed_numbers(X3):
    out, w = scaled_dot_product_attention(X3, X3, X3)
    seed_out = [
        [0.4519, 0.6852, 0.5481, 1.0],
        [0.1045, 1.1609, 0.8955, 1.0],
        [0.1387, 1.1034, 0.8613, 1.0],
    ]
    seed_w = [
        [0.45186276, 0.27406862, 0.27406862],
        [0.1045, 0.5307, 0.3648],
        [0.1387, 0.4842, 0.3771],
    ]
    torch.testing.assert_close(out, torch.tensor(seed_out), atol=5e-5, rtol=0)
    torch.testing.assert_close(w, torch.tensor(seed_w), atol=5e-5, rtol=0)
    # row 1 by hand: scores (1, 4.25, 3.5) / 2
    s = [0.5, 2.125, 1.75]
    z = sum(math.exp(v) for v in s)
    torch.testing.assert_close(w[1], torch.tensor([math.exp(v) / z for v in s]), atol=1e-7, rtol=0)
    # row 2 by hand: scores (1, 3.5, 3) / 2
    s = [0.5, 1.75, 1.5]
    z = sum(math.exp(v) for v in s)
    torch.testing.assert_close(w[2], torch.tensor([math.exp(v) / z for v in s]), atol=1e-7, rtol=0)


def test_softmax_two_elements_by_hand():
    x = torch.tensor([1.0, 3.0])
    p = 1 / (1 + math.exp(2.0))  # e^1 / (e^1 + e^3)
    torch.testing.assert_close(softmax(x), torch.tensor([p, 1 - p]), atol=1e-7, rtol=0)


def test_softmax_is_stable_for_large_inputs():
    torch.testing.assert_close(softmax(torch.tensor([1000.0, 1000.0])), torch.tensor([0.5, 0.5]))
    y = softmax(torch.tensor([1000.0, 999.0, -1000.0]))
    assert torch.isfinite(y).all()
    e = math.exp(-1.0)
    torch.testing.assert_close(y, torch.tensor([1 / (1 + e), e / (1 + e), 0.0]))


def test_softmax_along_dim_and_all_minus_inf_rows():
    x = torch.tensor([[0.0, -math.inf], [-math.inf, -math.inf]])
    torch.testing.assert_close(softmax(x, dim=-1), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(softmax(x, dim=0), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    y = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    torch.testing.assert_close(softmax(y, dim=0), torch.softmax(y, dim=0))


def test_fully_masked_row_gives_zeros_not_nan(X3):
    mask = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    out, w = scaled_dot_product_attention(X3, X3, X3, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.equal(w[1], torch.zeros(3)) and torch.equal(out[1], torch.zeros(4))
    # row 0 attends to keys 0 and 1 only: scores (1, .5) -> 1 / (1 + e^-.5)
    p = 1 / (1 + math.exp(-0.5))
    torch.testing.assert_close(w[0], torch.tensor([p, 1 - p, 0.0]), atol=1e-7, rtol=0)
    torch.testing.assert_close(w[2], attention_weights(X3, X3)[2])


def test_causal_mask_literal():
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(3).dtype == torch.bool
    # top-left aligned, as F.sdpa(is_causal=True)
    assert torch.equal(causal_mask(2, 4), torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0]]).bool())
    assert torch.equal(causal_mask(4, 2), torch.ones(4, 2).tril().bool())


def test_scale_argument(X3):
    w = attention_weights(X3, X3, scale=1.0)
    torch.testing.assert_close(w, torch.softmax(X3 @ X3.T, dim=-1))
    assert not torch.allclose(w, attention_weights(X3, X3))


def test_cross_attention_shapes_and_values():
    q, k, v = torch.randn(5, 12), torch.randn(7, 12), torch.randn(7, 3)
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (5, 3) and w.shape == (5, 7)
    torch.testing.assert_close(w, torch.softmax(q @ k.T / math.sqrt(12), dim=-1))
    torch.testing.assert_close(out, w @ v)


# ---------------------------------------------------------------- GloVe (seeds 000, 003)


def test_glove_ship_sentence_weights_and_output(glove):
    X = glove.matrix(SHIP_SENTENCE)  # (11, 50)
    out, w = scaled_dot_product_attention(X, X, X, scale=1 / math.sqrt(50))
    ship = [0.0303, 0.0302, 0.0276, 0.0407, 0.0459, 0.0343, 0.5530, 0.0297, 0.0459, 0.0343, 0.1281]
    torch.testing.assert_close(w[6], torch.tensor(ship), atol=5e-5, rtol=0)
    torch.testing.assert_close(
        out[6, :3], torch.tensor([1.0387, 0.1033, 0.3426]), atol=5e-5, rtol=0
    )
    # the default scale is 1/sqrt(d_k) = 1/sqrt(50)
    torch.testing.assert_close(attention_weights(X, X), w)


def test_glove_amazon_sentence_weights(glove):
    X = glove.matrix(AMAZON_SENTENCE)  # (6, 50)
    w = attention_weights(X, X)
    ship = [0.0431, 0.0258, 0.0419, 0.7811, 0.0490, 0.0590]
    torch.testing.assert_close(w[3], torch.tensor(ship), atol=5e-5, rtol=0)


# ---------------------------------------------------------------- oracle: F.sdpa


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_matches_torch_sdpa(batch, masked, scale):
    L, S, d_k, d_v = 5, 7, 4, 6
    q, k, v = torch.randn(*batch, L, d_k), torch.randn(*batch, S, d_k), torch.randn(*batch, S, d_v)
    mask = None
    if masked:
        mask = torch.rand(*batch, L, S) > 0.5
        mask[..., 0] = True  # every query attends to something (empty rows: see below)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    assert w.shape == (*batch, L, S)
    if masked:
        assert (w[~mask] == 0).all()


def test_matches_torch_sdpa_with_causal_mask():
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(5, 7))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


def test_mask_broadcasts_over_batch():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)
    mask = torch.rand(3, 5, 7) > 0.4
    mask[..., 2] = True
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    out_full, w_full = scaled_dot_product_attention(q, k, v, mask=mask.expand(2, 3, 5, 7))
    torch.testing.assert_close(out, out_full)
    torch.testing.assert_close(w, w_full)


# ---------------------------------------------------------------- SelfAttention


def test_self_attention_identity_projections_reproduce_plain_attention(X3):
    head = SelfAttention(4)
    with torch.no_grad():
        for proj in (head.q_proj, head.k_proj, head.v_proj):
            proj.weight.copy_(torch.eye(4))
    out, w = head(X3)
    expected_out, expected_w = scaled_dot_product_attention(X3, X3, X3)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(w, expected_w)


@pytest.mark.parametrize("bias", [False, True])
def test_self_attention_projections(bias):
    head = SelfAttention(12, head_dim=4, bias=bias)
    assert (head.q_proj.bias is not None) == bias
    x, kv = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    out, w = head(x, key=kv)
    assert out.shape == (2, 5, 4) and w.shape == (2, 5, 7)
    q, k, v = head.q_proj(x), head.k_proj(kv), head.v_proj(kv)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    mask = causal_mask(5, 7)
    out_m, w_m = head(x, mask=mask, key=kv)
    torch.testing.assert_close(out_m, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert (w_m[:, ~mask] == 0).all()


def test_self_attention_head_dim_defaults_to_embed_dim():
    head = SelfAttention(6)
    assert head.head_dim == 6 and head.q_proj.weight.shape == (6, 6)
    assert "embed_dim=6, head_dim=6, bias=False" in repr(head)


# ---------------------------------------------------------------- properties


def _qkv(seed, batch, L, S, d):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, d, generator=g) * 3
    k = torch.randn(*batch, S, d, generator=g) * 3
    v = torch.randn(*batch, S, d + 1, generator=g)
    return g, q, k, v


shapes = st.tuples(
    st.integers(0, 2**31 - 1),
    st.lists(st.integers(1, 3), max_size=2),
    st.integers(1, 8),
    st.integers(1, 8),
    st.integers(1, 8),
)


@given(shapes)
def test_property_rows_sum_to_one(args):
    seed, batch, L, S, d = args
    _, q, k, _ = _qkv(seed, batch, L, S, d)
    w = attention_weights(q, k)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(*batch, L))


@given(shapes)
def test_property_masked_rows_sum_to_one_or_zero(args):
    seed, batch, L, S, d = args
    g, q, k, v = _qkv(seed, batch, L, S, d)
    mask = torch.rand(*batch, L, S, generator=g) > 0.5
    keep = torch.randint(0, S, (*batch, L, 1), generator=g)
    mask.scatter_(-1, keep, True)  # at least one True per row
    empty = torch.rand(*batch, L, generator=g) < 0.3  # some rows fully masked
    mask[empty] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(w).any() and not torch.isnan(out).any()
    expected = torch.where(empty, 0.0, 1.0)
    torch.testing.assert_close(w.sum(-1), expected)
    assert (w[~mask] == 0).all()
    assert (out[empty] == 0).all()


@given(st.integers(0, 2**31 - 1), st.integers(1, 8), st.integers(0, 7))
def test_property_causal_output_ignores_the_future(seed, L, t):
    t = t % L
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(L, 6, generator=g)
    head = SelfAttention(6, head_dim=3)
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    mask = causal_mask(L)
    out, _ = head(x, mask=mask)
    x2 = x.clone()
    x2[t + 1 :] = torch.randn(L - t - 1, 6, generator=g) * 10
    out2, _ = head(x2, mask=mask)
    torch.testing.assert_close(out2[: t + 1], out[: t + 1], atol=1e-6, rtol=1e-6)
    if t + 1 < L:  # the future does change the later rows (the test can fail)
        assert not torch.allclose(out2[t + 1 :], out[t + 1 :])


# ---------------------------------------------------------------- bad input


def test_bad_query_key_dims_differ():
    with pytest.raises(
        ValueError, match=r"same last dimension d_k; got query \(5, 4\).*key \(7, 3\)"
    ):
        attention_weights(torch.randn(5, 4), torch.randn(7, 3))


def test_bad_value_rows():
    with pytest.raises(ValueError, match=r"value must have one row per key.*S=7.*got \(6, 4\)"):
        scaled_dot_product_attention(torch.randn(5, 4), torch.randn(7, 4), torch.randn(6, 4))


@pytest.mark.parametrize("shape", [(5, 6), (7, 5), (2, 2, 5, 7), (5,)])
def test_bad_mask_shape(shape):
    q, k = torch.randn(2, 5, 4), torch.randn(2, 7, 4)
    with pytest.raises(ValueError, match=r"mask must have shape .*\(2, 5, 7\).*got"):
        attention_weights(q, k, mask=torch.ones(shape, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.long, torch.int8, torch.uint8])
def test_bad_mask_integer(dtype):
    with pytest.raises(
        TypeError,
        match=r"mask must be boolean \(True = may attend\) or floating point .*"
        rf"got dtype {dtype}\. Convert a 0/1 mask with `mask.bool\(\)`",
    ):
        attention_weights(torch.randn(5, 4), torch.randn(7, 4), mask=torch.ones(5, 7, dtype=dtype))


def test_bad_mask_not_a_tensor():
    with pytest.raises(
        TypeError, match="mask must be a torch.Tensor, boolean .* or floating point .*; got list"
    ):
        attention_weights(torch.randn(2, 4), torch.randn(2, 4), mask=[[True, True]] * 2)


def test_bad_rank():
    with pytest.raises(ValueError, match=r"query must be at least 2-D; got 1-D with shape \(4,\)"):
        attention_weights(torch.randn(4), torch.randn(7, 4))
    with pytest.raises(
        ValueError, match=r"query must be 2-D or 3-D; got 4-D with shape \(1, 2, 5, 12\)"
    ):
        SelfAttention(12)(torch.randn(1, 2, 5, 12))


def test_bad_embed_size_for_self_attention():
    with pytest.raises(
        ValueError, match=r"query must have shape \(N, L, E=12\) or \(L, E=12\); got \(5, 10\)"
    ):
        SelfAttention(12)(torch.randn(5, 10))


def test_bad_types():
    with pytest.raises(TypeError, match="query must be a torch.Tensor; got list"):
        attention_weights([[1.0, 0.0]], torch.randn(2, 2))
    with pytest.raises(
        TypeError, match="key must be a floating-point tensor; got dtype torch.int64"
    ):
        attention_weights(torch.randn(2, 2), torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be a floating-point torch.Tensor; got torch.int64"):
        softmax(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="x must be a floating-point torch.Tensor; got list"):
        softmax([1.0, 2.0])


@pytest.mark.parametrize("L", [0, -1, 1.5, True])
def test_bad_causal_mask_size(L):
    error = ValueError if type(L) is int else TypeError  # a wrong value, or a wrong type
    with pytest.raises(error, match=r"L must be a positive integer; got"):
        causal_mask(L)


def test_bad_self_attention_dims():
    with pytest.raises(ValueError, match="head_dim must be a positive integer; got 0"):
        SelfAttention(4, head_dim=0)


def test_fully_masked_rows_zeros_in_attnlib_and_f_sdpa_but_nan_in_nn_multihead():
    """The convention for a query with no key, as torch 2.13 behaves on the CPU: attnlib and
    F.scaled_dot_product_attention give zeros (with a boolean or a float mask, and with no
    key at all, S = 0), nn.MultiheadAttention NaN. If a torch upgrade changes either, this
    test says so (and the chapters' sentences about it must change)."""
    torch.manual_seed(0)
    q = torch.randn(3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    ours, _ = scaled_dot_product_attention(q, q, q, mask=mask)
    theirs = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert (ours[1] == 0).all() and (theirs[1] == 0).all()
    torch.testing.assert_close(ours, theirs)
    additive = torch.zeros(3, 3).masked_fill(~mask, -math.inf)
    theirs_float = F.scaled_dot_product_attention(q, q, q, attn_mask=additive)
    assert (theirs_float[1] == 0).all() and not theirs_float.isnan().any()
    no_key = q[:0]  # (0, 4): S = 0
    assert torch.equal(F.scaled_dot_product_attention(q, no_key, no_key), torch.zeros(3, 4))
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    out, _ = mha(q[None], q[None], q[None], attn_mask=~mask)
    assert out[0, 1].isnan().all() and not out[0, [0, 2]].isnan().any()
