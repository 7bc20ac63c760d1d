"""The edges of attnlib's attention kernels: float16, empty key sets, infinite values behind a
mask, mixed dtypes, every option that ``nn.MultiheadAttention`` and Keras users expect
(``kdim``/``vdim``, ``head_dim``, dropout), and converters that keep dtype and device.

Sizes are all different (E=12, H=3, kdim=7, vdim=5, L=4, S=6, N=2) so that no axis mix-up
can pass. Oracles: ``F.scaled_dot_product_attention``, ``torch.nn.MultiheadAttention``,
Keras 3 on the torch backend, and Keras' own hand-computed ``test_correctness`` case.
"""

import math
import os

import pytest
import torch
import torch.nn.functional as F
from attnlib import (
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    SelfAttention,
    attention_weights,
    scaled_dot_product_attention,
    softmax,
)
from attnlib.convert import (
    from_keras,
    from_torch,
    fused_from_naive,
    naive_from_fused,
    to_keras,
    to_torch,
)
from attnlib.efficient import tiled_attention
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch import nn

E, H, KDIM, VDIM, L, S, N = 12, 3, 7, 5, 4, 6, 2
os.environ.setdefault("KERAS_BACKEND", "torch")


def randomize(module, std=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)  # random biases too
    return module


# ---- float16: scale before the product ------------------------------------------------------


def big_half(L=4, D=64, value=32.0):
    return torch.full((1, 1, L, D), value, dtype=torch.float16)  # q.k = 32*32*64 = 65536 > 65504


def test_float16_product_would_overflow():
    q = big_half()
    assert torch.isinf(q @ q.transpose(-2, -1)).all()  # the defect, unscaled


@pytest.mark.parametrize("path", ["weights", "sdpa", "tiled"])
def test_float16_large_activations_stay_finite(path):
    q = big_half()
    expected = F.scaled_dot_product_attention(q, q, q)
    assert torch.isfinite(expected).all()
    if path == "weights":
        out = attention_weights(q, q)
        torch.testing.assert_close(out, torch.full_like(out, 0.25))
        return
    out = scaled_dot_product_attention(q, q, q)[0] if path == "sdpa" else tiled_attention(q, q, q)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_float16_multihead_large_activations(cls, need_weights):
    m = cls(64, 1).half()
    with torch.no_grad():
        for module in m.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(torch.eye(64))
    x = torch.full((1, 4, 64), 32.0, dtype=torch.float16)
    out, _ = m(x, need_weights=need_weights)
    torch.testing.assert_close(out, x)  # identical rows: the output is the input


# ---- empty key sets ---------------------------------------------------------------------------


def test_softmax_over_nothing_is_empty():
    assert softmax(torch.randn(3, 0)).shape == (3, 0)


@pytest.mark.parametrize("with_mask", [False, True])
def test_no_keys_gives_zero_output(with_mask):
    q, k, v = torch.randn(L, 3), torch.randn(0, 3), torch.randn(0, 5)
    mask = torch.ones(L, 0, dtype=torch.bool) if with_mask else None
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert w.shape == (L, 0) and out.shape == (L, 5) and (out == 0).all()
    assert (tiled_attention(q, k, v, mask=mask) == 0).all()


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_no_keys(cls, need_weights):
    m = randomize(cls(E, H, bias=True))
    out, w = m(torch.randn(N, L, E), torch.randn(N, 0, E), need_weights=need_weights)
    expected = m.out_proj.bias.expand(N, L, E)  # zero heads, then the output bias
    torch.testing.assert_close(out, expected)
    assert w is None or w.shape == (N, H, L, 0)


def test_no_queries():
    out, w = scaled_dot_product_attention(torch.randn(0, 3), torch.randn(S, 3), torch.randn(S, 5))
    assert out.shape == (0, 5) and w.shape == (0, S)


# ---- infinite values behind a mask -----------------------------------------------------------


def inf_value_problem(bad=math.inf):
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(L, 3, generator=g),
        torch.randn(S, 3, generator=g),
        torch.randn(S, 5, generator=g),
    )
    v_bad = v.clone()
    v_bad[2] = bad  # key 2 is masked for every query below
    mask = torch.ones(L, S, dtype=torch.bool)
    mask[:, 2] = False
    return q, k, v, v_bad, mask


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("form", ["bool", "float"])
def test_masked_key_with_inf_value_does_not_touch_the_output(bad, form):
    q, k, v, v_bad, mask = inf_value_problem(bad)
    if form == "float":
        mask = torch.zeros(L, S).masked_fill(~mask, -math.inf)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    out, _ = scaled_dot_product_attention(q, k, v_bad, mask=mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(tiled_attention(q, k, v_bad, mask=mask, block_size=4), expected)


def test_causal_future_key_with_inf_value():
    q, k, v, v_bad, _ = inf_value_problem()
    causal = torch.ones(L, S, dtype=torch.bool).tril()  # key 2 is in the future of queries 0, 1
    out, _ = scaled_dot_product_attention(q, k, v_bad, mask=causal)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=causal)
    torch.testing.assert_close(out[:2], expected[:2])
    assert torch.isinf(out[2:]).all(dim=-1).any()  # a query that attends to it sees inf: honest


def test_attended_inf_key_is_not_hidden_by_a_float_mask():
    q = torch.ones(1, 2)
    k = torch.tensor([[math.inf, 0.0], [1.0, 1.0]])
    mask = torch.tensor([-math.inf, 0.0])  # key 0 (score +inf) is blocked
    w = attention_weights(q, k, mask=mask)
    torch.testing.assert_close(w, torch.tensor([[0.0, 1.0]]))


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_masked_inf_value(cls, need_weights):
    m = randomize(cls(E, H))
    x, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    kv_bad = kv.clone()
    kv_bad[:, 2] = math.inf
    mask = torch.ones(N, 1, S, dtype=torch.bool)  # key padding: key 2 is padding
    mask[..., 2] = False
    expected, _ = m(x, kv, mask=mask)
    out, _ = m(x, kv_bad, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out, expected)


# ---- one mask, one behaviour: every accepted shape on every path -----------------------------


@pytest.mark.parametrize(
    "shape", [(S,), (L, S), (1, S), (N, L, S), (N, 1, S), (N, H, L, S), (1, H, 1, S)]
)
@pytest.mark.parametrize("form", ["bool", "float"])
def test_every_mask_shape_on_both_multihead_paths(shape, form):
    m = randomize(MultiHeadAttention(E, H, bias=True))
    g = torch.Generator().manual_seed(3)
    allowed = torch.rand(shape, generator=g) > 0.3
    allowed[..., 0] = True
    mask = allowed if form == "bool" else torch.zeros(shape).masked_fill(~allowed, -math.inf)
    x, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    slow, _ = m(x, kv, mask=mask)
    fast, _ = m(x, kv, mask=mask, need_weights=False)
    torch.testing.assert_close(fast, slow)
    naive, _ = naive_from_fused(m)(x, kv, mask=mask)
    torch.testing.assert_close(naive, slow)


# ---- kdim / vdim ------------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_kdim_vdim_match_torch(bias, batch_first, need_weights):
    torch.manual_seed(4)
    ref = randomize(
        nn.MultiheadAttention(E, H, bias=bias, kdim=KDIM, vdim=VDIM, batch_first=batch_first)
    )
    ref.eval()
    ours = from_torch(ref)
    assert (ours.kdim, ours.vdim) == (KDIM, VDIM)
    q, k, v = torch.randn(N, L, E), torch.randn(N, S, KDIM), torch.randn(N, S, VDIM)
    args = (q, k, v) if batch_first else (q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
    expected, expected_w = ref(*args, average_attn_weights=False)
    if not batch_first:
        expected = expected.transpose(0, 1)
    out, w = ours(q, k, v, need_weights=need_weights)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(w, expected_w)
    back = to_torch(ours).eval()
    torch.testing.assert_close(back(q, k, v)[0], out)
    naive = naive_from_fused(ours)
    torch.testing.assert_close(naive(q, k, v)[0], out)
    torch.testing.assert_close(fused_from_naive(naive)(q, k, v)[0], out)


def test_kdim_vdim_bad_sizes():
    m = MultiHeadAttention(E, H, kdim=KDIM, vdim=VDIM)
    with pytest.raises(
        ValueError, match=r"key must have shape \(N=2, S, kdim=7\); got \(2, 6, 12\)"
    ):
        m(torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, VDIM))
    with pytest.raises(
        ValueError, match=r"value must have shape \(N=2, S, vdim=5\); got \(2, 6, 7\)"
    ):
        m(torch.randn(N, L, E), torch.randn(N, S, KDIM))  # value defaults to key
    with pytest.raises(ValueError, match=r"kdim must be a positive integer; got 0"):
        MultiHeadAttention(E, H, kdim=0)
    with pytest.raises(TypeError, match=r"vdim must be a positive integer; got float 2.5"):
        NaiveMultiHeadAttention(E, H, vdim=2.5)


def test_self_attention_kdim_vdim():
    head = randomize(SelfAttention(E, head_dim=4, bias=True, kdim=KDIM, vdim=VDIM))
    x, k, v = torch.randn(N, L, E), torch.randn(N, S, KDIM), torch.randn(N, S, VDIM)
    out, w = head(x, key=k, value=v)
    expected = F.scaled_dot_product_attention(head.q_proj(x), head.k_proj(k), head.v_proj(v))
    torch.testing.assert_close(out, expected)
    assert "kdim=7, vdim=5" in repr(head)


# ---- head_dim (Keras' key_dim) ---------------------------------------------------------------


def test_keras_correctness_case_by_hand():
    """Keras' own MultiHeadAttentionTest.test_correctness: E=2, H=2, key_dim=2, identity
    kernels, zero biases."""
    m = MultiHeadAttention(2, 2, bias=True, head_dim=2)
    with torch.no_grad():
        for proj in (m.q_proj, m.k_proj, m.v_proj):
            proj.weight.copy_(torch.eye(2).repeat(2, 1))  # (H*D, E) = (4, 2): identity per head
            proj.bias.zero_()
        # Keras reuses the (E, H, D) kernel as the (H, D, E) output kernel: kernel[h, d, e] =
        # [h == e], so output e sums both features of head e: W_O = [[1, 1, 0, 0], [0, 0, 1, 1]]
        m.out_proj.weight.copy_(torch.eye(2).repeat_interleave(2, dim=1))  # (E, H*D) = (2, 4)
        m.out_proj.bias.zero_()
    query = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    key = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    value = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    out, w = m(query, key, value)
    torch.testing.assert_close(
        out, torch.tensor([[[5.679, 5.679], [4.32, 4.32]]]), atol=1e-3, rtol=0
    )
    expected_w = torch.tensor([[[0.33, 0.67], [0.67, 0.33]]]).expand(1, 2, 2, 2)
    torch.testing.assert_close(w, expected_w, atol=1e-2, rtol=0)


@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("key_dim", [2, 4, 5])
def test_keras_any_key_dim_both_ways(use_bias, key_dim):
    import keras

    layer = keras.layers.MultiHeadAttention(num_heads=H, key_dim=key_dim, use_bias=use_bias)
    q, v, k = torch.randn(N, L, E), torch.randn(N, S, VDIM), torch.randn(N, S, KDIM)
    layer.build(q.shape, v.shape, k.shape)
    layer.set_weights([w + 0.1 * torch.randn(w.shape).numpy() for w in layer.get_weights()])
    expected = layer(q, v, k)
    ours = from_keras(layer)
    assert (ours.head_dim, ours.kdim, ours.vdim) == (key_dim, KDIM, VDIM)
    torch.testing.assert_close(ours(q, k, v)[0], expected, atol=1e-5, rtol=1e-5)
    back = to_keras(ours)
    torch.testing.assert_close(back(q, v, k), expected, atol=1e-5, rtol=1e-5)


def test_keras_value_dim_refused_clearly():
    import keras

    layer = keras.layers.MultiHeadAttention(num_heads=H, key_dim=4, value_dim=3)
    x = torch.randn(N, L, E)
    layer(x, x)
    with pytest.raises(ValueError, match=r"value_dim == key_dim.*got value_dim=3 != key_dim=4"):
        from_keras(layer)


def test_to_torch_refuses_head_dim_it_cannot_hold():
    with pytest.raises(
        ValueError, match=r"head_dim \* num_heads == embed_dim .*head_dim=5, num_heads=3"
    ):
        to_torch(MultiHeadAttention(E, H, head_dim=5))


def test_head_dim_without_divisibility():
    m = randomize(
        MultiHeadAttention(10, 3, head_dim=4, bias=True)
    )  # 10 % 3 != 0: fine with head_dim
    assert m.q_proj.weight.shape == (12, 10) and m.out_proj.weight.shape == (10, 12)
    x = torch.randn(N, L, 10)
    out, w = m(x)
    torch.testing.assert_close(m(x, need_weights=False)[0], out)
    torch.testing.assert_close(naive_from_fused(m)(x)[0], out)
    assert "head_dim=4" in repr(m)


# ---- dropout ----------------------------------------------------------------------------------


def test_sdpa_dropout_matches_torch_with_the_same_seed():
    q, k, v = torch.randn(3, N, H, L, 4).unbind(0)
    torch.manual_seed(5)
    out, w = scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    torch.manual_seed(5)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1)
    expected = F.dropout(weights, p=0.3) @ v
    torch.testing.assert_close(out, expected)
    assert ((w == 0) | torch.isclose(w * 0.7, weights)).all()


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_dropout_only_in_training(cls):
    m = randomize(cls(E, H, dropout=0.5))
    x = torch.randn(N, L, E)
    m.eval()
    a, _ = m(x)
    b, _ = m(x, need_weights=False)
    torch.testing.assert_close(a, b)
    m.train()
    torch.manual_seed(6)
    c, w = m(x)
    assert not torch.allclose(c, a)
    assert (w == 0).any()  # dropped weights are returned, as nn.MultiheadAttention does


def test_dropout_matches_torch_in_training_mode():
    ref = randomize(nn.MultiheadAttention(E, H, dropout=0.25, batch_first=True, bias=True))
    ours = from_torch(ref)
    assert ours.dropout == 0.25 and ours.training
    x = torch.randn(N, L, E)
    torch.manual_seed(7)
    expected, expected_w = ref(x, x, x, average_attn_weights=False)
    torch.manual_seed(7)
    out, w = ours(x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, "0.1", True])
def test_bad_dropout(p):
    error = TypeError if isinstance(p, (str, bool)) else ValueError  # a wrong type, or value
    got = f"{p!r}" if error is ValueError else f"{type(p).__name__} {p!r}"
    with pytest.raises(error, match=rf"dropout must be a probability in \[0, 1\); got {got}$"):
        MultiHeadAttention(E, H, dropout=p)
    with pytest.raises(error, match=r"dropout_p must be a probability"):
        scaled_dot_product_attention(
            torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3), dropout_p=p
        )


# ---- converters keep dtype, device and mode ---------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_converters_keep_dtype(dtype):
    ref = randomize(nn.MultiheadAttention(E, H, bias=True, batch_first=True)).to(dtype).eval()
    ours = from_torch(ref)
    assert all(p.dtype == dtype for p in ours.parameters()) and not ours.training
    assert all(p.dtype == dtype for p in to_torch(ours).parameters())
    assert all(p.dtype == dtype for p in naive_from_fused(ours).parameters())
    assert all(p.dtype == dtype for p in fused_from_naive(naive_from_fused(ours)).parameters())
    if dtype == torch.float64:
        x = torch.randn(N, L, E, dtype=dtype)
        torch.testing.assert_close(ours(x)[0], ref(x, x, x)[0])


def test_keras_converters_keep_float64():
    ours = randomize(MultiHeadAttention(E, H, bias=True)).double()
    layer = to_keras(ours)
    assert all(str(w.dtype) == "float64" for w in layer.weights)
    x = torch.randn(N, L, E, dtype=torch.float64)
    out = layer(x, x)
    assert out.dtype == torch.float64
    # Keras' float64 layer agrees to ~1e-6 only (some step of its torch backend rounds to
    # float32 precision); attnlib's own round trip below is exact.
    torch.testing.assert_close(out, ours(x)[0], atol=1e-5, rtol=1e-5)
    back = from_keras(layer)
    assert back.q_proj.weight.dtype == torch.float64
    torch.testing.assert_close(back(x)[0], ours(x)[0])


def test_converters_keep_the_device():
    ref = nn.MultiheadAttention(E, H, batch_first=True, device="meta")
    ours = from_torch(ref)
    assert ours.q_proj.weight.device.type == "meta"
    assert to_torch(ours).in_proj_weight.device.type == "meta"


# ---- clear errors -----------------------------------------------------------------------------


def test_mixed_dtypes_name_both_arguments():
    q32, k64 = torch.randn(L, 3), torch.randn(S, 3, dtype=torch.float64)
    with pytest.raises(
        TypeError,
        match=r"query and key must have the same dtype; got query torch.float32 and key "
        r"torch.float64",
    ):
        attention_weights(q32, k64)
    with pytest.raises(
        TypeError,
        match=r"query and value must have the same dtype; got query torch.float32 and value "
        r"torch.float64",
    ):
        scaled_dot_product_attention(q32, torch.randn(S, 3), torch.randn(S, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"query and key must have the same dtype"):
        tiled_attention(q32, k64, k64)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_float64_input_to_float32_module(cls):
    with pytest.raises(
        TypeError,
        match=r"query has dtype torch.float64 but the module's weights are torch.float32; convert",
    ):
        cls(E, H)(torch.randn(L, E, dtype=torch.float64))
    with pytest.raises(
        TypeError, match=r"query has dtype torch.float64 but the module's weights are torch.float32"
    ):
        SelfAttention(E, head_dim=4)(torch.randn(L, E, dtype=torch.float64))


@pytest.mark.parametrize(
    "scale,error,match",
    [
        ("0.5", TypeError, r"scale must be a real number or None; got str '0.5'"),
        ([0.5], TypeError, r"scale must be a real number or None; got list"),
        (math.inf, ValueError, r"scale must be finite; got inf"),
        (math.nan, ValueError, r"scale must be finite; got nan"),
    ],
)
def test_bad_scale(scale, error, match):
    q = torch.randn(L, 3)
    with pytest.raises(error, match=match):
        attention_weights(q, q, scale=scale)
    with pytest.raises(error, match=match):
        tiled_attention(q, q, q, scale=scale)


def test_scale_as_a_zero_dim_tensor():
    q = torch.randn(L, 3)
    torch.testing.assert_close(
        attention_weights(q, q, scale=torch.tensor(0.5)), attention_weights(q, q, scale=0.5)
    )


def test_many_batch_dimensions_work():
    q, k, v = torch.randn(2, 1, 1, 1, 1, 1, 1, L, 3), torch.randn(S, 3), torch.randn(S, 5)
    out, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(
            q, k.expand(*q.shape[:-2], S, 3), v.expand(*q.shape[:-2], S, 5)
        ),
    )


def test_zero_width_heads_refused():
    with pytest.raises(ValueError, match=r"query and key must have d_k >= 1; got query \(4, 0\)"):
        attention_weights(torch.randn(L, 0), torch.randn(S, 0))
    with pytest.raises(ValueError, match=r"head_dim must be a positive integer; got 0"):
        MultiHeadAttention(E, H, head_dim=0)


# ---- properties with strategies that shrink ---------------------------------------------------

finite = st.floats(-20, 20, allow_nan=False, width=32)


@st.composite
def attention_problems(draw):
    L_, S_, d, dv = (draw(st.integers(1, 5)) for _ in range(4))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    q = draw(hnp.arrays("float32", (*batch, L_, d), elements=finite))
    k = draw(hnp.arrays("float32", (*batch, S_, d), elements=finite))
    v = draw(hnp.arrays("float32", (*batch, S_, dv), elements=finite))
    allowed = draw(hnp.arrays(bool, (L_, S_)))
    return torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), torch.from_numpy(allowed)


@settings(max_examples=60, deadline=None)
@given(attention_problems())
def test_property_sdpa_equals_torch_on_drawn_tensors(problem):
    q, k, v, allowed = problem
    keep = allowed.any(dim=-1, keepdim=True)  # rows with a key: compared with torch
    out, w = scaled_dot_product_attention(q, k, v, mask=allowed)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=allowed)
    torch.testing.assert_close(
        torch.where(keep, out, 0.0), torch.where(keep, expected.float(), 0.0), atol=1e-4, rtol=1e-4
    )
    assert (out[..., ~keep.squeeze(-1), :] == 0).all()
    torch.testing.assert_close(
        tiled_attention(q, k, v, mask=allowed, block_size=2), out, atol=1e-4, rtol=1e-4
    )


@settings(max_examples=40, deadline=None)
@given(attention_problems(), st.floats(-5, 5, allow_nan=False))
def test_property_adding_a_constant_to_the_mask_changes_nothing(problem, c):
    q, k, v, _ = problem
    bias = torch.linspace(-1, 1, k.shape[-2])
    w1 = attention_weights(q, k, mask=bias)
    w2 = attention_weights(q, k, mask=bias + c)
    torch.testing.assert_close(w1, w2, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "key_shape, value_shape, message",
    [
        (
            (3, 5, 4),
            (3, 5, 4),
            r"query and key batch dimensions must broadcast; "
            r"got query \(2, 3, 4\) and key \(3, 5, 4\)",
        ),
        (
            (2, 5, 4),
            (3, 5, 4),
            r"query, key and value batch dimensions must broadcast; "
            r"got query \(2, 3, 4\), key \(2, 5, 4\) and value \(3, 5, 4\)",
        ),
    ],
)
def test_batches_must_broadcast(key_shape, value_shape, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(key_shape), torch.randn(value_shape)
        )
