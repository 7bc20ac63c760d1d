"""attnlib.latent: multi-head latent attention (DeepSeek-V2) and the bytes a cache holds per
token.

Oracles: the paper's formula written out head by head with explicit slices and
``rotary_embedding`` (``by_hand``); the two forms of the layer (expanded and absorbed) against
each other; ``attnlib.MultiHeadAttention`` for a full-rank latent and for ``W_K = W_DKV W_UK``;
the full causal forward for step-by-step decoding; hand-computed byte counts and DeepSeek-V3's
published sizes. Sizes all differ (E=24, H=3, D=5, d_c=7, d_R=4, d_cq=6, N=2, L=6) so that an
axis mix-up cannot pass.
"""

import inspect
import math

import pytest
import torch
from attnlib import MultiHeadAttention, causal_mask
from attnlib.decoding import KVCache, PreallocatedCache, RollingCache, sliding_window_mask
from attnlib.latent import MultiHeadLatentAttention, kv_bytes_per_token
from attnlib.positions import rotary_embedding
from hypothesis import given
from hypothesis import strategies as st

E, H, D, C, R, CQ, N, L = 24, 3, 5, 7, 4, 6, 2, 6


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread for these tiny tensors (as tests/test_transformer.py): on a loaded
    2-core machine two OpenMP threads wait on each other and the file runs 4 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def layer(
    *,
    rope_dim=R,
    latent_dim=C,
    q_latent_dim=None,
    bias=True,
    dtype=torch.float32,
    seed=0,
    embed_dim=E,
    num_heads=H,
    head_dim=D,
    **kwargs,
):
    """An MLA layer in eval mode whose weights and biases are all random (scale 0.4)."""
    torch.manual_seed(seed)
    m = MultiHeadLatentAttention(
        embed_dim,
        num_heads,
        latent_dim=latent_dim,
        head_dim=head_dim,
        rope_dim=rope_dim,
        q_latent_dim=q_latent_dim,
        bias=bias,
        **kwargs,
    )
    m = m.to(dtype).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.4)
    return m


def inputs(dtype=torch.float32, seed=1, shape=(N, L, E)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def by_hand(m, x, mask=None):
    """The paper's formula head by head: ``(q^C_h . k^C_h + q^R_h . k^R) / sqrt(D + d_R)``,
    keys and values expanded from the latent, RoPE at positions 0 .. L-1. ``mask``: ``(L, L)``,
    boolean (True = may attend) or float (added)."""
    D_, R_ = m.head_dim, m.rope_dim
    positions = torch.arange(x.shape[1])
    latent = m.kv_down(x)  # (N, L, d_c)
    keys, values = m.k_up(latent), m.v_up(latent)  # (N, L, H*D) each
    source = x if m.q_latent_dim is None else m.q_down(x)
    queries = (m.q_proj if m.q_latent_dim is None else m.q_up)(source)  # (N, L, H*D)
    if R_:
        q_rope = rotary_embedding(  # (N, H, L, d_R), every head rotated alike
            m.q_rope(source).unflatten(-1, (m.num_heads, R_)).transpose(1, 2),
            positions,
            base=m.rope.base,
        )
        k_rope = rotary_embedding(m.k_rope(x), positions, base=m.rope.base)  # (N, L, d_R)
    heads, weights = [], []
    for h in range(m.num_heads):
        cols = slice(h * D_, (h + 1) * D_)
        scores = queries[..., cols] @ keys[..., cols].transpose(-2, -1)  # (N, L, L)
        if R_:
            scores = scores + q_rope[:, h] @ k_rope.transpose(-2, -1)
        scores = scores / math.sqrt(D_ + R_)
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, -math.inf)
        elif mask is not None:
            scores = scores + mask  # a float mask is added
        w = torch.softmax(scores, dim=-1)
        heads.append(w @ values[..., cols])
        weights.append(w)
    return m.out_proj(torch.cat(heads, dim=-1)), torch.stack(weights, dim=1)


def some_mask(form, dtype=torch.float32):
    """A causal mask with a few more keys blocked (every row keeps its diagonal), boolean or
    as a float mask with a bias on the allowed keys."""
    allowed = causal_mask(L) & (torch.rand(L, L, generator=torch.Generator().manual_seed(2)) > 0.3)
    allowed |= torch.eye(L, dtype=torch.bool)
    if form == "bool":
        return allowed
    bias = torch.randn(L, L, generator=torch.Generator().manual_seed(3), dtype=dtype)
    return bias.masked_fill(~allowed, -math.inf)


# ---- the two forms and the formula ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rope_dim", [0, R])
@pytest.mark.parametrize("form", [None, "bool", "float"])
def test_absorbed_equals_expanded_equals_the_formula(dtype, rope_dim, form):
    m = layer(rope_dim=rope_dim, dtype=dtype)
    x = inputs(dtype)
    mask = None if form is None else some_mask(form, dtype)
    expected, expected_w = by_hand(m, x, mask)
    expanded, w_expanded = m(x, mask=mask)
    absorbed, w_absorbed = m(x, mask=mask, absorb=True)
    assert expanded.shape == (N, L, E) and expanded.dtype == dtype
    assert w_expanded.shape == (N, H, L, L)
    torch.testing.assert_close(absorbed, expanded)
    torch.testing.assert_close(expanded, expected)
    torch.testing.assert_close(absorbed, expected)
    torch.testing.assert_close(w_absorbed, w_expanded)
    torch.testing.assert_close(w_expanded, expected_w)
    for absorb in (False, True):  # F.scaled_dot_product_attention's path, no weights
        fast, none = m(x, mask=mask, need_weights=False, absorb=absorb)
        assert none is None
        torch.testing.assert_close(fast, expected)


@pytest.mark.parametrize("absorb", [False, True])
def test_query_latent_equals_the_formula(absorb):
    """q_latent_dim: queries from c^Q = x W_DQ, both the plain and the RoPE part."""
    m = layer(q_latent_dim=CQ)
    assert m.q_proj is None and m.q_down.out_features == CQ and m.q_rope.in_features == CQ
    x, mask = inputs(), some_mask("bool")
    out, w = m(x, mask=mask, absorb=absorb)
    expected, expected_w = by_hand(m, x, mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)


def test_absorbed_form_never_expands_keys_or_values(monkeypatch):
    """absorb=True reads k_up's and v_up's weights but never calls them on the latents."""
    m = layer()
    x = inputs()
    expected, _ = m(x, mask=causal_mask(L))

    def refuse(*args, **kwargs):
        raise AssertionError("K or V expanded")

    monkeypatch.setattr(m.k_up, "forward", refuse)
    monkeypatch.setattr(m.v_up, "forward", refuse)
    out, _ = m(x, mask=causal_mask(L), absorb=True)
    torch.testing.assert_close(out, expected)
    with pytest.raises(AssertionError, match="expanded"):
        m(x, mask=causal_mask(L))


def test_k_up_bias_cancels_in_the_softmax():
    """k_up's bias adds q . b_K,h to every score of a query: the output does not change."""
    m = layer()
    x = inputs()
    out, w = m(x, mask=causal_mask(L))
    with torch.no_grad():
        m.k_up.bias.mul_(5.0)
    out2, w2 = m(x, mask=causal_mask(L))
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(w2, w)


@pytest.mark.parametrize("need_weights", [True, False])
def test_query_with_nothing_to_attend_gets_a_zero_head_in_both_forms(need_weights):
    """A row of weights that sums to 0 must not pick up v_up's bias in the absorbed form
    (the column of ones averages to 0 there): both forms give out_proj(0) = out_proj.bias."""
    m = layer()
    x = inputs()
    mask = causal_mask(L).clone()
    mask[2] = False  # query 2 sees nothing
    expanded, _ = m(x, mask=mask, need_weights=need_weights)
    absorbed, _ = m(x, mask=mask, need_weights=need_weights, absorb=True)
    torch.testing.assert_close(absorbed, expanded)
    torch.testing.assert_close(expanded[:, 2], m.out_proj.bias.expand(N, E))
    assert not torch.allclose(m.v_up.bias, torch.zeros(H * D))  # the bias could have leaked


def test_both_forms_agree_with_dropout():
    """In training mode the dropped weights no longer sum to 1; with the same random state both
    forms drop the same weights and still agree (v_up's bias is scaled by the sum)."""
    m = layer(dropout=0.3).train()
    x = inputs()
    torch.manual_seed(5)
    expanded, w_expanded = m(x, mask=causal_mask(L))
    torch.manual_seed(5)
    absorbed, w_absorbed = m(x, mask=causal_mask(L), absorb=True)
    assert not torch.allclose(w_expanded.sum(-1), torch.ones(N, H, L))
    torch.testing.assert_close(w_absorbed, w_expanded)
    torch.testing.assert_close(absorbed, expanded)


def test_unbatched_input_is_one_sequence():
    m = layer()
    x = inputs()
    for absorb in (False, True):
        out, w = m(x[1], mask=causal_mask(L), absorb=absorb)
        full, w_full = m(x, mask=causal_mask(L), absorb=absorb)
        assert out.shape == (L, E) and w.shape == (H, L, L)
        torch.testing.assert_close(out, full[1])
        torch.testing.assert_close(w, w_full[1])


@pytest.mark.parametrize("absorb", [False, True])
def test_empty_batch_sequence_and_step(absorb):
    m = layer()
    out, w = m(inputs(shape=(0, L, E)), absorb=absorb)
    assert out.shape == (0, L, E) and w.shape == (0, H, L, L)
    out, w = m(inputs(shape=(N, 0, E)), absorb=absorb)
    assert out.shape == (N, 0, E) and w.shape == (N, H, 0, 0)
    cache = KVCache()
    m(inputs(), cache=cache, absorb=absorb)
    out, w = m(inputs(shape=(N, 0, E)), cache=cache, absorb=absorb)  # an empty step
    assert out.shape == (N, 0, E) and w.shape == (N, H, 0, L)
    assert cache.length == L and tuple(cache.value.shape) == (N, 1, L, C)


def test_key_and_value_may_be_query_itself():
    m = layer()
    x = inputs()
    out, _ = m(x)
    torch.testing.assert_close(m(x, x, x)[0], out)
    torch.testing.assert_close(m(x, key=x)[0], out)


def test_forward_signature_is_multihead_attentions_plus_absorb():
    params = list(inspect.signature(MultiHeadLatentAttention.forward).parameters.values())[1:]
    assert [p.name for p in params] == [
        "query",
        "key",
        "value",
        "mask",
        "need_weights",
        "cache",
        "absorb",
    ]
    assert [p.default for p in params[1:]] == [None, None, None, True, None, False]
    assert {p.kind for p in params[3:]} == {inspect.Parameter.KEYWORD_ONLY}


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 3),  # H
    st.integers(1, 4),  # D
    st.integers(0, 2),  # d_R / 2
    st.integers(1, 8),  # L
    st.booleans(),  # bias
    st.data(),
)
def test_property_absorbed_equals_expanded(seed, heads, head_dim, half_rope, length, bias, data):
    embed = data.draw(st.integers(2, 10), label="E")
    latent = data.draw(st.integers(1, embed), label="d_c")
    m = layer(
        rope_dim=2 * half_rope,
        latent_dim=latent,
        bias=bias,
        dtype=torch.float64,
        seed=seed % 1000,
        embed_dim=embed,
        num_heads=heads,
        head_dim=head_dim,
    )
    x = inputs(torch.float64, seed=seed, shape=(2, length, embed))
    mask = causal_mask(length)
    expanded, w_expanded = m(x, mask=mask)
    absorbed, w_absorbed = m(x, mask=mask, absorb=True)
    torch.testing.assert_close(absorbed, expanded)
    torch.testing.assert_close(w_absorbed, w_expanded)
    torch.testing.assert_close(expanded, by_hand(m, x, mask)[0])


# ---- MLA and MHA ------------------------------------------------------------------------------


def copy_linear(dst, weight, bias):
    with torch.no_grad():
        dst.weight.copy_(weight)
        if dst.bias is not None:
            dst.bias.copy_(bias if bias is not None else torch.zeros_like(dst.bias))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_full_rank_latent_with_identity_down_projection_is_mha(bias, absorb, need_weights):
    """latent_dim = E, W_DKV = I (bias 0), rope_dim = 0: MLA is MHA with W_K = W_UK,
    W_V = W_UV."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(E, H, head_dim=D, bias=bias).eval()
    if bias:  # nn.Linear starts its biases at small values: make them matter
        with torch.no_grad():
            for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
                p.bias.normal_()
    mla = layer(rope_dim=0, latent_dim=E, bias=bias)
    copy_linear(mla.kv_down, torch.eye(E), None)
    for mla_linear, mha_linear in (
        (mla.k_up, mha.k_proj),
        (mla.v_up, mha.v_proj),
        (mla.q_proj, mha.q_proj),
        (mla.out_proj, mha.out_proj),
    ):
        copy_linear(mla_linear, mha_linear.weight, mha_linear.bias)
    x, mask = inputs(), some_mask("bool")
    expected, expected_w = mha(x, mask=mask, need_weights=need_weights)
    out, w = mla(x, mask=mask, need_weights=need_weights, absorb=absorb)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(w, expected_w)
    else:
        assert w is None


@pytest.mark.parametrize("absorb", [False, True])
def test_any_latent_is_an_mha_whose_keys_have_rank_at_most_d_c(absorb):
    """With any W_DKV, MLA (rope_dim = 0) is the MHA with W_K = W_DKV W_UK and
    W_V = W_DKV W_UV (biases carried through); those matrices have rank d_c < H*D, E."""
    mla = layer(rope_dim=0)
    mha = MultiHeadAttention(E, H, head_dim=D, bias=True).eval()
    down_w, down_b = mla.kv_down.weight, mla.kv_down.bias  # (d_c, E), (d_c,)
    for mha_linear, up in ((mha.k_proj, mla.k_up), (mha.v_proj, mla.v_up)):
        # k = (x W_down^T + b_down) W_up^T + b_up = x (W_up W_down)^T + (W_up b_down + b_up)
        copy_linear(mha_linear, up.weight @ down_w, up.weight @ down_b + up.bias)
        assert torch.linalg.matrix_rank(mha_linear.weight).item() == C < min(H * D, E)
    copy_linear(mha.q_proj, mla.q_proj.weight, mla.q_proj.bias)
    copy_linear(mha.out_proj, mla.out_proj.weight, mla.out_proj.bias)
    x, mask = inputs(), some_mask("float")
    expected, expected_w = mha(x, mask=mask)
    out, w = mla(x, mask=mask, absorb=absorb)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)


# ---- decoding with a cache ----------------------------------------------------------------------


def decode(m, x, cache, absorb, prefill=2):
    """A prefill of ``prefill`` tokens, then one token at a time: outputs and weights."""
    outs, weights = [], []
    bounds = [0, prefill, *range(prefill + 1, x.shape[1] + 1)]
    for start, end in zip(bounds, bounds[1:]):
        out, w = m(x[:, start:end], cache=cache, absorb=absorb)
        outs.append(out)
        weights.append(w)
    return torch.cat(outs, dim=1), weights


@pytest.mark.parametrize("make_cache", [KVCache, lambda: PreallocatedCache(L)], ids=["kv", "pre"])
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("rope_dim", [0, R])
def test_cached_steps_equal_the_full_causal_forward(make_cache, absorb, rope_dim):
    m = layer(rope_dim=rope_dim)
    x = inputs()
    full, full_w = m(x, mask=causal_mask(L))  # the expanded form, without a cache
    cache = make_cache()
    steps, step_weights = decode(m, x, cache, absorb)
    torch.testing.assert_close(steps, full)
    torch.testing.assert_close(step_weights[0], full_w[:, :, :2, :2])  # the prefill
    for t, w in zip(range(2, L), step_weights[1:]):
        assert w.shape == (N, H, 1, t + 1)
        torch.testing.assert_close(w[:, :, 0], full_w[:, :, t, : t + 1])
    # the cache holds d_c + d_R numbers per token, as one "head": RoPE keys and latents
    assert cache.length == L
    assert tuple(cache.key.shape) == (N, 1, L, rope_dim)
    assert tuple(cache.value.shape) == (N, 1, L, C)
    assert cache.nbytes == N * L * (C + rope_dim) * 4
    torch.testing.assert_close(cache.value[:, 0], m.kv_down(x))  # the latents themselves
    if rope_dim:
        torch.testing.assert_close(cache.key[:, 0], m.k_rope(x))  # kept unrotated


@pytest.mark.parametrize("absorb", [False, True])
def test_rolling_cache_equals_a_sliding_window(absorb):
    """A ring buffer returns keys in slot order: the rotation must use the cache's positions."""
    m = layer()
    x = inputs()
    expected, _ = m(x, mask=sliding_window_mask(L, 3))
    steps, _ = decode(m, x, RollingCache(3), absorb)
    torch.testing.assert_close(steps, expected)


def test_cache_bytes_match_kv_bytes_per_token():
    """The real caches, per token and sequence in float32, against the function: MLA's latent
    and RoPE key, and the keys and values of the MHA of the same heads."""
    m = layer()
    cache = KVCache()
    m(inputs(), cache=cache)
    mla_bytes = kv_bytes_per_token(
        num_layers=1, num_heads=H, head_dim=D, latent_dim=C, rope_dim=R, bytes_per_number=4
    )
    assert cache.nbytes == N * L * mla_bytes == N * L * (C + R) * 4
    mha, mha_cache = MultiHeadAttention(E, H, head_dim=D).eval(), KVCache()
    mha(inputs(), cache=mha_cache)
    mha_bytes = kv_bytes_per_token(num_layers=1, num_heads=H, head_dim=D, bytes_per_number=4)
    assert mha_cache.nbytes == N * L * mha_bytes == N * L * 2 * H * D * 4


# ---- bytes per token --------------------------------------------------------------------------


def test_kv_bytes_per_token_by_hand():
    sizes = dict(num_layers=2, num_heads=4, head_dim=8)  # bfloat16 by default
    assert kv_bytes_per_token(**sizes) == 2 * 2 * 4 * 8 * 2 == 256  # MHA: 2 L H D b
    assert kv_bytes_per_token(**sizes, num_kv_heads=2) == 2 * 2 * 2 * 8 * 2 == 128  # GQA
    assert kv_bytes_per_token(**sizes, num_kv_heads=1) == 2 * 2 * 1 * 8 * 2 == 64  # MQA
    assert kv_bytes_per_token(**sizes, num_kv_heads=4) == 256  # G = H is MHA
    assert kv_bytes_per_token(**sizes, latent_dim=6, rope_dim=2) == 2 * (6 + 2) * 2 == 32
    assert kv_bytes_per_token(**sizes, latent_dim=6) == 2 * 6 * 2 == 24
    assert kv_bytes_per_token(**sizes, rope_dim=2) == 2 * 4 * ((8 + 2) + 8) * 2 == 288
    assert kv_bytes_per_token(**sizes, bytes_per_number=4) == 512  # float32


def test_kv_bytes_per_token_of_deepseek_v3():
    """DeepSeek-V3's config: 61 layers, 128 heads, qk_nope_head_dim 128, qk_rope_head_dim 64,
    v_head_dim 128, kv_lora_rank 512; BF16."""
    v3 = dict(num_layers=61, num_heads=128, head_dim=128)
    mla = kv_bytes_per_token(**v3, latent_dim=512, rope_dim=64)
    assert mla == 61 * (512 + 64) * 2 == 70_272
    # the same heads cached as MHA: keys of 128 + 64 numbers, values of 128
    expanded = kv_bytes_per_token(**v3, rope_dim=64)
    assert expanded == 61 * 128 * (192 + 128) * 2 == 4_997_120
    assert round(expanded / mla, 1) == 71.1
    # plain MHA of D = 128 (DeepSeek-V2's comparison, 2 n_h d_h l): 57 times MLA
    plain = kv_bytes_per_token(**v3)
    assert plain == 2 * 61 * 128 * 128 * 2 == 3_997_696
    assert round(plain / mla, 1) == 56.9
    # MLA caches as much as GQA with 2.25 groups of D = 128: d_c + d_R = 4.5 D
    assert 4 * mla == 9 * kv_bytes_per_token(**v3, num_kv_heads=1)
    # the latent does not depend on the heads
    assert kv_bytes_per_token(num_layers=61, num_heads=1, head_dim=1, latent_dim=512, rope_dim=64)
    assert mla == kv_bytes_per_token(
        num_layers=61, num_heads=1, head_dim=1, latent_dim=512, rope_dim=64
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(num_layers=0), ValueError, "num_layers must be a positive integer; got 0"),
        (dict(num_heads=2.0), TypeError, "num_heads must be a positive integer; got float 2.0"),
        (dict(head_dim=-1), ValueError, "head_dim must be a positive integer"),
        (dict(num_kv_heads=3), ValueError, "num_kv_heads must divide num_heads"),
        (dict(num_kv_heads=0), ValueError, "num_kv_heads must be a positive integer"),
        (dict(latent_dim=0), ValueError, "latent_dim must be a positive integer"),
        (dict(latent_dim=4, num_kv_heads=2), ValueError, "must not both be given"),
        (dict(rope_dim=-2), ValueError, "rope_dim must be an integer >= 0"),
        (dict(bytes_per_number=True), TypeError, "bytes_per_number must be a positive integer"),
    ],
)
def test_kv_bytes_per_token_bad_arguments(kwargs, error, match):
    sizes = dict(num_layers=2, num_heads=4, head_dim=8) | kwargs
    with pytest.raises(error, match=match):
        kv_bytes_per_token(**sizes)


# ---- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(latent_dim=0), ValueError, "latent_dim must be a positive integer; got 0"),
        (dict(latent_dim=-3), ValueError, "latent_dim must be a positive integer; got -3"),
        (dict(latent_dim=7.0), TypeError, "latent_dim must be a positive integer; got float 7.0"),
        (
            dict(latent_dim=E + 1),
            ValueError,
            r"latent_dim must be at most embed_dim=24; got 25: .* compresses nothing",
        ),
        (dict(q_latent_dim=0), ValueError, "q_latent_dim must be a positive integer"),
        (dict(q_latent_dim=30), ValueError, "q_latent_dim must be at most embed_dim=24; got 30"),
        (dict(rope_dim=3), ValueError, r"rope_dim must be an even integer >= 0 .*got 3"),
        (dict(rope_dim=-2), ValueError, "rope_dim must be an even integer >= 0; got -2"),
        (dict(rope_dim=2.0), TypeError, "rope_dim must be an even integer >= 0; got float"),
        (dict(head_dim=0), ValueError, "head_dim must be a positive integer"),
        (dict(num_heads=5, head_dim=None), ValueError, "embed_dim must be divisible by num_heads"),
        (dict(dropout=1.0), ValueError, r"dropout must be a probability in \[0, 1\)"),
        (dict(rope_base=1.0), ValueError, "base must be a number > 1"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    args = dict(embed_dim=E, num_heads=H, latent_dim=C, head_dim=D, rope_dim=R) | kwargs
    with pytest.raises(error, match=match):
        MultiHeadLatentAttention(args.pop("embed_dim"), args.pop("num_heads"), **args)


def test_latent_as_wide_as_the_input_is_allowed():
    m = MultiHeadLatentAttention(E, H, latent_dim=E, q_latent_dim=E)
    assert m.kv_down.weight.shape == (E, E)


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.randn(E), ValueError, r"query must be 2-D or 3-D; got 1-D"),
        (torch.randn(1, N, L, E), ValueError, r"query must be 2-D or 3-D; got 4-D"),
        (torch.randn(N, L, E + 1), ValueError, r"query must have shape \(N=2, L, E=24\)"),
        (torch.randn(L, 5), ValueError, r"query must have shape \(L, E=24\); got \(6, 5\)"),
        (torch.ones(N, L, E, dtype=torch.long), TypeError, "query must be a floating-point"),
        (torch.randn(N, L, E, dtype=torch.float64), TypeError, "query has dtype torch.float64"),
        ([[1.0] * E], TypeError, "query must be a torch.Tensor; got list"),
    ],
)
def test_bad_query(x, error, match):
    with pytest.raises(error, match=match):
        layer()(x)


def test_bad_key_or_value():
    m, x = layer(), inputs()
    with pytest.raises(ValueError, match=r"key must be None or query itself: .*self-attention"):
        m(x, inputs(seed=7))
    with pytest.raises(ValueError, match=r"value must be None or query itself.*\(2, 6, 24\)"):
        m(x, x, x.clone())


def test_bad_absorb():
    with pytest.raises(TypeError, match="absorb must be a bool; got str 'yes'"):
        layer()(inputs(), absorb="yes")


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        (torch.ones(L, L + 1, dtype=torch.bool), ValueError, r"mask must have shape"),
        (torch.ones(L, L, dtype=torch.long), TypeError, "mask must be boolean"),
        ([[True]], TypeError, "mask must be a torch.Tensor"),
    ],
)
def test_bad_mask(mask, error, match):
    with pytest.raises(error, match=match):
        layer()(inputs(), mask=mask)


def test_cache_with_mask_is_refused():
    with pytest.raises(ValueError, match="cache must not be combined with key, value or mask"):
        layer()(inputs(), mask=causal_mask(L), cache=KVCache())


def test_cache_that_is_not_a_cache_is_refused():
    with pytest.raises(TypeError, match="cache must be an attnlib.decoding.Cache.*got dict"):
        layer()(inputs(), cache={})


def test_cache_of_another_layer_is_refused():
    x = inputs()
    mha_cache = KVCache()
    MultiHeadAttention(E, H, head_dim=D).eval()(x, cache=mha_cache)  # keys (N, H, S, D)
    with pytest.raises(ValueError, match=r"cache holds keys of shape \(N=2, G=3, S=6, D=5\)"):
        layer()(x, cache=mha_cache)
    other = KVCache()
    layer(latent_dim=C + 1)(x, cache=other)  # the same RoPE keys, wider latents
    with pytest.raises(ValueError, match=r"cache holds latents of shape \(2, 1, 6, 8\); .* 7"):
        layer()(x, cache=other)
    batch = KVCache()
    layer()(x[:1], cache=batch)
    with pytest.raises(ValueError, match=r"cache holds keys of shape \(N=1, .*this step needs"):
        layer()(x, cache=batch)
    double = KVCache()
    layer(dtype=torch.float64)(x.double(), cache=double)
    with pytest.raises(TypeError, match="cache holds keys of dtype torch.float64"):
        layer()(x, cache=double)


def test_full_preallocated_cache_is_refused():
    m, cache = layer(), PreallocatedCache(L - 1)
    with pytest.raises(ValueError, match=r"PreallocatedCache\(max_len=5\) is full"):
        m(inputs(), cache=cache)


def test_extra_repr():
    assert layer(rope_dim=0, bias=False).extra_repr() == (
        "embed_dim=24, num_heads=3, latent_dim=7, bias=False, head_dim=5"
    )
    m = MultiHeadLatentAttention(E, H, latent_dim=C, rope_dim=R, q_latent_dim=CQ, dropout=0.1)
    assert m.extra_repr() == (  # head_dim = E / H, the default, is left out
        "embed_dim=24, num_heads=3, latent_dim=7, bias=False, rope_dim=4, q_latent_dim=6, "
        "dropout=0.1"
    )
