"""The cache classes of attnlib.decoding and the position-scheme objects of attnlib.positions.

Oracles: full attention over the whole sequence with the mask each cache stands for (causal,
sliding window, sinks and window) and PyTorch's ``F.scaled_dot_product_attention``; the plain
``KVCache``. Sizes all differ (E=24, H=6, D=4, G in 1, 2, 6, L=11, N=2).
"""

import pytest
import torch
import torch.nn.functional as F
from attnlib import LanguageModel, ModelCache, MultiHeadAttention, causal_mask
from attnlib.decoding import (
    Cache,
    KVCache,
    PreallocatedCache,
    RollingCache,
    SinkCache,
    sliding_window_mask,
)
from attnlib.positions import ALiBi, Rotary, alibi_bias, rotary_embedding

E, H, D, L, N = 24, 6, 4, 11, 2
CHUNKS = [[1] * L, [3, 1, 1, 4, 2], [L], [5, 0, 6]]  # a prefill, steps, an empty step


def layer(G=2, positions=None, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    m = MultiHeadAttention(E, H, bias=True, num_kv_heads=G, positions=positions)
    m = m.to(dtype).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.4)  # random biases too
    return m


def decode(m, x, cache, chunks):
    """Feed ``x`` through ``m`` chunk by chunk with ``cache``; the outputs, concatenated."""
    outs, start = [], 0
    for size in chunks:
        outs.append(m(x[:, start : start + size], cache=cache)[0])
        start += size
    return torch.cat(outs, dim=1)


def sink_mask(L, window, sinks):
    """Query i sees key j if j <= i and (j > i - window or j < sinks)."""
    i, j = torch.arange(L).unsqueeze(1), torch.arange(L).unsqueeze(0)
    return (j <= i) & ((j > i - window) | (j < sinks))


# ---- every cache equals the full computation it stands for -----------------------------------


@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("chunks", CHUNKS)
def test_preallocated_cache_equals_kv_cache_and_full_attention(G, chunks):
    m, x = layer(G), torch.randn(N, L, E)
    cache = PreallocatedCache(L + 3)
    got = decode(m, x, cache, chunks)
    torch.testing.assert_close(got, m(x, mask=causal_mask(L))[0])
    torch.testing.assert_close(got, decode(m, x, KVCache(), chunks))
    assert cache.length == L and cache.key.shape == (N, G, L, D)
    assert cache.nbytes == 2 * N * G * (L + 3) * D * 4  # the whole buffer, written or not
    assert cache.used_nbytes == 2 * N * G * L * D * 4


def test_preallocated_cache_writes_in_place():
    """No step copies the cache: the buffer is the same memory from the first step on."""
    m, x = layer(), torch.randn(N, L, E)
    cache = PreallocatedCache(L)
    m(x[:, :1], cache=cache)
    address = cache.key.data_ptr(), cache.value.data_ptr()
    for t in range(1, L):
        m(x[:, t : t + 1], cache=cache)
        assert (cache.key.data_ptr(), cache.value.data_ptr()) == address
    assert cache.key.untyped_storage().nbytes() * 2 == cache.nbytes


def test_preallocated_cache_refuses_to_overflow():
    m, x = layer(), torch.randn(N, L, E)
    cache = PreallocatedCache(4)
    m(x[:, :3], cache=cache)
    with pytest.raises(
        ValueError,
        match=r"this PreallocatedCache\(max_len=4\) is full: it holds 3 positions and the step "
        r"adds 2; make it with a larger max_len",
    ):
        m(x[:, 3:5], cache=cache)
    assert cache.length == 3  # nothing written half-way
    m(x[:, 3:4], cache=cache)  # exactly full is fine
    assert cache.length == 4


@pytest.mark.parametrize("window", [1, 2, 3, 10, 20])
@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("positions", [None, "rope", "alibi"])
def test_rolling_cache_equals_sliding_window_attention(window, chunks, positions):
    m, x = layer(2, positions), torch.randn(N, L, E)
    cache = RollingCache(window)
    got = decode(m, x, cache, chunks)
    torch.testing.assert_close(got, m(x, mask=sliding_window_mask(L, window))[0])
    torch.testing.assert_close(got, decode(m, x, KVCache(window=window), chunks))
    assert cache.key.shape == (N, 2, min(window, L), D)
    assert cache.nbytes == 2 * N * 2 * window * D * 4  # fixed memory: the ring


def test_rolling_cache_steps_do_not_copy_and_know_their_positions():
    m, x = layer(), torch.randn(N, L, E)
    cache = RollingCache(4)
    m(x[:, :1], cache=cache)
    address = cache.key.data_ptr()
    for t in range(1, L):
        m(x[:, t : t + 1], cache=cache)
        assert cache.key.data_ptr() == address
        # slot s holds the latest position p <= t with p % 4 == s
        expected = [max(p for p in range(t + 1) if p % 4 == s) for s in range(min(t + 1, 4))]
        assert cache.positions.tolist() == expected
    assert cache.mask(1).all()  # the newest query sees every slot of a full ring


@pytest.mark.parametrize("window,sinks", [(3, 1), (2, 4), (4, 0), (20, 2), (1, 1)])
@pytest.mark.parametrize("chunks", CHUNKS)
def test_sink_cache_equals_attention_with_sinks_and_a_window(window, sinks, chunks):
    m, x = layer(2), torch.randn(N, L, E)  # no positions: the renumbering changes nothing
    cache = SinkCache(window, sinks=sinks)
    got = decode(m, x, cache, chunks)
    torch.testing.assert_close(got, m(x, mask=sink_mask(L, window, sinks))[0])
    kept = [j for j in range(L) if j < sinks or j > L - 1 - window]
    assert cache.key.shape == (N, 2, len(kept), D)
    assert cache.nbytes == 2 * cache.key.numel() * 4


@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_sink_cache_renumbers_positions_as_streaming_llm(positions):
    """Keys are numbered by their place in the cache: with no sink the distances are the true
    ones (a rolling window), and with sinks a sink sits just before the window."""
    m, x = layer(2, positions), torch.randn(N, L, E)
    plain = decode(m, x, SinkCache(3, sinks=0), [1] * L)
    torch.testing.assert_close(plain, decode(m, x, RollingCache(3), [1] * L))
    cache = SinkCache(3, sinks=2)
    decode(m, x, cache, [1] * L)
    q_pos, k_pos = cache.position_ids(1)
    assert cache.positions.tolist() == [0, 1, 8, 9, 10]
    assert k_pos.tolist() == [0, 1, 2, 3, 4] and q_pos.tolist() == [4]


def test_a_cache_holds_keys_and_values_of_different_sizes():
    """Multi-head latent attention caches a RoPE key and a latent vector of other sizes."""
    for cache in (KVCache(), PreallocatedCache(5), RollingCache(2), SinkCache(2, sinks=1)):
        for _ in range(4):
            keys, values = cache.update(torch.randn(1, 1, 1, 3), torch.randn(1, 1, 1, 7))
        assert keys.shape[-1] == 3 and values.shape[-1] == 7
        assert isinstance(cache, Cache) and "length=4" in repr(cache)


@pytest.mark.parametrize("make", [lambda: PreallocatedCache(9), lambda: RollingCache(3)])
def test_new_caches_check_their_steps(make):
    cache = make()
    cache.update(torch.randn(N, 2, 1, D), torch.randn(N, 2, 1, D))
    name = type(cache).__name__
    with pytest.raises(
        ValueError,
        match=rf"key must have shape \(N=2, G=2, L_new, D=4\) to extend this cache; got "
        rf"\(3, 2, 1, 4\) \(a cache belongs to one layer and one batch: start a new {name}",
    ):
        cache.update(torch.randn(3, 2, 1, D), torch.randn(3, 2, 1, D))
    with pytest.raises(TypeError, match=r"value must have the cache's dtype torch.float32"):
        cache.update(torch.randn(N, 2, 1, D), torch.randn(N, 2, 1, D).double())
    assert cache.length == 1


@pytest.mark.parametrize(
    "make,error,match",
    [
        (lambda: PreallocatedCache(0), ValueError, "max_len must be a positive integer; got 0"),
        (
            lambda: PreallocatedCache(2.0),
            TypeError,
            "max_len must be a positive integer; got float 2.0",
        ),
        (lambda: RollingCache(0), ValueError, "window must be a positive integer; got 0"),
        (lambda: SinkCache(0), ValueError, "window must be a positive integer; got 0"),
        (lambda: SinkCache(4, sinks=-1), ValueError, "sinks must be an integer >= 0; got -1"),
        (
            lambda: SinkCache(4, sinks=1.5),
            TypeError,
            "sinks must be an integer >= 0; got float 1.5",
        ),
    ],
)
def test_bad_cache_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ---- position schemes as objects -------------------------------------------------------------


def test_position_objects_equal_their_strings_and_the_functions():
    x = torch.randn(N, L, E)
    for name, scheme in (("rope", Rotary()), ("alibi", ALiBi())):
        by_name, by_object = layer(2, name), layer(2, scheme)
        assert by_name.positions == scheme and by_object.positions is scheme
        torch.testing.assert_close(by_name(x)[0], by_object(x)[0], rtol=0, atol=0)
    assert layer(2, Rotary(500.0)).positions == Rotary(500.0) != Rotary()
    assert repr(layer(2, "rope")).count("positions=Rotary(base=10000)") == 1
    q, k = torch.randn(N, H, L, D), torch.randn(N, 2, L, D)
    q2, k2, bias = Rotary()(q, k, torch.arange(L), torch.arange(L))
    assert (
        bias is None
        and torch.equal(q2, rotary_embedding(q))
        and torch.equal(k2, rotary_embedding(k))
    )
    _, _, bias = ALiBi()(q, k, torch.arange(L), torch.arange(L))
    assert torch.equal(bias[0], alibi_bias(H, L))


def test_a_rope_layer_equals_sdpa_on_rotated_queries_and_keys():
    m, x = layer(2, Rotary(100.0)), torch.randn(N, L, E)
    q = rotary_embedding(m.q_proj(x).view(N, L, H, D).transpose(1, 2), base=100.0)
    k = rotary_embedding(m.k_proj(x).view(N, L, 2, D).transpose(1, 2), base=100.0)
    v = m.v_proj(x).view(N, L, 2, D).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = m.out_proj(heads.transpose(1, 2).reshape(N, L, E))
    torch.testing.assert_close(m(x, mask=causal_mask(L))[0], expected)


@pytest.mark.parametrize("bad", ["absolute", "learned", 3, Rotary])
def test_a_layer_refuses_other_positions(bad):
    with pytest.raises(ValueError, match=r"positions must be None, 'rope', 'alibi', or a position"):
        MultiHeadAttention(E, H, positions=bad)


def test_rope_needs_an_even_head_dim():
    with pytest.raises(ValueError, match=r"needs an even head_dim D .*got D=3"):
        MultiHeadAttention(E, H, head_dim=3, positions=Rotary())


# ---- local and global layers -----------------------------------------------------------------


def lm(window, positions="rope", layers=3, seed=0):
    torch.manual_seed(seed)
    return LanguageModel(50, E, H, layers, max_len=32, positions=positions, window=window).eval()


@pytest.mark.parametrize("positions", ["rope", "learned", None])
def test_local_and_global_layers_equal_layer_by_layer_masks(positions):
    model, ids = lm((2, None, 3), positions), torch.randint(0, 50, (N, L))
    logits, _ = model(ids)
    # the same model computed by hand: each block with its own mask
    x = model.token_embedding(ids)
    if model.position_embedding is not None:
        x = x + model.position_embedding(torch.arange(L))
    masks = [sliding_window_mask(L, 2), causal_mask(L), sliding_window_mask(L, 3)]
    for block, mask in zip(model.blocks, masks):
        x, _ = block(x, mask=mask)
    torch.testing.assert_close(logits, model.lm_head(model.ln_f(x)))
    # and not the same as every layer global
    assert not torch.allclose(logits, lm(None, positions)(ids)[0], atol=1e-3)


@pytest.mark.parametrize("chunks", CHUNKS)
def test_local_and_global_layers_decode_with_any_fitting_caches(chunks):
    model, ids = lm((2, None, 3)), torch.randint(0, 50, (N, L))
    full, _ = model(ids)
    for cache in (
        model.new_cache(),
        ModelCache([RollingCache(2), PreallocatedCache(L), RollingCache(3)]),
        ModelCache([KVCache(window=2), KVCache(), SinkCache(3, sinks=0)]),
    ):
        outs, start = [], 0
        for size in chunks:
            outs.append(model(ids[:, start : start + size], cache=cache)[0])
            start += size
        torch.testing.assert_close(torch.cat(outs, dim=1), full)
    assert model.new_cache().windows == (2, None, 3)
    assert torch.equal(
        model.generate(ids[:, :3], 6, temperature=0),
        lm((2, None, 3)).generate(ids[:, :3], 6, temperature=0, use_cache=False),
    )


def test_cache_bytes_of_local_layers_stop_growing():
    model = lm((4, 4, None), positions="rope")
    cache = ModelCache([RollingCache(4), RollingCache(4), PreallocatedCache(30)])
    ids = torch.randint(0, 50, (1, 30))
    sizes = []
    for t in range(30):
        model(ids[:, t : t + 1], cache=cache)
        sizes.append(sum(c.key.nbytes + c.value.nbytes for c in cache.layers))
    per_position = 2 * 1 * H * D * 4  # K and V of one position in one layer
    assert sizes[-1] == (4 + 4 + 30) * per_position
    assert sizes[9] - sizes[8] == per_position  # past the windows only the global layer grows


def test_model_cache_rules_for_windows():
    model = lm((2, None, 3))
    hint = r": a cache belongs to one model .*model.new_cache\(\)"
    ids = torch.randint(0, 50, (1, 4))
    with pytest.raises(
        ValueError,
        match=r"window=2 \(sliding-window attention\) in every layer; "
        r"got window=None in layer 0" + hint,
    ):
        model(ids, cache=ModelCache(3))
    with pytest.raises(ValueError, match=r"window=None .* got window=5 in layer 1" + hint):
        model(ids, cache=ModelCache([RollingCache(2), RollingCache(5), RollingCache(3)]))
    with pytest.raises(
        ValueError,
        match=r"window=2 .* got a SinkCache with sinks=1 in layer 0: .* use RollingCache\(window\)",
    ):
        model(ids, cache=ModelCache([SinkCache(2, sinks=1), KVCache(), RollingCache(3)]))
    # a SinkCache on a global layer is StreamingLLM's approximation, taken on purpose
    model(ids, cache=ModelCache([RollingCache(2), SinkCache(2, sinks=1), RollingCache(3)]))
    with pytest.raises(ValueError, match=r"window must give one window per layer \(3\)"):
        lm((2, None))
    with pytest.raises(ValueError, match=r"window must be a positive integer; got 0"):
        lm((2, 0, None))
    with pytest.raises(ValueError, match=r"window must be None when layers is a list"):
        ModelCache([KVCache()], window=2)
    with pytest.raises(TypeError, match=r"layers must be a number of layers or a non-empty list"):
        ModelCache([KVCache(), "cache"])


# ---- multi-head latent attention in the model --------------------------------------------------


@pytest.mark.parametrize("positions", ["learned", "rope", None])
def test_a_latent_attention_model_decodes_as_it_runs_in_one_pass(positions):
    """Decoding runs the absorbed form against a cache of latents, one pass the expanded form."""
    torch.manual_seed(0)
    model = LanguageModel(50, E, H, 2, max_len=32, positions=positions, latent_dim=10).eval()
    ids = torch.randint(0, 50, (N, L))
    full, _ = model(ids)
    for cache in (model.new_cache(), ModelCache([PreallocatedCache(L) for _ in range(2)])):
        outs = [model(ids[:, t : t + 1], cache=cache)[0] for t in range(L)]
        torch.testing.assert_close(torch.cat(outs, dim=1), full)
    rope_dim = 2 if positions == "rope" else 0  # D / 2 = 2 with RoPE
    assert model.new_cache().nbytes == 0 and cache.layers[0].key.shape == (N, 1, L, rope_dim)
    assert cache.layers[0].value.shape == (N, 1, L, 10)  # the latents: 10 numbers a token
    assert cache.nbytes == 2 * N * L * (10 + rope_dim) * 4
    prompt = ids[:, :3]
    assert torch.equal(
        model.generate(prompt, 6, temperature=0),
        model.generate(prompt, 6, temperature=0, use_cache=False),
    )


def test_latent_attention_model_errors():
    with pytest.raises(ValueError, match=r"latent_dim must be at most embed_dim=24; got 30"):
        LanguageModel(50, E, H, 2, max_len=8, latent_dim=30)
    with pytest.raises(ValueError, match=r"takes neither num_kv_heads nor ALiBi positions"):
        LanguageModel(50, E, H, 2, max_len=8, positions="alibi", latent_dim=8)
    torch.manual_seed(0)
    model = LanguageModel(50, E, H, 2, max_len=8, latent_dim=8).eval()
    cache = ModelCache(2)
    LanguageModel(50, E, H, 2, max_len=8)(torch.randint(0, 50, (1, 3)), cache=cache)  # MHA's
    with pytest.raises(ValueError, match=r"cache \(layer 0\) holds keys of shape \(N=1, G=6"):
        model(torch.randint(0, 50, (1, 1)), cache=cache)


def test_converters_refuse_a_latent_attention_block():
    from attnlib import TransformerBlock
    from attnlib.convert import block_to_torch

    with pytest.raises(
        ValueError,
        match=r"block must use attnlib.MultiHeadAttention itself .*got block.attn = "
        r"MultiHeadLatentAttention",
    ):
        block_to_torch(TransformerBlock(E, H, latent_dim=8))
