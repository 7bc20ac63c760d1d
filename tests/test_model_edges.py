"""Edges found by probing attention, the block and the language model: the ``meta`` device
(shapes without values), empty decoding steps, ids of every integer dtype, tiny temperatures,
and caches made for another model.

Sizes are all different (E=12, H=3, D=4, L=5, S=7, N=2, V=31, 2 layers).
"""

import math

import pytest
import torch
from attnlib import (
    LanguageModel,
    ModelCache,
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    TransformerBlock,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
)
from attnlib.decoding import KVCache
from attnlib.efficient import tiled_attention

E, H, D, L, S, N, V, LAYERS, MAX_LEN = 12, 3, 4, 5, 7, 2, 31, 2, 16


def lm(seed=0, **kwargs):
    torch.manual_seed(seed)
    return LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN, **kwargs).eval()


def ids(length=L, batch=N, seed=0):
    return torch.randint(0, V, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---- the meta device: shapes without values ----------------------------------------------------


def meta(*shape):
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize("mask", ["bool", "float", "causal"])
def test_masked_functions_on_meta_give_shapes(mask):
    """A masked call used to test the values for inf (Tensor.item() on a meta tensor raised a
    RuntimeError naming no argument); on meta it takes the path that needs no values."""
    q, k, v = meta(N, L, 8), meta(N, S, 8), meta(N, S, 6)
    kwargs = {"is_causal": True}
    if mask != "causal":
        m = causal_mask(L, S, device="meta")
        kwargs = {"mask": m if mask == "bool" else torch.zeros(L, S, device="meta")}
    out, w = scaled_dot_product_attention(q, k, v, **kwargs)
    assert (out.shape, w.shape, out.device.type) == ((N, L, 6), (N, L, S), "meta")
    assert attention_weights(q, k, **kwargs).shape == (N, L, S)
    assert tiled_attention(q, k, v, block_size=3, **kwargs).shape == (N, L, 6)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_masked_modules_on_meta_give_shapes(cls, need_weights):
    with torch.device("meta"):
        m = cls(E, H, bias=True)
        x, kv = torch.empty(N, L, E), torch.empty(N, S, E)
        out, w = m(x, kv, mask=causal_mask(L, S), need_weights=need_weights)
    assert out.shape == (N, L, E) and out.device.type == "meta"
    assert (w is None) != need_weights and (w is None or w.shape == (N, H, L, S))


def test_block_and_model_on_meta_give_shapes():
    with torch.device("meta"):
        block = TransformerBlock(E, H)
        assert block(torch.empty(N, L, E), mask=causal_mask(L))[0].shape == (N, L, E)
        model = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN)
        logits, weights = model(torch.zeros(N, L, dtype=torch.long), need_weights=True)
    assert logits.shape == (N, L, V) and logits.device.type == "meta"
    assert [w.shape for w in weights] == [(N, H, L, L)] * LAYERS


# ---- ids of every integer dtype ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_int64_and_int32_ids_give_the_same_logits(dtype):
    model = lm()
    torch.testing.assert_close(model(ids().to(dtype))[0], model(ids())[0])
    assert torch.equal(
        model.generate(ids().to(dtype), 2, temperature=0)[:, L:].long(),
        model.generate(ids(), 2, temperature=0)[:, L:],
    )


@pytest.mark.parametrize(
    "dtype,hint",
    [
        (torch.uint8, r" \(a uint8 or bool index tensor is a mask in PyTorch, not indices\)"),
        (torch.bool, r" \(a uint8 or bool index tensor is a mask in PyTorch, not indices\)"),
        (torch.int8, ""),
        (torch.int16, ""),
    ],
)
def test_other_integer_ids_are_a_type_error(dtype, hint):
    """uint8 and int8 ids used to reach nn.Embedding, whose RuntimeError names 'indices' and
    'CharTensor'; now a TypeError names ids and the dtypes it takes."""
    model, bad = lm(), ids().to(dtype)
    match = (
        rf"ids must be an integer tensor of token indices, int64 or int32; got dtype {dtype}"
        rf"{hint}: convert with ids.long\(\)"
    )
    with pytest.raises(TypeError, match=match):
        model(bad)
    with pytest.raises(TypeError, match=match):
        model.generate(bad, 2)


# ---- empty steps and empty ids ---------------------------------------------------------------


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("positions", [None, "rope", "alibi"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_an_empty_step_with_a_cache_gives_an_empty_output(cls, positions, need_weights):
    """L_new = 0 with a cache raised 'cannot reshape tensor of 0 elements into shape
    [1, 1, 0, -1]' (and had already touched the cache); now an empty output, as without a
    cache, and the cache goes on as if the step had not happened."""
    if cls is NaiveMultiHeadAttention and positions is not None:
        pytest.skip("NaiveMultiHeadAttention has no positions")
    torch.manual_seed(0)
    kwargs = {} if positions is None else {"positions": positions}
    m = cls(E, H, bias=True, **kwargs).eval()
    x = torch.randn(N, L, E)
    cache, reference = KVCache(), KVCache()
    out, w = m(x[:, :0], cache=cache, need_weights=need_weights)  # a first, empty step
    assert out.shape == (N, 0, E) and (w is None or w.shape == (N, H, 0, 0))
    m(x[:, :3], cache=cache)
    out, w = m(x[:, :0], cache=cache, need_weights=need_weights)  # an empty step later on
    assert out.shape == (N, 0, E) and (w is None or w.shape == (N, H, 0, 3))
    assert cache.length == 3
    m(x[:, :3], cache=reference)
    torch.testing.assert_close(m(x[:, 3:], cache=cache)[0], m(x[:, 3:], cache=reference)[0])


@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("batched", [True, False])
def test_empty_ids_give_empty_logits(window, batched):
    """ids of shape (N, 0) raised 'L must be a positive integer; got 0' (from the causal mask
    the model builds, naming no argument of the call); now empty logits and weights, with or
    without a cache (an empty step leaves the cache as it was)."""
    model = lm(window=window)
    empty = ids(0) if batched else ids(0)[0]
    batch = (N,) if batched else ()
    logits, weights = model(empty, need_weights=True)
    assert logits.shape == (*batch, 0, V)
    assert [w.shape for w in weights] == [(*batch, H, 0, 0)] * LAYERS
    cache = model.new_cache()
    assert model(empty, cache=cache)[0].shape == (*batch, 0, V)
    prompt = ids() if batched else ids()[0]
    model(prompt, cache=cache)
    logits, weights = model(empty, cache=cache, need_weights=True)
    kept = L if window is None else window  # the keys the cache keeps
    assert logits.shape == (*batch, 0, V) and weights[0].shape == (*batch, H, 0, kept)
    assert cache.length == L
    nxt = prompt[..., :1]
    full = model(torch.cat([prompt, nxt], dim=-1))[0][..., -1:, :]
    torch.testing.assert_close(model(nxt, cache=cache)[0], full, atol=1e-5, rtol=1e-5)


def test_generate_refuses_an_empty_prompt_but_takes_an_empty_batch():
    model = lm()
    with pytest.raises(ValueError, match="ids must hold at least one token to continue"):
        model.generate(ids(0), 2)
    assert model.generate(ids(L, batch=0), 2).shape == (0, L + 2)


# ---- tiny temperatures -------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1e-38, 1e-300, 5e-324])
@pytest.mark.parametrize("use_cache", [True, False])
def test_a_tiny_temperature_samples_the_greedy_tokens(temperature, use_cache):
    """logits / 1e-38 overflowed float32 to inf, and softmax(inf) is NaN: torch.multinomial
    raised 'probability tensor contains either inf, nan or element < 0' (or, below float32's
    range, for any logits). Now any positive temperature samples, and a tiny one gives the
    greedy tokens."""
    model = lm()
    with torch.no_grad():  # large logits, as a trained model's: 10 / 1e-38 > 3.4e38
        model.token_embedding.weight.mul_(40)
    assert model(ids())[0].abs().amax() > 10
    g = torch.Generator().manual_seed(0)
    sampled = model.generate(ids(), 6, temperature=temperature, generator=g, use_cache=use_cache)
    assert torch.equal(sampled, model.generate(ids(), 6, temperature=0))


def test_an_ordinary_temperature_draws_as_before():
    """Where logits / temperature is finite the probabilities are computed as they were, so
    that a seeded sample is the same token for token."""
    model = lm()
    g = torch.Generator().manual_seed(3)
    out = model.generate(ids(), 8, temperature=0.8, top_k=7, generator=g)
    g = torch.Generator().manual_seed(3)
    expected = ids()
    with torch.no_grad():
        for _ in range(8):
            last = model(expected)[0][:, -1] / 0.8
            kth = last.topk(7, dim=-1).values[:, -1:]
            last = last.masked_fill(last < kth, -math.inf)
            token = torch.multinomial(torch.softmax(last.double(), dim=-1), 1, generator=g)
            expected = torch.cat([expected, token], dim=1)
    assert torch.equal(out, expected)


# ---- a cache made for another model ------------------------------------------------------------


def test_a_cache_without_the_models_window_is_refused():
    """ModelCache(2) given to a model with window=2 kept every position, and the model attended
    to all of them: logits off by ~0.02, silently. Now a ValueError naming cache and window."""
    model, other = lm(window=2), lm(window=3)
    match = (
        r"cache must keep the model's window=2 \(sliding-window attention\) in every layer; got "
        r"window={} in layer 0: a cache belongs to one model .*model.new_cache\(\)"
    )
    for cache, got in [(ModelCache(LAYERS), None), (other.new_cache(), 3)]:
        with pytest.raises(ValueError, match=match.format(got)):
            model(ids(), cache=cache)
        with pytest.raises(ValueError, match=match.format(got)):
            model(ids(), cache=cache)
    with pytest.raises(ValueError, match=r"cache must keep the model's window=None .*got window=2"):
        lm()(ids(), cache=ModelCache(LAYERS, window=2))
    assert model.new_cache().window == 2


def test_a_filled_cache_of_another_model_or_batch_is_refused():
    """A cache filled by a model with other heads or head size, or by another batch, raised
    'key must have shape ...' (an argument the call does not have) from inside a layer; now
    a ValueError naming cache, what it holds and what the step needs."""
    torch.manual_seed(0)
    small = LanguageModel(V, E, 2, LAYERS, max_len=MAX_LEN).eval()  # H=2, D=6
    model, cache = lm(), small.new_cache()
    small(ids(), cache=cache)
    with pytest.raises(
        ValueError,
        match=r"cache \(layer 0\) holds keys of shape \(N=2, G=2, S=5, D=6\); this step needs "
        r"\(N=2, G=3, S, D=4\): a cache belongs to one layer and one batch",
    ):
        model(ids(1), cache=cache)
    assert cache.length == L  # the refused step changed nothing
    cache = model.new_cache()
    model(ids(), cache=cache)
    with pytest.raises(ValueError, match=r"holds keys of shape \(N=2, .*needs \(N=1, G=3"):
        model(ids(1, batch=1), cache=cache)
    with pytest.raises(TypeError, match=r"cache \(layer 0\) holds keys of dtype torch.float32; "):
        model.double()(ids(1), cache=cache)


def test_a_cache_whose_layers_saw_other_tokens_is_refused():
    model, cache = lm(), lm().new_cache()
    cache.layers[0].length = 3  # as if layer 0 alone had been run
    with pytest.raises(
        ValueError,
        match=r"cache must have seen the same tokens in every layer; "
        r"got lengths \[3, 0\]",
    ):
        model(ids(), cache=cache)


def test_layers_refuse_a_kv_cache_of_another_layer():
    """The block and both multi-head classes name cache (not key) when a filled KVCache holds
    keys of other heads or another batch."""
    torch.manual_seed(0)
    x = torch.randn(N, L, E)
    for layer in (
        MultiHeadAttention(E, H, num_kv_heads=1),
        NaiveMultiHeadAttention(E, H),
        TransformerBlock(E, H),
    ):
        cache = KVCache()
        MultiHeadAttention(E, 2)(x, cache=cache)  # G=2, D=6
        with pytest.raises(
            ValueError,
            match=r"cache holds keys of shape \(N=2, G=2, S=5, D=6\); this step needs \(N=2, "
            r"G=\d, S, D=4\): a cache belongs to one layer and one batch; start a new KVCache",
        ):
            layer(x, cache=cache)
