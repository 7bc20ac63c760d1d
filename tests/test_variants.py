"""The options of MultiHeadAttention as 2025 models train it: QK-norm, logit soft-capping, a
learned sink logit per head and an output gate (each off by default).

Oracles: the formula of the class docstring written term by term (``by_hand``: RMSNorm by its
definition, ``torch.softmax`` over the scores and the sink, a zero value for the sink);
``F.scaled_dot_product_attention`` on queries and keys normalised, then rotated, by hand; for
the sink, ``F.scaled_dot_product_attention`` with one more key whose score is the sink logit
(a zero key and a float mask) and whose value is zero; full attention over the whole sequence
with the mask each cache stands for. Sizes all differ (E=24, H=6, D=4, G=2, L=11, S=9, N=2).
"""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import ModernAttention, MultiHeadAttention, causal_mask
from attnlib.convert import naive_from_fused, to_torch
from attnlib.decoding import (
    KVCache,
    PreallocatedCache,
    RollingCache,
    SinkCache,
    sliding_window_mask,
)
from attnlib.paged import BlockPool, PagedCache
from attnlib.positions import ALiBi, Rotary, alibi_bias, rotary_embedding

E, H, D, G, L, S, N = 24, 6, 4, 2, 11, 9, 2
CAP = 2.0  # scores here are a few units: a cap of 2 bends them
ALL = dict(qk_norm=True, softcap=CAP, sink=True, gate=True)
FLAGS = ("qk_norm", "softcap", "sink", "gate")
CHUNKS = [[1] * L, [3, 1, 1, 4, 2], [L], [5, 0, 6]]  # steps, prefills, an empty step


def layer(G=G, positions=None, seed=0, dtype=torch.float32, **options):
    torch.manual_seed(seed)
    m = ModernAttention(E, H, bias=True, num_kv_heads=G, positions=positions, **options)
    m = m.to(dtype).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():  # random biases, norm scales and sink logits too
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.4)
        if m.sink:
            m.sink_logits.add_(1.0)  # a sink that takes a visible share
    return m


def options(on):
    """The keyword arguments that turn on the options named in ``on``."""
    return {name: ALL[name] for name in on}


def rms_norm(x, weight):
    """RMSNorm by its definition: x / sqrt(mean(x^2) + eps) * w, eps = 1e-6."""
    return x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt() * weight


def by_hand(m, query, key=None, value=None, mask=None):
    """The layer's formula, term by term; ``mask`` broadcastable to (N, H, L, S)."""
    key = query if key is None else key
    value = key if value is None else value
    Nq, Lq, Sk, Gm = query.shape[0], query.shape[1], key.shape[1], m.num_kv_heads
    q = m.q_proj(query).view(Nq, Lq, H, D).transpose(1, 2)  # (N, H, L, D)
    k = m.k_proj(key).view(Nq, Sk, Gm, D).transpose(1, 2)  # (N, G, S, D)
    v = m.v_proj(value).view(Nq, Sk, Gm, D).transpose(1, 2)
    if m.qk_norm:
        q, k = rms_norm(q, m.q_norm.weight), rms_norm(k, m.k_norm.weight)
    bias = torch.zeros(Lq, Sk, dtype=query.dtype)
    if isinstance(m.positions, Rotary):
        q = rotary_embedding(q, base=m.positions.base)
        k = rotary_embedding(k, base=m.positions.base)
    elif isinstance(m.positions, ALiBi):
        bias = alibi_bias(H, Lq, Sk).to(query.dtype)
    k, v = k.repeat_interleave(H // Gm, dim=1), v.repeat_interleave(H // Gm, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(D)  # (N, H, L, S)
    if m.softcap is not None:
        s = m.softcap * torch.tanh(s / m.softcap)
    s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask
    if m.sink:  # one more key: score b_h, value 0
        s = torch.cat([s, m.sink_logits.view(1, H, 1, 1).expand(Nq, H, Lq, 1)], dim=-1)
        v = torch.cat([v, v.new_zeros(Nq, H, 1, D)], dim=-2)
    w = torch.softmax(s, dim=-1)
    heads = (w @ v).transpose(1, 2).reshape(Nq, Lq, H * D)
    if m.gate:
        heads = heads * torch.sigmoid(m.gate_proj(query))
    return m.out_proj(heads), w[..., :Sk]


def random_mask(shape, form, seed=1):
    """A boolean or float (0 / -inf) mask that leaves every query at least its first key."""
    allowed = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    allowed[..., 0] = True
    if form == "bool":
        return allowed
    return torch.zeros(shape).masked_fill(~allowed, -math.inf)


def decode(m, x, cache, chunks):
    """Feed ``x`` through ``m`` chunk by chunk with ``cache``; the outputs, concatenated."""
    outs, start = [], 0
    for size in chunks:
        outs.append(m(x[:, start : start + size], cache=cache)[0])
        start += size
    return torch.cat(outs, dim=1)


# ---- off by default: nothing changes ---------------------------------------------------------


def test_options_off_leave_the_layer_as_it_was():
    plain, off = layer(), layer(qk_norm=False, softcap=None, sink=False, gate=False)
    names = ["q_proj", "k_proj", "v_proj", "out_proj"]
    assert list(plain.state_dict()) == [f"{n}.{p}" for n in names for p in ("weight", "bias")]
    assert [n for n, _ in plain.named_children()] == names
    assert plain.q_norm is plain.k_norm is plain.gate_proj is plain.sink_logits is None
    assert repr(plain) == repr(off) and not any(f in repr(plain) for f in FLAGS)
    x, mask = torch.randn(N, L, E), causal_mask(L)
    for need_weights in (True, False):
        a = plain(x, mask=mask, need_weights=need_weights)
        b = off(x, mask=mask, need_weights=need_weights)
        assert torch.equal(a[0], b[0])


def test_extra_repr_shows_each_option_only_when_on():
    assert "softcap=30.0" in repr(ModernAttention(E, H, softcap=30))
    for name in FLAGS:
        text = repr(layer(**options([name])))
        assert [f for f in FLAGS if f"{f}=" in text] == [name]
    text = repr(layer(positions="rope", **ALL))
    assert "positions=Rotary(base=10000), qk_norm=True, softcap=2.0, sink=True, gate=True" in text
    assert "(q_norm): RMSNorm((4,), eps=1e-06" in text and "(gate_proj): Linear(" in text


def test_the_parts_of_each_option():
    m = ModernAttention(E, H, num_kv_heads=G, bias=True, **ALL)
    assert m.q_norm.weight.shape == m.k_norm.weight.shape == (D,)  # one scale, shared by heads
    assert m.q_norm.eps == 1e-6 and torch.equal(m.q_norm.weight, torch.ones(D))
    assert m.gate_proj.weight.shape == (H * D, E) and m.gate_proj.bias.shape == (H * D,)
    assert torch.equal(m.sink_logits, torch.zeros(H))  # softmax_1 at first
    assert m.softcap == CAP and isinstance(m.softcap, float)
    assert ModernAttention(E, H, gate=True).gate_proj.bias is None  # bias=False
    trainable = {n for n, p in m.named_parameters() if p.requires_grad}
    assert {"q_norm.weight", "k_norm.weight", "gate_proj.weight", "sink_logits"} <= trainable


# ---- QK-norm ---------------------------------------------------------------------------------


@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("positions", [None, Rotary(100.0), "alibi"])
def test_qk_norm_equals_sdpa_on_heads_normalised_then_rotated(G, positions):
    m, x = layer(G, positions, qk_norm=True), torch.randn(N, L, E)
    q = rms_norm(m.q_proj(x).view(N, L, H, D).transpose(1, 2), m.q_norm.weight)
    k = rms_norm(m.k_proj(x).view(N, L, G, D).transpose(1, 2), m.k_norm.weight)
    v = m.v_proj(x).view(N, L, G, D).transpose(1, 2)
    mask = causal_mask(L)
    if positions == "alibi":
        mask = alibi_bias(H, L).masked_fill(~mask, -math.inf)  # (H, L, L)
    elif positions is not None:  # normalised first, then rotated
        q, k = rotary_embedding(q, base=100.0), rotary_embedding(k, base=100.0)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    expected = m.out_proj(heads.transpose(1, 2).reshape(N, L, E))
    for need_weights in (True, False):
        torch.testing.assert_close(
            m(x, mask=causal_mask(L), need_weights=need_weights)[0], expected
        )


def test_qk_norm_comes_before_rope():
    """Rotating first, then normalising, gives other numbers: the order is tested."""
    m, x = layer(2, Rotary(100.0), qk_norm=True), torch.randn(N, L, E)
    rotate = lambda t: rotary_embedding(t, base=100.0)  # noqa: E731
    q = m.q_proj(x).view(N, L, H, D).transpose(1, 2)
    k = m.k_proj(x).view(N, L, G, D).transpose(1, 2)
    v = m.v_proj(x).view(N, L, G, D).transpose(1, 2)
    wrong = F.scaled_dot_product_attention(
        rms_norm(rotate(q), m.q_norm.weight),
        rms_norm(rotate(k), m.k_norm.weight),
        v,
        is_causal=True,
        enable_gqa=True,
    )
    wrong = m.out_proj(wrong.transpose(1, 2).reshape(N, L, E))
    assert not torch.allclose(m(x, mask=causal_mask(L))[0], wrong, atol=1e-3)


def test_qk_norm_bounds_the_scores():
    """With unit scales every score is at most sqrt(D) (|q^| = |k^| = sqrt(D))."""
    m = ModernAttention(E, H, qk_norm=True, num_kv_heads=G).eval()
    x = torch.randn(N, L, E) * 100
    q = m.q_norm(m.q_proj(x).view(N, L, H, D).transpose(1, 2))
    torch.testing.assert_close(q.pow(2).mean(-1), torch.ones(N, H, L), atol=1e-4, rtol=0)
    _, w = m(x)
    max_ratio = math.exp(2 * math.sqrt(D))  # scores in [-sqrt(D), sqrt(D)]
    assert (w.amax(-1) / w.amin(-1)).max() <= max_ratio * (1 + 1e-4)


@pytest.mark.parametrize("positions", [None, Rotary(100.0)])
def test_qk_norm_cache_keeps_normalised_unrotated_keys(positions):
    m, x = layer(2, positions, qk_norm=True), torch.randn(N, L, E)
    cache = KVCache()
    decode(m, x, cache, [4, 1, 6])
    k = m.k_norm(m.k_proj(x).view(N, L, G, D).transpose(1, 2))  # (N, G, L, D), not rotated
    torch.testing.assert_close(cache.key, k)
    torch.testing.assert_close(
        (cache.key / m.k_norm.weight).pow(2).mean(-1), torch.ones(N, G, L), atol=1e-4, rtol=0
    )


# ---- soft-capping ----------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("form", [None, "bool", "float"])
def test_softcap_equals_the_formula(need_weights, form):
    m, x = layer(softcap=CAP), torch.randn(N, L, E)
    mask = None if form is None else random_mask((N, H, L, L), form)
    expected, w_expected = by_hand(m, x, mask=mask)
    out, w = m(x, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(w, w_expected)
    # the capped scores lie in (-c, c): no weight can beat another by more than e^(2c)
    uncapped, _ = by_hand(layer(), x, mask=mask)
    assert not torch.allclose(out, uncapped, atol=1e-2)


def test_softcap_bounds_the_weights_and_a_large_cap_changes_little():
    m, x = layer(softcap=CAP), torch.randn(N, L, E) * 50
    _, w = m(x)
    assert (w.amax(-1) / w.amin(-1)).max() <= math.exp(2 * CAP) * (1 + 1e-4)
    big, plain = layer(softcap=1e6), layer()
    x = torch.randn(N, L, E)
    torch.testing.assert_close(big(x)[0], plain(x)[0], atol=1e-5, rtol=1e-5)


def test_softcap_caps_before_a_float_mask_is_added():
    """ALiBi's bias (a float mask) is added after the cap, as Gemma 2 adds its mask."""
    m, x = layer(softcap=CAP), torch.randn(N, L, E)
    bias = alibi_bias(H, L).unsqueeze(0) * 10  # (1, H, L, L), far beyond the cap
    expected, _ = by_hand(m, x, mask=bias)  # adds the mask after the cap
    torch.testing.assert_close(m(x, mask=bias)[0], expected)


# ---- sinks -----------------------------------------------------------------------------------


def sdpa_with_a_zero_key(m, query, key, mask):
    """The sink as F.sdpa sees it: one more key, zero (its score q . 0 = 0), with the sink
    logit b_h in the float mask, and a zero value."""
    Nq, Lq, Sk = query.shape[0], query.shape[1], key.shape[1]
    q = m.q_proj(query).view(Nq, Lq, H, D).transpose(1, 2)
    k = m.k_proj(key).view(Nq, Sk, G, D).transpose(1, 2)
    v = m.v_proj(key).view(Nq, Sk, G, D).transpose(1, 2)
    k = torch.cat([k, k.new_zeros(Nq, G, 1, D)], dim=2)  # (N, G, S + 1, D)
    v = torch.cat([v, v.new_zeros(Nq, G, 1, D)], dim=2)
    mask = torch.zeros(Nq, H, Lq, Sk) if mask is None else mask
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape).masked_fill(~mask, -math.inf)
    mask = mask.float().expand(Nq, H, Lq, Sk)
    sink = m.sink_logits.view(1, H, 1, 1).expand(Nq, H, Lq, 1)
    mask = torch.cat([mask, sink], dim=-1)  # (N, H, L, S + 1)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return m.out_proj(heads.transpose(1, 2).reshape(Nq, Lq, H * D))


@pytest.mark.parametrize(
    "shape", [None, (L, S), (N, L, S), (N, H, L, S), (N, 1, S)], ids=lambda s: str(s)
)
@pytest.mark.parametrize("form", ["bool", "float"])
def test_sink_equals_one_more_key_with_zero_value(shape, form):
    m = layer(sink=True)
    x, memory = torch.randn(N, L, E), torch.randn(N, S, E)  # cross-attention, S != L
    mask = None if shape is None else random_mask(shape, form)
    oracle_mask = mask if mask is None or len(shape) != 3 else mask.unsqueeze(1)  # (N, 1, ., S)
    expected = sdpa_with_a_zero_key(m, x, memory, oracle_mask)
    out, w = m(x, memory, mask=mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(m(x, memory, mask=mask, need_weights=False)[0], expected)
    assert w.shape == (N, H, L, S) and (w.sum(-1) <= 1).all()  # the sink takes the rest
    torch.testing.assert_close(w, by_hand(m, x, memory, mask=oracle_mask)[1])


def test_sink_share_is_the_softmax_of_its_logit():
    """One query, two keys, by hand: weights e^s_j / (e^b + e^s_1 + e^s_2)."""
    m = layer(G=H, sink=True)
    x = torch.randn(1, 2, E)
    _, w = m(x)
    q = m.q_proj(x).view(1, 2, H, D).transpose(1, 2)[0, :, 1]  # (H, D): the second query
    k = m.k_proj(x).view(1, 2, H, D).transpose(1, 2)[0]  # (H, 2, D)
    s = (k @ q.unsqueeze(-1)).squeeze(-1) / 2  # (H, 2), sqrt(D) = 2
    b = m.sink_logits
    expected = s.exp() / (b.exp() + s.exp().sum(-1)).unsqueeze(-1)  # (H, 2)
    torch.testing.assert_close(w[0, :, 1], expected)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("gate", [False, True])
def test_sink_gives_zero_output_where_every_key_is_masked(need_weights, gate):
    m, x = layer(sink=True, gate=gate), torch.randn(N, L, E)
    mask = torch.ones(N, H, L, L, dtype=torch.bool).tril()
    mask[0, 2, 4] = False  # sequence 0, head 2, query 4 sees nothing
    mask[1, :, 7] = False  # sequence 1, query 7 sees nothing in any head
    out, w = m(x, mask=mask, need_weights=need_weights)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1, 7], m.out_proj.bias)  # every head's output is 0
    if need_weights:
        assert torch.isfinite(w).all()
        assert (w[0, 2, 4] == 0).all() and (w[1, :, 7] == 0).all()
    heads_only = layer(sink=True, gate=gate)
    with torch.no_grad():
        heads_only.out_proj.weight.copy_(torch.eye(E))
        heads_only.out_proj.bias.zero_()
    heads = heads_only(x, mask=mask)[0].view(N, L, H, D)  # the heads, before out_proj
    assert (heads[0, 4, 2] == 0).all() and (heads[0, 4, :2] != 0).all()
    assert (heads[1, 7] == 0).all()


# ---- the gate --------------------------------------------------------------------------------


@pytest.mark.parametrize("G", [1, 2, 6])
def test_gate_multiplies_each_head_by_a_sigmoid_of_the_query_input(G):
    gated, plain = layer(G, gate=True), layer(G)
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj"):
            getattr(plain, name).load_state_dict(getattr(gated, name).state_dict())
        plain.out_proj.weight.copy_(torch.eye(E))  # plain returns the heads (N, L, H*D)
        plain.out_proj.bias.zero_()
    x, memory = torch.randn(N, L, E), torch.randn(N, S, E)  # the gate reads the query input
    mask = random_mask((N, 1, L, S), "bool")
    heads, w_plain = plain(x, memory, mask=mask)
    expected = gated.out_proj(heads * torch.sigmoid(gated.gate_proj(x)))
    out, w = gated(x, memory, mask=mask)
    torch.testing.assert_close(out, expected)
    assert torch.equal(w, w_plain)  # the gate leaves the weights alone


# ---- all options together --------------------------------------------------------------------

COMBINATIONS = [c for r in range(1, 5) for c in itertools.combinations(FLAGS, r)]


@pytest.mark.parametrize(
    "on,positions",  # each combination once, the position schemes in turn
    [(on, (None, "rope", "alibi")[i % 3]) for i, on in enumerate(COMBINATIONS)],
    ids=lambda c: "+".join(c) if isinstance(c, tuple) else str(c),
)
def test_every_combination_equals_the_formula(on, positions):
    m = layer(G, positions, dtype=torch.float64, **options(on))
    x = torch.randn(N, L, E, dtype=torch.float64)
    mask = random_mask((N, H, L, L), "bool")
    out, w = m(x, mask=mask)
    expected, w_expected = by_hand(m, x, mask=mask)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w, w_expected, rtol=1e-12, atol=1e-12)
    fast, none = m(x, mask=mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(fast, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "shape", [(L, S), (N, L, S), (N, H, L, S), (N, 1, S), (1, H, 1, S)], ids=lambda s: str(s)
)
@pytest.mark.parametrize("form", ["bool", "float"])
def test_all_options_with_masks_of_every_shape_and_gqa(shape, form):
    G = (1, 3, 6)[len(shape) % 3]  # multi-query, grouped and multi-head in turn
    m = layer(G, "alibi", **ALL)
    x, memory = torch.randn(N, L, E), torch.randn(N, S, E)
    mask = random_mask(shape, form)
    out, w = m(x, memory, mask=mask)
    oracle_mask = mask.unsqueeze(1) if len(shape) == 3 else mask
    expected, w_expected = by_hand(m, x, memory, mask=oracle_mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, w_expected)
    torch.testing.assert_close(m(x, memory, mask=mask, need_weights=False)[0], expected)


def test_all_options_unbatched_and_empty():
    m, x = layer(positions="rope", **ALL), torch.randn(L, E)
    for mask in (causal_mask(L), causal_mask(L).expand(H, L, L)):
        out, w = m(x, mask=mask)
        assert out.shape == (L, E) and w.shape == (H, L, L)
        torch.testing.assert_close(out, by_hand(m, x[None], mask=causal_mask(L))[0][0])
    out, w = m(torch.randn(0, L, E))
    assert out.shape == (0, L, E) and w.shape == (0, H, L, L)
    out, w = m(torch.randn(N, 0, E))
    assert out.shape == (N, 0, E) and w.shape == (N, H, 0, 0)
    out, w = m(torch.randn(N, L, E), torch.randn(N, 0, E))  # no keys: heads 0, gate or not
    assert w.shape == (N, H, L, 0)
    torch.testing.assert_close(out, m.out_proj.bias.expand(N, L, E))


def test_all_options_in_float64():
    m = layer(G, "rope", dtype=torch.float64, **ALL)
    x = torch.randn(N, L, E, dtype=torch.float64)
    out, w = m(x, mask=causal_mask(L))
    assert out.dtype == w.dtype == m.sink_logits.dtype == m.q_norm.weight.dtype == torch.float64
    expected, w_expected = by_hand(m, x, mask=causal_mask(L))
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w, w_expected, rtol=1e-12, atol=1e-12)


def test_gradients_reach_every_new_parameter():
    m = layer(positions="rope", **ALL).train()
    x = torch.randn(N, L, E)
    m(x, mask=causal_mask(L))[0].square().sum().backward()
    for p in (m.q_norm.weight, m.k_norm.weight, m.sink_logits, m.gate_proj.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    small = ModernAttention(6, 2, num_kv_heads=1, bias=True, **ALL).double()
    xs = torch.randn(1, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: small(t, mask=causal_mask(3))[0], (xs,))


def test_dropout_drops_the_weights_that_make_the_output():
    m = layer(G=H, dropout=0.5, sink=True, softcap=CAP).train()  # no gate: heads = w @ v
    with torch.no_grad():
        m.out_proj.weight.copy_(torch.eye(E))
        m.out_proj.bias.zero_()
    x = torch.randn(N, L, E)
    out, w = m(x, mask=causal_mask(L))
    assert (w == 0).any()
    v = m.v_proj(x).view(N, L, H, D).transpose(1, 2)
    torch.testing.assert_close(out, (w @ v).transpose(1, 2).reshape(N, L, E))


def test_all_options_compile_as_one_graph():
    m, x = layer(positions="rope", **ALL), torch.randn(N, L, E)
    compiled = torch.compile(m, backend="eager", fullgraph=True)
    mask = causal_mask(L)
    torch.testing.assert_close(compiled(x, mask=mask)[0], m(x, mask=mask)[0])


# ---- caches ----------------------------------------------------------------------------------


def sink_mask(L, window, sinks):
    i, j = torch.arange(L).unsqueeze(1), torch.arange(L).unsqueeze(0)
    return (j <= i) & ((j > i - window) | (j < sinks))


CACHES = {  # the cache, and the mask of the full pass it stands for
    "kv": (KVCache, causal_mask(L)),
    "preallocated": (lambda: PreallocatedCache(L + 2), causal_mask(L)),
    "rolling3": (lambda: RollingCache(3), sliding_window_mask(L, 3)),
    "rolling20": (lambda: RollingCache(20), causal_mask(L)),
    "kv_window4": (lambda: KVCache(window=4), sliding_window_mask(L, 4)),
}


@pytest.mark.parametrize("cache", list(CACHES))
@pytest.mark.parametrize("chunks", CHUNKS[1:4:2], ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("positions", [None, "rope", "alibi"])
def test_cached_decoding_equals_the_full_pass(cache, chunks, positions):
    make, mask = CACHES[cache]
    m, x = layer(G, positions, **ALL), torch.randn(N, L, E)
    torch.testing.assert_close(decode(m, x, make(), chunks), m(x, mask=mask)[0])


@pytest.mark.parametrize("on", [(f,) for f in FLAGS] + [FLAGS], ids=lambda c: "+".join(c))
@pytest.mark.parametrize("G", [1, 6])
def test_each_option_decodes_step_by_step(on, G):
    m, x = layer(G, "rope", **options(on)), torch.randn(N, L, E)
    for need_weights in (True, False):
        cache = PreallocatedCache(L)
        steps = [m(x[:, t : t + 1], cache=cache, need_weights=need_weights)[0] for t in range(L)]
        torch.testing.assert_close(torch.cat(steps, dim=1), m(x, mask=causal_mask(L))[0])


def test_sink_and_paged_caches():
    m, x = layer(G, **ALL), torch.randn(N, L, E)  # no positions: SinkCache renumbers them
    got = decode(m, x, SinkCache(3, sinks=2), CHUNKS[1])
    torch.testing.assert_close(got, m(x, mask=sink_mask(L, 3, 2))[0])
    paged = PagedCache(BlockPool(12, 3))  # one sequence
    got = decode(m, x[:1], paged, CHUNKS[1])
    torch.testing.assert_close(got, m(x[:1], mask=causal_mask(L))[0])


# ---- errors and converters -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(softcap=0), ValueError, r"softcap must be None or a number > 0; got 0"),
        (dict(softcap=-50.0), ValueError, r"softcap must be None or a number > 0; got -50.0"),
        (dict(softcap=math.nan), ValueError, r"softcap must be None or a number > 0; got nan"),
        (dict(softcap=math.inf), ValueError, r"softcap must be finite; got inf"),
        (dict(softcap="50"), TypeError, r"softcap must be None or a number > 0; got str '50'"),
        (dict(softcap=True), TypeError, r"softcap must be None or a number > 0; got bool True"),
        (dict(qk_norm=1), TypeError, r"qk_norm must be a bool; got int 1"),
        (dict(sink="yes"), TypeError, r"sink must be a bool; got str 'yes'"),
        (dict(gate=None), TypeError, r"gate must be a bool; got NoneType None"),
    ],
)
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        ModernAttention(E, H, **kwargs)


@pytest.mark.parametrize("name", FLAGS)
@pytest.mark.parametrize(
    "convert,target",
    [(to_torch, "torch.nn.MultiheadAttention"), (naive_from_fused, "NaiveMultiHeadAttention")],
)
def test_converters_refuse_the_options(name, convert, target):
    """Neither target has any of the options: a converter refuses rather than drop one."""
    m = ModernAttention(E, H, **options([name]))
    with pytest.raises(
        TypeError,
        match=r"m must be an attnlib.MultiHeadAttention; got ModernAttention \(a subclass of it "
        r"computes more than the converters carry",
    ):
        convert(m)


# ---- the logits, and the options in a block and a language model -----------------------------


def by_hand_scores(m, query, key):
    """q^ . k^ / sqrt(D) by the definition: projected, normalised, rotated, per head."""
    Nq, Lq, Sk, Gm = query.shape[0], query.shape[1], key.shape[1], m.num_kv_heads
    q = m.q_proj(query).view(Nq, Lq, H, D).transpose(1, 2)  # (N, H, L, D)
    k = m.k_proj(key).view(Nq, Sk, Gm, D).transpose(1, 2)  # (N, G, S, D)
    if m.qk_norm:
        q, k = rms_norm(q, m.q_norm.weight), rms_norm(k, m.k_norm.weight)
    if isinstance(m.positions, Rotary):
        base = m.positions.base
        q, k = rotary_embedding(q, base=base), rotary_embedding(k, base=base)
    k = k.repeat_interleave(H // Gm, dim=1)  # (N, H, S, D)
    return q @ k.transpose(-2, -1) / math.sqrt(D)  # (N, H, L, S)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("on", [(), ("qk_norm",), FLAGS], ids=lambda c: "+".join(c) or "plain")
@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("positions", [None, Rotary(100.0), "alibi"])
def test_scores_are_the_logits_before_the_cap(dtype, on, G, positions):
    m = layer(G, positions, dtype=dtype, **options(on))
    x, y = torch.randn(N, L, E, dtype=dtype), torch.randn(N, S, E, dtype=dtype)
    s = m.scores(x, y)  # (N, H, L, S)
    torch.testing.assert_close(s, by_hand_scores(m, x, y))
    # the forward's weights are the softmax of these logits, capped, biased, with the sink
    if m.softcap is not None:
        s = m.softcap * torch.tanh(s / m.softcap)
    if isinstance(m.positions, ALiBi):
        s = s + alibi_bias(H, L, S).to(dtype)
    if m.sink:
        s = torch.cat([s, m.sink_logits.view(1, H, 1, 1).expand(N, H, L, 1)], dim=-1)
    torch.testing.assert_close(m(x, y)[1], s.softmax(-1)[..., :S])


def test_scores_unbatched_self_attention_and_other_key_widths():
    torch.manual_seed(3)
    m = MultiHeadAttention(E, H, kdim=7, vdim=5, num_kv_heads=3).eval()
    x, k, v = torch.randn(L, E), torch.randn(S, 7), torch.randn(S, 5)
    s = m.scores(x, k)
    assert s.shape == (H, L, S)
    torch.testing.assert_close(m(x, k, v)[1], s.softmax(-1))
    plain = MultiHeadAttention(E, H).eval()
    assert plain.scores(x).shape == (H, L, L)
    assert plain.scores(torch.randn(N, 0, E)).shape == (N, H, 0, 0)


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((torch.randn(L, E + 1),), ValueError, r"query must have shape \(L, E=24\); got \(11, 25"),
        ((torch.randn(L, E), torch.randn(S, 7)), ValueError, r"key must have shape \(S, E=24\)"),
        ((torch.randn(N, L, E), torch.randn(N + 1, S, E)), ValueError, r"key must have shape"),
        ((torch.randn(L, E).double(),), TypeError, r"query"),
        ((torch.randn(L, E), "keys"), TypeError, r"key must be a torch.Tensor"),
    ],
)
def test_scores_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention(E, H).scores(*args)


@pytest.mark.parametrize("on", [(f,) for f in FLAGS] + [FLAGS], ids=lambda c: "+".join(c))
def test_block_and_model_pass_the_options_to_every_layer(on):
    from attnlib import LanguageModel, TransformerBlock

    off = dict(qk_norm=False, softcap=None, sink=False, gate=False)
    want = off | options(on)
    block = TransformerBlock(E, H, **options(on))
    lm = LanguageModel(50, E, H, 3, max_len=16, positions="rope", **options(on))
    for attn in [block.attn] + [b.attn for b in lm.blocks]:
        assert {f: getattr(attn, f) for f in FLAGS} == want


@pytest.mark.parametrize("on", [(f,) for f in FLAGS] + [FLAGS], ids=lambda c: "+".join(c))
@pytest.mark.parametrize("positions", ["learned", "rope", "alibi"])
def test_a_model_with_each_option_decodes_as_it_reads(on, positions):
    """Cached generation = the full causal pass, for a model with each option (and all)."""
    from attnlib import LanguageModel

    torch.manual_seed(0)
    lm = LanguageModel(50, E, H, 2, max_len=32, positions=positions, **options(on)).eval()
    with torch.no_grad():
        for b in lm.blocks:  # random sink logits and norm scales, so that they matter
            for p in b.attn.parameters():
                if p.dim() == 1:
                    p.copy_(torch.randn(p.shape) * 0.5)
    ids = torch.randint(0, 50, (N, 13))
    full = lm(ids)[0]
    cache = lm.new_cache()
    parts, start = [], 0
    for size in [4, 1, 0, 6, 2]:
        parts.append(lm(ids[:, start : start + size], cache=cache)[0])
        start += size
    torch.testing.assert_close(torch.cat(parts, dim=1), full)
    greedy = ids[:, :5]  # greedy decoding by full passes, no cache
    for _ in range(6):
        greedy = torch.cat([greedy, lm(greedy)[0][:, -1:].argmax(-1)], dim=1)
    assert torch.equal(lm.generate(ids[:, :5], 6, temperature=0), greedy)


@pytest.mark.parametrize("name", FLAGS)
def test_latent_attention_refuses_the_options(name):
    from attnlib import TransformerBlock

    with pytest.raises(
        ValueError, match=rf"latent_dim \(multi-head latent attention\) takes none of .*{name}="
    ):
        TransformerBlock(E, H, latent_dim=6, **options([name]))
