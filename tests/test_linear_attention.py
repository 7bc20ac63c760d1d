"""attnlib.linear_attention: linear attention and DeltaNet, three forms each.

Oracles: the recurrent forms, which are the definitions (one token at a time); for linear
attention also the double sum over tokens written out, and the state ``phi(K)^T V``; for the
delta rule a case of two tokens and one dimension computed by hand, and keys written twice
(the delta rule overwrites, linear attention adds). Sizes all differ (N=2, H=3, L=11, D=4,
D_v=5; chunks of 1, 3, 4, 11 and 16 tokens: 11 is no multiple of 3 or 4, 16 > L).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import LanguageModel, TransformerBlock, causal_mask
from attnlib.decoding import KVCache, ModelCache
from attnlib.linear_attention import (
    LinearAttention,
    StateCache,
    delta_rule,
    delta_rule_chunked,
    delta_rule_recurrent,
    elu_feature_map,
    linear_attention,
    linear_attention_chunked,
    linear_attention_recurrent,
)
from hypothesis import given
from hypothesis import strategies as st

N, H, L, D, DV = 2, 3, 11, 4, 5
CHUNKS = [1, 3, 4, 11, 16]
TIGHT = dict(rtol=1e-12, atol=1e-12)  # float64: the forms differ by rounding only


def tol(dtype):
    return TIGHT if dtype == torch.float64 else {}  # float32: assert_close's defaults


def inputs(dtype=torch.float64, seed=0, L=L, decay=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, H, L, D, generator=g, dtype=dtype)
    k = torch.randn(N, H, L, D, generator=g, dtype=dtype)
    v = torch.randn(N, H, L, DV, generator=g, dtype=dtype)
    beta = torch.rand(N, H, L, generator=g, dtype=dtype)  # in (0, 1)
    alpha = 0.5 + 0.5 * torch.rand(N, H, L, generator=g, dtype=dtype) if decay else None
    return q, k, v, beta, alpha


def doubled(x):
    """A feature map that changes the size: D' = 2 D."""
    return torch.cat([F.elu(x) + 1, x.square()], dim=-1)


# ---- linear attention ------------------------------------------------------------------------

LINEAR_SETTINGS = [
    ("elu", True),
    ("elu", False),
    ("identity", False),
    (doubled, True),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize(
    "feature_map,normalize", LINEAR_SETTINGS, ids=lambda x: getattr(x, "__name__", str(x))
)
def test_linear_attention_three_forms_agree(dtype, feature_map, normalize):
    q, k, v, _, _ = inputs(dtype)
    kw = dict(feature_map=feature_map, normalize=normalize)
    out, (S, z) = linear_attention_recurrent(q, k, v, **kw)
    Df = 2 * D if feature_map is doubled else D
    assert out.shape == (N, H, L, DV) and S.shape == (N, H, Df, DV) and z.shape == (N, H, Df)
    par, (S_par, z_par) = linear_attention(q, k, v, **kw)
    torch.testing.assert_close(par, out, **tol(dtype))
    torch.testing.assert_close(S_par, S, **tol(dtype))
    torch.testing.assert_close(z_par, z, **tol(dtype))
    for C in CHUNKS:
        chunked, (S_c, z_c) = linear_attention_chunked(q, k, v, chunk_size=C, **kw)
        torch.testing.assert_close(chunked, out, **tol(dtype))
        torch.testing.assert_close(S_c, S, **tol(dtype))  # the final states agree too
        torch.testing.assert_close(z_c, z, **tol(dtype))


@pytest.mark.parametrize("normalize", [True, False])
def test_linear_attention_equals_its_double_sum(normalize):
    q, k, v, _, _ = inputs(L=6)
    fq, fk = elu_feature_map(q), elu_feature_map(k)
    expected = torch.zeros(N, H, 6, DV, dtype=torch.float64)
    for t in range(6):
        a = [(fq[..., t, :] * fk[..., i, :]).sum(-1, keepdim=True) for i in range(t + 1)]
        num, den = sum(a_i * v[..., i, :] for i, a_i in enumerate(a)), sum(a)
        expected[..., t, :] = num / (den + 1e-6) if normalize else num
    out, (S, z) = linear_attention(q, k, v, normalize=normalize)
    torch.testing.assert_close(out, expected, **TIGHT)
    torch.testing.assert_close(S, fk.transpose(-2, -1) @ v, **TIGHT)  # phi(K)^T V
    torch.testing.assert_close(z, fk.sum(-2), **TIGHT)


def test_linear_attention_by_hand():
    """q = k = 1 (phi = 2: every key weighs the same): running means of the values."""
    q = k = torch.ones(1, 3, 1, dtype=torch.float64)
    v = torch.tensor([[[3.0], [0.0], [6.0]]], dtype=torch.float64)
    for form in (linear_attention, linear_attention_recurrent, linear_attention_chunked):
        out, (S, z) = form(q, k, v, eps=0.0)
        assert out.flatten().tolist() == [3.0, 1.5, 3.0] and (S.item(), z.item()) == (18.0, 6.0)
        out, _ = form(q, k, v, normalize=False, feature_map="identity")
        assert out.flatten().tolist() == [3.0, 3.0, 9.0]  # running sums


@pytest.mark.parametrize("split", [0, 4, 7, L])
def test_linear_attention_hands_its_state_on(split):
    q, k, v, _, _ = inputs()
    full, (S, z) = linear_attention(q, k, v)
    head = [t[..., :split, :] for t in (q, k, v)]
    rest = [t[..., split:, :] for t in (q, k, v)]
    first, state = linear_attention_chunked(*head, chunk_size=3)
    for form in (linear_attention, linear_attention_recurrent, linear_attention_chunked):
        second, (S2, z2) = form(*rest, state=state)
        torch.testing.assert_close(torch.cat([first, second], dim=-2), full, **TIGHT)
        torch.testing.assert_close(S2, S, **TIGHT)
        torch.testing.assert_close(z2, z, **TIGHT)


# ---- DeltaNet --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("decay", [False, True], ids=["delta", "gated"])
def test_delta_rule_three_forms_agree(dtype, decay):
    q, k, v, beta, alpha = inputs(dtype, decay=decay)
    out, S = delta_rule_recurrent(q, k, v, beta, decay=alpha)
    assert out.shape == (N, H, L, DV) and S.shape == (N, H, D, DV) and S.dtype == dtype
    par, S_par = delta_rule(q, k, v, beta, decay=alpha)
    torch.testing.assert_close(par, out, **tol(dtype))
    torch.testing.assert_close(S_par, S, **tol(dtype))
    for C in CHUNKS:
        chunked, S_c = delta_rule_chunked(q, k, v, beta, decay=alpha, chunk_size=C)
        torch.testing.assert_close(chunked, out, **tol(dtype))
        torch.testing.assert_close(S_c, S, **tol(dtype))  # the final states agree too


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 2),  # N
    st.integers(1, 3),  # H
    st.integers(0, 12),  # L
    st.integers(1, 5),  # D
    st.integers(1, 5),  # D_v
    st.integers(1, 13),  # chunk size
    st.booleans(),  # decay
)
def test_property_delta_rule_forms_agree(seed, n, h, length, d, dv, chunk, gated):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, h, length, d, generator=g, dtype=torch.float64)
    k = torch.randn(n, h, length, d, generator=g, dtype=torch.float64)
    v = torch.randn(n, h, length, dv, generator=g, dtype=torch.float64)
    beta = torch.rand(n, h, length, generator=g, dtype=torch.float64)
    alpha = torch.rand(n, h, length, generator=g, dtype=torch.float64) * 0.9 + 0.1
    alpha = alpha if gated else None
    out, S = delta_rule_recurrent(q, k, v, beta, decay=alpha)
    par, S_par = delta_rule(q, k, v, beta, decay=alpha)
    torch.testing.assert_close(par, out, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S_par, S, rtol=1e-10, atol=1e-10)
    chunked, S_c = delta_rule_chunked(q, k, v, beta, decay=alpha, chunk_size=chunk)
    torch.testing.assert_close(chunked, out, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S_c, S, rtol=1e-10, atol=1e-10)


DELTA_FORMS = [delta_rule, delta_rule_recurrent, delta_rule_chunked]


@pytest.mark.parametrize(
    "k2,alpha,S2",
    [
        (3.0, None, 1.0),  # S_2 = 2 + 0.25 (-2 - 2) = 1
        (-0.5, None, 2.0),  # key -1: the state already gives -2 for it, nothing is written
        (3.0, (0.5, 0.8), 0.7),  # S_2 = 0.8 * 2 + 0.25 (-2 - 0.8 * 2) = 0.7
    ],
)
@pytest.mark.parametrize("form", DELTA_FORMS)
def test_delta_rule_by_hand_two_tokens_one_dimension(k2, alpha, S2, form):
    """L = 2, D = D_v = 1: the keys normalise to +-1; S_1 = 0.5 (4 - 0) = 2, o_1 = 2 S_1."""
    f64 = dict(dtype=torch.float64)
    q = torch.tensor([[[2.0], [-1.0]]], **f64)
    k = torch.tensor([[[3.0], [k2]]], **f64)
    v = torch.tensor([[[4.0], [-2.0]]], **f64)
    beta = torch.tensor([[0.5, 0.25]], **f64)
    decay = None if alpha is None else torch.tensor([alpha], **f64)
    out, S = form(q, k, v, beta, decay=decay)
    torch.testing.assert_close(out, torch.tensor([[[4.0], [-S2]]], **f64), **TIGHT)
    torch.testing.assert_close(S, torch.tensor([[[S2]]], **f64), **TIGHT)


def test_the_delta_rule_overwrites_where_linear_attention_adds():
    """Orthonormal keys, beta = 1: a key gives back the value written last with it."""
    f64 = dict(dtype=torch.float64)
    keys = torch.eye(D, **f64)[[0, 1, 0, 2]]  # key 0 written twice: values a, then b
    values = torch.randn(4, DV, **f64)
    beta = torch.ones(4, **f64)
    for form in DELTA_FORMS:
        _, S = form(keys, keys, values, beta)
        torch.testing.assert_close(torch.eye(D, **f64)[0] @ S, values[2], **TIGHT)  # b
        torch.testing.assert_close(torch.eye(D, **f64)[1] @ S, values[1], **TIGHT)
    _, (S, _) = linear_attention(keys, keys, values, feature_map="identity", normalize=False)
    torch.testing.assert_close(torch.eye(D, **f64)[0] @ S, values[0] + values[2], **TIGHT)


def test_delta_rule_normalises_the_keys_and_decay_one_is_none():
    q, k, v, beta, _ = inputs()
    scale = torch.rand(N, H, L, 1, dtype=torch.float64) * 5 + 0.1  # positive, per key
    ones = torch.ones(N, H, L, dtype=torch.float64)
    for form in DELTA_FORMS:
        out, S = form(q, k, v, beta)
        torch.testing.assert_close(form(q, k * scale, v, beta)[0], out, **TIGHT)
        torch.testing.assert_close(form(q, k, v, beta, decay=ones)[1], S, **TIGHT)


@pytest.mark.parametrize("split", [0, 5, L])
def test_delta_rule_hands_its_state_on(split):
    q, k, v, beta, alpha = inputs(decay=True)
    full, S = delta_rule(q, k, v, beta, decay=alpha)
    cut = slice(None, split), slice(split, None)
    parts = [[t[..., c, :] for t in (q, k, v)] + [beta[..., c], alpha[..., c]] for c in cut]
    first, state = delta_rule_chunked(*parts[0][:4], decay=parts[0][4], chunk_size=4)
    for form in DELTA_FORMS:
        second, S2 = form(*parts[1][:4], decay=parts[1][4], state=state)
        torch.testing.assert_close(torch.cat([first, second], dim=-2), full, **TIGHT)
        torch.testing.assert_close(S2, S, **TIGHT)


def test_empty_sequences_and_unbatched_inputs():
    q, k, v, beta, alpha = inputs(L=0, decay=True)
    state = torch.randn(N, H, D, DV, dtype=torch.float64)
    for form in DELTA_FORMS:
        out, S = form(q, k, v, beta, decay=alpha, state=state)
        assert out.shape == (N, H, 0, DV) and torch.equal(S, state)
    for form in (linear_attention, linear_attention_recurrent, linear_attention_chunked):
        out, (S, z) = form(q, k, v)
        assert out.shape == (N, H, 0, DV) and not S.any() and not z.any()
    q, k, v, beta, _ = inputs()
    for form in DELTA_FORMS:  # (L, D): no batch dimension
        out, S = form(q[0, 0], k[0, 0], v[0, 0], beta[0, 0])
        torch.testing.assert_close(out, delta_rule(q, k, v, beta)[0][0, 0], **TIGHT)


def test_gradients_of_the_chunked_forms():
    f64 = dict(dtype=torch.float64, requires_grad=True)
    q, k, v = torch.randn(1, 3, 2, **f64), torch.randn(1, 3, 2, **f64), torch.randn(1, 3, 2, **f64)
    beta = torch.rand(1, 3, **f64)
    alpha = (0.5 + 0.5 * torch.rand(1, 3, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda *a: delta_rule_chunked(*a[:4], decay=a[4], chunk_size=2)[0],
        (q, k, v, beta, alpha),
        fast_mode=True,
    )
    assert torch.autograd.gradcheck(
        lambda *a: linear_attention_chunked(*a, chunk_size=2)[0], (q, k, v), fast_mode=True
    )


# ---- errors ----------------------------------------------------------------------------------

ALL_FORMS = [
    (linear_attention_chunked, False),
    (delta_rule_chunked, True),
]


@pytest.mark.parametrize("chunk_size", [0, -1, 2.5, True])
@pytest.mark.parametrize("form,needs_beta", ALL_FORMS)
def test_bad_chunk_size(chunk_size, form, needs_beta):
    q, k, v, beta, _ = inputs(L=4)
    args = (q, k, v, beta) if needs_beta else (q, k, v)
    error = ValueError if type(chunk_size) is int else TypeError
    got = (
        f"{chunk_size!r}" if error is ValueError else f"{type(chunk_size).__name__} {chunk_size!r}"
    )
    with pytest.raises(error, match=rf"chunk_size must be a positive integer; got {got}$"):
        form(*args, chunk_size=chunk_size)


def test_bad_shapes():
    q, k, v, beta, _ = inputs(L=4)
    with pytest.raises(ValueError, match=r"key must have the shape of query \(2, 3, 4, 4\), "):
        delta_rule(q, k[..., :3, :], v, beta)
    with pytest.raises(
        ValueError, match=r"value must have shape \(\.\.\., L, D_v\) = \(2, 3, 4, D_v\), one row"
    ):
        linear_attention(q, k, v[..., :3, :])
    with pytest.raises(
        ValueError,
        match=r"beta must have shape \(\.\.\., L\) = \(2, 3, 4\), one number per token of query "
        r"\(2, 3, 4, 4\); got \(2, 3, 1\)",
    ):
        delta_rule_recurrent(q, k, v, beta[..., :1])
    with pytest.raises(ValueError, match=r"decay must have shape \(\.\.\., L\) = \(2, 3, 4\)"):
        delta_rule_chunked(q, k, v, beta, decay=beta[0])
    with pytest.raises(
        ValueError,
        match=r"state must have shape \(2, 3, 4, 5\) \(the batch dimensions of query, then D "
        r"and D_v\); got \(2, 3, 5, 4\)",
    ):
        delta_rule(q, k, v, beta, state=torch.zeros(N, H, DV, D, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"state\[1\] must have shape \(2, 3, 4\)"):
        linear_attention(
            q, k, v, state=(torch.zeros(N, H, D, DV).double(), torch.zeros(N, H).double())
        )
    with pytest.raises(TypeError, match=r"state must be a tuple \(S, z\) as a linear_attention"):
        linear_attention_recurrent(q, k, v, state=torch.zeros(N, H, D, DV).double())


def test_bad_types_and_options():
    q, k, v, beta, _ = inputs(L=4)
    with pytest.raises(TypeError, match=r"query and value must have the same dtype"):
        linear_attention(q, k, v.float())
    with pytest.raises(TypeError, match=r"query and beta must have the same dtype"):
        delta_rule(q, k, v, beta.float())
    with pytest.raises(TypeError, match=r"beta must be a torch.Tensor; got float"):
        delta_rule(q, k, v, 0.5)
    with pytest.raises(TypeError, match=r"key must be a floating-point tensor; got dtype"):
        delta_rule(q, k.long(), v, beta)
    with pytest.raises(ValueError, match=r"feature_map must be 'elu', 'identity' or a callable"):
        linear_attention(q, k, v, feature_map="relu")
    with pytest.raises(TypeError, match=r"feature_map must be 'elu', 'identity' or a callable"):
        linear_attention(q, k, v, feature_map=3)
    with pytest.raises(ValueError, match=r"feature_map must map \(\.\.\., L, D\) to"):
        linear_attention(q, k, v, feature_map=lambda x: x.sum(-2))
    with pytest.raises(TypeError, match=r"normalize must be a bool; got int"):
        linear_attention(q, k, v, normalize=1)
    with pytest.raises(ValueError, match=r"eps must be a number >= 0; got -1"):
        linear_attention_chunked(q, k, v, eps=-1)
    assert math.isfinite(linear_attention(q, k, v, eps=0)[0].abs().max())


# ---- the layer -------------------------------------------------------------------------------


E_LAYER, H_LAYER = 12, 3  # D = 4


def layer_by_hand(m, x):
    """The layer from its parts: projections, the causal convolution written as a sum over
    the last ``conv_size`` tokens, heads, the recurrent form (the definition), out_proj."""
    Nx, Lx, E = x.shape
    qkv = torch.cat([m.q_proj(x), m.k_proj(x), m.v_proj(x)], dim=-1)  # (N, L, 3E)
    if m.conv is not None:
        w, b = m.conv.weight[:, 0], m.conv.bias  # (3E, C): tap j reads token t - (C - 1 - j)
        C = w.shape[1]
        padded = F.pad(qkv, (0, 0, C - 1, 0))  # zeros before the first token
        qkv = sum(padded[:, j : j + Lx] * w[:, j] for j in range(C)) + b
    Hm, Dm = m.num_heads, m.head_dim
    q, k, v = (t.view(Nx, Lx, Hm, Dm).transpose(1, 2) for t in qkv.split(E, dim=-1))
    if m.rule == "linear":
        out, _ = linear_attention_recurrent(q, k, v)
    else:
        beta = torch.sigmoid(m.beta_proj(x)).transpose(1, 2)  # (N, H, L)
        decay = None if m.rule == "delta" else torch.sigmoid(m.decay_proj(x)).transpose(1, 2)
        q = q / q.norm(dim=-1, keepdim=True)
        out, _ = delta_rule_recurrent(q, k, v, beta, decay=decay)
    return m.out_proj(out.transpose(1, 2).reshape(Nx, Lx, E))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rule", ["linear", "delta", "gated_delta"])
@pytest.mark.parametrize("conv_size,chunk_size", [(0, 4), (4, 3), (2, 16)])
def test_layer_equals_its_parts_by_the_recurrent_form(dtype, rule, conv_size, chunk_size):
    torch.manual_seed(0)
    m = LinearAttention(
        E_LAYER, H_LAYER, rule=rule, conv_size=conv_size, chunk_size=chunk_size, bias=True
    ).to(dtype)
    x = torch.randn(N, L, E_LAYER, dtype=dtype)
    torch.testing.assert_close(m(x), layer_by_hand(m, x), **tol(dtype))
    torch.testing.assert_close(m(x[0]), m(x)[0], **tol(dtype))  # unbatched
    if rule == "gated_delta":  # alpha = 1 (a bias of 50) is DeltaNet; alpha < 1 differs
        assert 0.9 < torch.sigmoid(m.decay_proj(x)).mean() < 0.97
        plain = LinearAttention(
            E_LAYER, H_LAYER, rule="delta", conv_size=conv_size, chunk_size=chunk_size, bias=True
        ).to(dtype)
        plain.load_state_dict(m.state_dict(), strict=False)
        assert not torch.allclose(m(x), plain(x))
        with torch.no_grad():
            m.decay_proj.bias.fill_(50.0)
        torch.testing.assert_close(m(x), plain(x), **tol(dtype))


@pytest.mark.parametrize("rule", ["linear", "delta", "gated_delta"])
def test_layer_is_causal_and_state_size_counts_what_decoding_keeps(rule):
    torch.manual_seed(1)
    m = LinearAttention(E_LAYER, H_LAYER, rule=rule, conv_size=3).double()
    x = torch.randn(N, L, E_LAYER, dtype=torch.float64)
    y = x.clone()
    y[:, 6:] = torch.randn(N, L - 6, E_LAYER, dtype=torch.float64)  # another future
    torch.testing.assert_close(m(x)[:, :6], m(y)[:, :6], **TIGHT)
    assert not torch.allclose(m(x)[:, 6:], m(y)[:, 6:])
    state = 3 * (4 * 4 + (4 if rule == "linear" else 0)) + 2 * 3 * E_LAYER
    assert m.state_size == state
    assert m(torch.randn(N, 0, E_LAYER, dtype=torch.float64)).shape == (N, 0, E_LAYER)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(rule="softmax"), ValueError, r"rule must be 'linear', 'delta' or 'gated_delta'; "),
        (dict(conv_size=-1), ValueError, r"conv_size must be a positive integer; got -1"),
        (dict(chunk_size=0), ValueError, r"chunk_size must be a positive integer; got 0"),
        (dict(num_heads=5), ValueError, r"embed_dim must be divisible by num_heads; got "),
        (dict(embed_dim=0), ValueError, r"embed_dim must be a positive integer; got 0"),
    ],
)
def test_layer_bad_arguments(kwargs, error, match):
    args = dict(embed_dim=E_LAYER, num_heads=H_LAYER) | kwargs
    with pytest.raises(error, match=match):
        LinearAttention(args.pop("embed_dim"), args.pop("num_heads"), **args)


def test_layer_bad_inputs():
    m = LinearAttention(E_LAYER, H_LAYER)
    with pytest.raises(ValueError, match=r"x must have shape \(N=2, L, E=12\); got \(2, 5, 7\)"):
        m(torch.randn(2, 5, 7))
    with pytest.raises(TypeError, match=r"x .*float64"):
        m(torch.randn(2, 5, E_LAYER, dtype=torch.float64))


# ---- the layer in a language model: a StateCache decodes -------------------------------------

LM_LINEAR = ["linear", "delta", "gated_delta", ["gated_delta", None], [None, "delta"]]


def _lm(linear, positions="learned", dtype=torch.float32):
    torch.manual_seed(0)
    model = LanguageModel(23, 12, 3, 2, max_len=32, positions=positions, linear=linear)
    return model.to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("positions", ["learned", "rope", None])
@pytest.mark.parametrize("linear", LM_LINEAR, ids=str)
def test_model_with_linear_layers_cached_equals_one_pass(linear, positions, dtype):
    """Fed in chunks of 4, 1, 0, 6 and 2 tokens through model.new_cache(): one pass's logits."""
    model = _lm(linear, positions, dtype)
    ids = torch.randint(0, 23, (2, 13), generator=torch.Generator().manual_seed(1))
    full, weights = model(ids, need_weights=True)
    rules = model.linear
    assert [w is None for w in weights] == [r is not None for r in rules]
    cache = model.new_cache()
    assert [type(c) for c in cache.layers] == [
        StateCache if r is not None else KVCache for r in rules
    ]
    steps, start = [], 0
    for size in (4, 1, 0, 6, 2):
        steps.append(model(ids[:, start : start + size], cache=cache)[0])
        start += size
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **tol(dtype))
    assert cache.length == 13


@pytest.mark.parametrize("linear", LM_LINEAR, ids=str)
def test_model_with_linear_layers_generates_the_same_with_and_without_a_cache(linear):
    model = _lm(linear, "rope")
    prompt = torch.tensor([[3, 1, 4]])
    greedy = model.generate(prompt, 8, temperature=0)
    assert torch.equal(greedy, model.generate(prompt, 8, temperature=0, use_cache=False))
    draws = [
        model.generate(prompt, 8, top_k=5, generator=torch.Generator().manual_seed(3), use_cache=c)
        for c in (True, False)
    ]
    assert torch.equal(*draws)


@pytest.mark.parametrize("rule", ["linear", "delta", "gated_delta"])
def test_state_cache_keeps_a_fixed_size_counted_by_hand(rule):
    """H D^2 (+ H D for linear attention's z) numbers of state and 3 E (conv_size - 1) inputs
    per sequence and layer, float32: the same after 5 tokens as after 30."""
    model = _lm(rule)
    E, H, D, N = 12, 3, 4, 2
    per_layer = (H * D * D + (H * D if rule == "linear" else 0) + 3 * E * 3) * N * 4
    assert per_layer == N * 4 * model.blocks[0].attn.state_size
    cache = model.new_cache()
    ids = torch.randint(0, 23, (N, 30), generator=torch.Generator().manual_seed(0))
    model(ids[:, :5], cache=cache)
    assert cache.nbytes == 2 * per_layer
    model(ids[:, 5:], cache=cache)
    assert cache.nbytes == 2 * per_layer and cache.length == 30


def test_a_hybrid_cache_grows_in_its_softmax_layer_only():
    model = _lm(["gated_delta", None])
    cache = model.new_cache()
    model(torch.zeros(1, 5, dtype=torch.long), cache=cache)
    fixed, grown = cache.layers[0].nbytes, cache.layers[1].nbytes
    model(torch.zeros(1, 7, dtype=torch.long), cache=cache)
    assert cache.layers[0].nbytes == fixed
    assert cache.layers[1].nbytes == grown * 12 // 5  # a key and a value per token: (N, H, S, D)


def test_the_model_keeps_the_gated_decay_bias():
    """LanguageModel's GPT-2 initialisation zeroes biases; the decay's stays at 3."""
    model = _lm("gated_delta")
    for block in model.blocks:
        torch.testing.assert_close(block.attn.decay_proj.bias, torch.full((3,), 3.0))
        assert not block.attn.q_proj.bias.any()


def test_linear_layer_with_a_state_cache_in_pieces():
    torch.manual_seed(0)
    layer = LinearAttention(12, 3, rule="gated_delta", bias=True).double().eval()
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    cache = StateCache()
    pieces = [layer(x[:, a:b], cache=cache) for a, b in ((0, 3), (3, 3), (3, 4), (4, 9))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), layer(x), **TIGHT)
    assert repr(cache) == "StateCache(nbytes=2496, length=9, key shape=(2, 3, 4, 4))"


def test_linear_layers_bad_arguments():
    with pytest.raises(ValueError, match=r"linear must be None, one of 'linear', .* got 'soft'"):
        LanguageModel(23, 12, 3, 2, max_len=8, linear="soft")
    with pytest.raises(ValueError, match=r"a list of one of them or None per layer \(2\); got"):
        LanguageModel(23, 12, 3, 2, max_len=8, linear=["delta"])
    with pytest.raises(ValueError, match=r"window must be None for a linear-attention layer .*"):
        LanguageModel(23, 12, 3, 2, max_len=8, linear=["delta", None], window=[4, None])
    with pytest.raises(ValueError, match=r"takes none of .* got positions='rope', qk_norm"):
        TransformerBlock(12, 3, linear="delta", positions="rope", qk_norm=True)
    block = TransformerBlock(12, 3, linear="delta")
    with pytest.raises(ValueError, match=r"mask must be None for a block of LinearAttention"):
        block(torch.randn(5, 12), mask=causal_mask(5))
    with pytest.raises(TypeError, match=r"cache must be an attnlib.linear_attention.StateCache"):
        block(torch.randn(5, 12), cache=KVCache())
    with pytest.raises(TypeError, match=r"cache must be an attnlib.linear_attention.StateCache"):
        LinearAttention(12, 3)(torch.randn(5, 12), cache=KVCache())
    model = _lm(["delta", None])
    with pytest.raises(TypeError, match=r"cache \(layer 0\) must be an .*StateCache .*got KVCache"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=_lm(None).new_cache())
    with pytest.raises(TypeError, match=r"cache \(layer 1\) must be .*keeps keys .*got StateCache"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=ModelCache([StateCache(), StateCache()]))
    with pytest.raises(ValueError, match=r"cache \(layer 0\) belongs to the layer LinearAttention"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=_lm("delta").new_cache())
    with pytest.raises(TypeError, match=r"a StateCache holds a linear-attention layer's state"):
        StateCache().update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4))
    cache = model.new_cache()
    model(torch.zeros(2, 3, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"holds keys of shape \(N=2, G=3, S=4, D=4\); .*N=1"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
