"""Grouped-query attention, the KV cache and sliding windows (attnlib.decoding).

Oracles: ``F.scaled_dot_product_attention`` with ``enable_gqa=True`` and ``is_causal=True`` on
the layer's own projections; full causal attention over the whole sequence for step-by-step
decoding; a full-sequence ``sliding_window_mask`` for the rolling cache. Sizes all differ
(E=24, H=6, D=4, G in 1, 2, 3, 6, L=7, N=2).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import MultiHeadAttention, causal_mask
from attnlib.convert import naive_from_fused, to_keras, to_torch
from attnlib.decoding import KVCache, sliding_window_mask

E, H, D, L, N = 24, 6, 4, 7, 2


def layer(G, bias=True, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    m = MultiHeadAttention(E, H, bias=bias, num_kv_heads=G).to(dtype).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.4)  # random biases too
    return m


def by_torch(m, x, mask=None, is_causal=False):
    """The layer's projections, then F.sdpa with enable_gqa (the oracle)."""
    Nx, Lx, _ = x.shape
    q = m.q_proj(x).view(Nx, Lx, H, D).transpose(1, 2)  # (N, H, L, D)
    k = m.k_proj(x).view(Nx, Lx, m.num_kv_heads, D).transpose(1, 2)  # (N, G, L, D)
    v = m.v_proj(x).view(Nx, Lx, m.num_kv_heads, D).transpose(1, 2)
    heads = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=True
    )
    return m.out_proj(heads.transpose(1, 2).reshape(Nx, Lx, H * D))


# ---- grouped-query attention -------------------------------------------------------------------


@pytest.mark.parametrize("G", [1, 2, 3, 6])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("form", [None, "bool", "float"])
def test_gqa_equals_torch_enable_gqa(G, need_weights, form):
    m = layer(G)
    x = torch.randn(N, L, E)
    mask = None
    if form is not None:
        allowed = torch.rand(N, 1, L, L, generator=torch.Generator().manual_seed(1)) > 0.4
        allowed[..., 0] = True
        mask = (
            allowed
            if form == "bool"
            else torch.zeros(allowed.shape).masked_fill(~allowed, -math.inf)
        )
    out, w = m(x, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out, by_torch(m, x, mask=mask))
    if need_weights:
        assert w.shape == (N, H, L, L)
        torch.testing.assert_close(w.sum(-1), torch.ones(N, H, L))
    else:
        assert w is None


def test_gqa_shares_each_kv_head_with_a_group_of_query_heads():
    """G = 2 equals an ordinary H-head layer whose key/value heads are copied per group."""
    G = 2
    gqa = layer(G)
    mha = layer(H)
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            w = (
                getattr(gqa, name).weight.view(G, D, E).repeat_interleave(H // G, dim=0)
            )  # (H, D, E)
            b = getattr(gqa, name).bias.view(G, D).repeat_interleave(H // G, dim=0)
            getattr(mha, name).weight.copy_(w.reshape(H * D, E))
            getattr(mha, name).bias.copy_(b.reshape(H * D))
    x = torch.randn(N, L, E)
    out_gqa, w_gqa = gqa(x)
    out_mha, w_mha = mha(x)
    torch.testing.assert_close(out_gqa, out_mha)
    torch.testing.assert_close(w_gqa, w_mha)


def test_gqa_parameter_counts():
    assert layer(H).k_proj.weight.shape == (E, E)
    assert layer(2).k_proj.weight.shape == (2 * D, E)
    assert layer(1).v_proj.weight.shape == (D, E)  # multi-query: one key/value head
    assert "num_kv_heads=2" in repr(layer(2)) and "num_kv_heads" not in repr(layer(H))


@pytest.mark.parametrize(
    "G,match", [(4, "num_heads % num_kv_heads = 2"), (5, "num_kv_heads=5"), (0, "positive")]
)
def test_gqa_bad_group_count(G, match):
    with pytest.raises(ValueError, match=rf"num_kv_heads .*{match}"):
        MultiHeadAttention(E, H, num_kv_heads=G)


@pytest.mark.parametrize(
    "convert,target",
    [
        (to_torch, "torch.nn.MultiheadAttention"),
        (naive_from_fused, "NaiveMultiHeadAttention"),
        (to_keras, "keras"),
    ],
)
def test_converters_refuse_gqa(convert, target):
    with pytest.raises(
        ValueError,
        match=rf"num_kv_heads == num_heads for {target}.*got num_kv_heads=2, num_heads=6",
    ):
        convert(layer(2))


# ---- KV cache ----------------------------------------------------------------------------------


@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("need_weights", [True, False])
def test_step_by_step_decoding_equals_full_causal_attention(G, need_weights):
    m = layer(G)
    x = torch.randn(N, L, E)
    cache = KVCache()
    steps = [m(x[:, t : t + 1], cache=cache, need_weights=need_weights)[0] for t in range(L)]
    decoded = torch.cat(steps, dim=1)  # (N, L, E)
    torch.testing.assert_close(decoded, by_torch(m, x, is_causal=True))
    torch.testing.assert_close(decoded, m(x, mask=causal_mask(L))[0])
    assert cache.length == L and cache.key.shape == (N, G, L, D)
    assert cache.nbytes == 2 * N * G * L * D * 4  # 2 (K and V) * N * G * S * D * bytes


def test_prefill_then_steps_and_weights():
    m = layer(3)
    x = torch.randn(L, E)  # unbatched
    cache = KVCache()
    first, w_first = m(x[:4], cache=cache)  # prefill 4 tokens at once
    rest = [m(x[t : t + 1], cache=cache) for t in range(4, L)]
    decoded = torch.cat([first] + [o for o, _ in rest])  # (L, E)
    torch.testing.assert_close(decoded, by_torch(m, x[None], is_causal=True)[0])
    assert w_first.shape == (H, 4, 4) and (w_first.triu(1) == 0).all()
    assert rest[-1][1].shape == (H, 1, L)  # the last step attends to all 7 positions


@pytest.mark.parametrize("window", [1, 2, 3, 10])
@pytest.mark.parametrize("chunks", [[1] * L, [3, 1, 1, 2], [7]])
def test_rolling_cache_equals_sliding_window_attention(window, chunks):
    m = layer(2)
    x = torch.randn(N, L, E)
    cache = KVCache(window=window)
    outs, start = [], 0
    for size in chunks:
        outs.append(m(x[:, start : start + size], cache=cache)[0])
        start += size
        assert cache.key.shape[2] == min(window, start)  # fixed memory: at most `window`
        held = cache.key.untyped_storage().nbytes() + cache.value.untyped_storage().nbytes()
        assert held == cache.nbytes  # no hidden storage behind a view
    expected = by_torch(m, x, mask=sliding_window_mask(L, window))
    torch.testing.assert_close(torch.cat(outs, dim=1), expected)


def test_float64_cache():
    m = layer(1, dtype=torch.float64)
    x = torch.randn(1, L, E, dtype=torch.float64)
    cache = KVCache()
    decoded = torch.cat([m(x[:, t : t + 1], cache=cache)[0] for t in range(L)], dim=1)
    torch.testing.assert_close(decoded, by_torch(m, x, is_causal=True))
    assert cache.key.dtype == torch.float64


def test_cache_refuses_key_value_and_mask():
    m, x = layer(2), torch.randn(N, 1, E)
    for kwargs in (dict(key=x), dict(value=x), dict(mask=torch.ones(1, 1, dtype=torch.bool))):
        with pytest.raises(ValueError, match=r"cache must not be combined with key, value or mask"):
            m(x, cache=KVCache(), **kwargs)


def test_cache_of_the_wrong_shape():
    cache = KVCache()
    layer(2)(torch.randn(N, 3, E), cache=cache)
    hint = r": a cache belongs to one layer and one batch; start a new KVCache\(\)"
    with pytest.raises(
        ValueError,
        match=r"cache holds keys of shape \(N=2, G=2, S=3, D=4\); this step needs "
        r"\(N=3, G=2, S, D=4\)" + hint,
    ):
        layer(2)(torch.randn(3, 1, E), cache=cache)  # another batch size
    with pytest.raises(
        ValueError, match=r"cache holds keys of shape .*this step needs \(N=2, G=6, S, D=4\)"
    ):
        layer(H)(torch.randn(N, 1, E), cache=cache)  # a layer with other key/value heads
    with pytest.raises(
        ValueError,
        match=r"key must have shape \(N=2, G=2, L_new, D=4\) to extend this cache; "
        r"got \(3, 2, 1, 4\)",
    ):
        cache.update(torch.randn(3, 2, 1, D), torch.randn(3, 2, 1, D))  # called directly
    with pytest.raises(
        ValueError, match=r"key must be a 4-D tensor \(N, G, L_new, D\); got \(2, 1, 4\)"
    ):
        cache.update(torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    with pytest.raises(TypeError, match=r"key must have the cache's dtype torch.float32"):
        cache.update(
            torch.randn(N, 2, 1, D, dtype=torch.float64),
            torch.randn(N, 2, 1, D, dtype=torch.float64),
        )
    with pytest.raises(ValueError, match=r"key and value must have the same \(N, G, L_new\)"):
        KVCache().update(torch.randn(N, 2, 1, D), torch.randn(N, 2, 2, D))


@pytest.mark.parametrize("window", [0, -1, 2.5, True])
def test_bad_window(window):
    error = ValueError if type(window) is int else TypeError  # a wrong value, or a wrong type
    got = f"{window!r}" if error is ValueError else f"{type(window).__name__} {window!r}"
    with pytest.raises(error, match=rf"window must be a positive integer; got {got}$"):
        KVCache(window=window)
    with pytest.raises(error, match=rf"window must be a positive integer; got {got}$"):
        sliding_window_mask(4, window)


# ---- sliding_window_mask ---------------------------------------------------------------------


def test_sliding_window_mask_literal_and_limits():
    expected = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    ).bool()
    assert torch.equal(sliding_window_mask(5, 3), expected)
    assert torch.equal(sliding_window_mask(5, 5), causal_mask(5))
    assert torch.equal(sliding_window_mask(5, 1), torch.eye(5).bool())
    assert torch.equal(sliding_window_mask(3, 2, S=5), sliding_window_mask(5, 2)[:3])
    for i in range(5):
        for j in range(5):
            assert sliding_window_mask(5, 2)[i, j].item() == (i - 2 < j <= i)
