"""attnlib.transformer: TransformerBlock, ModelCache and LanguageModel (and the block converters
of attnlib.convert).

Oracles: ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`` with copied weights
for the block (several cases ported from PyTorch's own tests: ``gelu`` given as a string, a
function or a module, ``batch_first``, the fast path under ``no_grad``, masks and key padding);
the block and layer 0 of the model written out by hand; the uncached forward for the cached
one. Sizes are all different (E=12, H=3, D=4, FF=28, L=5, S=7, N=2, V=97, 2 layers).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import LanguageModel, ModelCache, MultiHeadAttention, TransformerBlock, causal_mask
from attnlib.convert import block_from_torch, block_to_torch
from attnlib.decoding import KVCache
from attnlib.positions import alibi_bias, rotary_embedding, sinusoidal_encoding
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

E, H, D, FF, L, S, N, V, LAYERS, MAX_LEN = 12, 3, 4, 28, 5, 7, 2, 97, 2, 16
POSITIONS = ["learned", "sinusoidal", "rope", "alibi", None]
TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-12, "rtol": 1e-10}}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread for these tiny tensors: on a loaded 2-core machine two OpenMP
    threads wait on each other and the file runs 20 times slower (65 s instead of 3 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def randomise(module: nn.Module, seed: int = 0, std: float = 0.3) -> nn.Module:
    """Every parameter a normal draw (biases non-zero, LayerNorm weights not ones)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * std)
    return module


def torch_layer(bias=True, dtype=torch.float32, ff=FF, eps=1e-5, batch_first=True, act="gelu"):
    layer = nn.TransformerEncoderLayer(
        E,
        H,
        ff,
        dropout=0.0,
        activation=act,
        layer_norm_eps=eps,
        batch_first=batch_first,
        norm_first=True,
        bias=bias,
        dtype=dtype,
    )
    return randomise(layer).eval()


def model(positions="learned", seed=0, **kwargs) -> LanguageModel:
    torch.manual_seed(seed)
    lm = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN, positions=positions, **kwargs)
    return randomise(lm, seed, std=0.5).eval()


def prompt(batched=True, length=L, seed=0):
    ids = torch.randint(0, V, (N, length), generator=torch.Generator().manual_seed(seed))
    return ids if batched else ids[0]


MODELS = {p: model(p) for p in POSITIONS}  # built once: shared by the tests that only read them


# ---- the block against nn.TransformerEncoderLayer ---------------------------------------------


def pair(direction, bias, dtype):
    """(our block, PyTorch's layer) with the same weights, copied one way or the other."""
    if direction == "from_torch":
        layer = torch_layer(bias=bias, dtype=dtype)
        return block_from_torch(layer), layer
    block = randomise(TransformerBlock(E, H, mlp_ratio=FF / E, bias=bias).to(dtype)).eval()
    return block, block_to_torch(block)


@pytest.mark.parametrize("direction", ["from_torch", "to_torch"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask", [None, "causal", "causal_float", "key_padding"])
@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no_grad"])
def test_block_equals_transformer_encoder_layer(direction, bias, dtype, mask, grad):
    """no_grad in eval mode lets PyTorch take its fused fast path: both paths must agree."""
    block, layer = pair(direction, bias, dtype)
    assert block.mlp[0].weight.shape == (FF, E) and layer.linear1.weight.shape == (FF, E)
    x = torch.randn(N, L, E, dtype=dtype)
    causal = causal_mask(L)
    pad = torch.ones(N, L, dtype=torch.bool)  # ours: True = a real token
    pad[1, 3:] = False  # right padding: every query still sees key 0
    with torch.set_grad_enabled(grad):
        if mask is None:
            ours, theirs = block(x)[0], layer(x)
        elif mask == "causal":
            ours, theirs = block(x, mask=causal)[0], layer(x, src_mask=~causal)
        elif mask == "causal_float":
            float_mask = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)
            ours = block(x, mask=causal)[0]
            theirs = layer(x, src_mask=float_mask, is_causal=True)
        else:
            ours = block(x, mask=causal & pad[:, None, :])[0]
            theirs = layer(x, src_mask=~causal, src_key_padding_mask=~pad)
    assert ours.dtype == dtype and ours.shape == (N, L, E)
    torch.testing.assert_close(ours, theirs, **TOL[dtype])


@pytest.mark.parametrize("direction", ["from_torch", "to_torch"])
def test_block_equals_layer_unbatched(direction):
    block, layer = pair(direction, True, torch.float32)
    x = torch.randn(L, E)
    out, weights = block(x, mask=causal_mask(L), need_weights=True)
    assert out.shape == (L, E) and weights.shape == (H, L, L)
    torch.testing.assert_close(out, layer(x, src_mask=~causal_mask(L)), **TOL[torch.float32])


@pytest.mark.parametrize("act", ["gelu", F.gelu, nn.GELU()], ids=["str", "function", "module"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_block_from_torch_gelu_forms_and_batch_first(act, batch_first):
    """Ported from PyTorch's test_transformerencoderlayer_gelu: gelu given three ways, both
    layouts; our block is batch-first whatever the layer's layout."""
    layer = torch_layer(batch_first=batch_first, act=act)
    block = block_from_torch(layer)
    x = torch.randn(N, L, E)
    theirs = layer(x if batch_first else x.transpose(0, 1), src_mask=~causal_mask(L))
    theirs = theirs if batch_first else theirs.transpose(0, 1)
    torch.testing.assert_close(block(x, mask=causal_mask(L))[0], theirs, **TOL[torch.float32])


@pytest.mark.parametrize("direction", ["from_torch", "to_torch"])
def test_block_layer_norm_eps_and_odd_feedforward_width(direction):
    """eps = 0.5 changes the output visibly; dim_feedforward = 17 is no multiple of E."""
    if direction == "from_torch":
        layer = torch_layer(ff=17, eps=0.5)
        block = block_from_torch(layer)
    else:
        block = randomise(TransformerBlock(E, H, mlp_ratio=17 / E, norm_eps=0.5)).eval()
        layer = block_to_torch(block)
    assert block.ln1.eps == block.ln2.eps == layer.norm1.eps == layer.norm2.eps == 0.5
    assert block.mlp[0].out_features == layer.linear1.out_features == 17
    x = torch.randn(N, L, E)
    ours = block(x, mask=causal_mask(L))[0]
    torch.testing.assert_close(ours, layer(x, src_mask=~causal_mask(L)), **TOL[torch.float32])
    default_eps = TransformerBlock(E, H, mlp_ratio=17 / E).eval()
    default_eps.load_state_dict(block.state_dict())
    assert not torch.allclose(default_eps(x, mask=causal_mask(L))[0], ours, atol=1e-3)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_round_trips_are_exact(bias, dtype):
    layer = torch_layer(bias=bias, dtype=dtype)
    back = block_to_torch(block_from_torch(layer))
    assert back.state_dict().keys() == layer.state_dict().keys()
    for name, value in layer.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name
    block = randomise(TransformerBlock(E, H, mlp_ratio=FF / E, bias=bias).to(dtype))
    again = block_from_torch(block_to_torch(block))
    for name, value in block.state_dict().items():
        assert torch.equal(again.state_dict()[name], value), name


@pytest.mark.parametrize("training", [True, False])
def test_block_converters_keep_dropout_mode_and_eps(training):
    layer = nn.TransformerEncoderLayer(
        E, H, FF, dropout=0.25, activation="gelu", batch_first=True, norm_first=True
    ).train(training)
    block = block_from_torch(layer)
    assert block.training is training and block.dropout == 0.25 and block.attn.dropout == 0.25
    back = block_to_torch(block)
    assert back.training is training and back.dropout.p == 0.25
    assert back.self_attn.dropout == 0.25 and back.norm_first and back.self_attn.batch_first


def test_block_from_torch_errors():
    with pytest.raises(
        TypeError, match="layer must be a torch.nn.TransformerEncoderLayer; got Linear"
    ):
        block_from_torch(nn.Linear(E, E))
    post_ln = nn.TransformerEncoderLayer(E, H, FF, activation="gelu", norm_first=False)
    with pytest.raises(
        ValueError, match=r"pre-LayerNorm \(norm_first=True\).*got norm_first=False"
    ):
        block_from_torch(post_ln)
    relu = nn.TransformerEncoderLayer(E, H, FF, activation="relu", norm_first=True)
    with pytest.raises(ValueError, match='layer must use activation="gelu"; got <function relu'):
        block_from_torch(relu)
    tanh = nn.TransformerEncoderLayer(
        E, H, FF, activation=nn.GELU(approximate="tanh"), norm_first=True
    )
    with pytest.raises(ValueError, match=r"activation=\"gelu\"; got GELU\(approximate='tanh'\)"):
        block_from_torch(tanh)


def test_block_from_torch_refuses_two_layer_norm_eps():
    """The block has one norm_eps: a layer whose norm2 has another would give other outputs."""
    layer = torch_layer()
    layer.norm2.eps = 1e-3
    with pytest.raises(
        ValueError, match=r"layer must have the same eps in norm1 and norm2 .*norm2.eps=0.001"
    ):
        block_from_torch(layer)


def test_block_to_torch_errors():
    with pytest.raises(TypeError, match="block must be an attnlib.TransformerBlock; got Linear"):
        block_to_torch(nn.Linear(E, E))
    with pytest.raises(TypeError, match="got TransformerEncoderLayer"):
        block_to_torch(torch_layer())
    with pytest.raises(ValueError, match="block must have an MLP.*got an attention-only block"):
        block_to_torch(TransformerBlock(E, H, mlp_ratio=0))
    for positions in ("rope", "alibi"):
        with pytest.raises(
            ValueError, match="must not use positions inside .*got positions=(Rotary|ALiBi)"
        ):
            block_to_torch(TransformerBlock(E, H, positions=positions))
    with pytest.raises(
        ValueError,
        match="block.attn must have num_kv_heads == num_heads for nn.TransformerEncoderLayer.*"
        "got num_kv_heads=1, num_heads=3",
    ):
        block_to_torch(TransformerBlock(E, H, num_kv_heads=1))


# ---- the block on its own ---------------------------------------------------------------------


def test_attention_only_block_is_x_plus_attention():
    block = randomise(TransformerBlock(E, H, mlp_ratio=0, bias=True)).eval()
    assert block.mlp is None and block.ln2 is None
    assert not any(name.startswith(("mlp", "ln2")) for name in block.state_dict())
    x, mask = torch.randn(N, L, E), causal_mask(L)
    expected = x + block.attn(block.ln1(x), mask=mask)[0]
    torch.testing.assert_close(block(x, mask=mask)[0], expected)


@pytest.mark.parametrize("mlp_ratio", [0, 2.5])
def test_block_weights_are_its_attentions_weights(mlp_ratio):
    block = randomise(TransformerBlock(E, H, mlp_ratio=mlp_ratio)).eval()
    x, mask = torch.randn(N, L, E), causal_mask(L)
    out, weights = block(x, mask=mask, need_weights=True)
    assert weights.shape == (N, H, L, L)
    torch.testing.assert_close(weights, block.attn(block.ln1(x), mask=mask)[1])
    out_fast, none = block(x, mask=mask)
    assert none is None
    torch.testing.assert_close(out_fast, out, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("ratio,hidden", [(4.0, 48), (2.5, 30), (FF / E, FF), (1 / 6, 2)])
def test_block_mlp_width_is_ratio_times_embed_dim(ratio, hidden):
    block = TransformerBlock(E, H, mlp_ratio=ratio)
    assert block.mlp_ratio == ratio and block.embed_dim == E and block.num_heads == H
    assert block.mlp[0].weight.shape == (hidden, E) and block.mlp[2].weight.shape == (E, hidden)
    assert isinstance(block.mlp[1], nn.GELU) and block.mlp[1].approximate == "none"


def test_block_equals_a_hand_written_pre_ln_block():
    block = randomise(TransformerBlock(E, H, mlp_ratio=FF / E)).eval()
    ln1, ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
    attn = MultiHeadAttention(E, H, bias=True)
    fc1, fc2 = nn.Linear(E, FF), nn.Linear(FF, E)
    for mine, theirs in [(ln1, block.ln1), (ln2, block.ln2), (attn, block.attn)]:
        mine.load_state_dict(theirs.state_dict())
    fc1.load_state_dict(block.mlp[0].state_dict())
    fc2.load_state_dict(block.mlp[2].state_dict())
    x, mask = torch.randn(N, L, E), causal_mask(L)
    h = x + attn(ln1(x), mask=mask)[0]
    expected = h + fc2(F.gelu(fc1(ln2(h))))
    torch.testing.assert_close(block(x, mask=mask)[0], expected)


def test_block_dropout_only_in_training_mode():
    block = randomise(TransformerBlock(E, H, dropout=0.3)).eval()
    no_dropout = TransformerBlock(E, H).eval()
    no_dropout.load_state_dict(block.state_dict())
    x, mask = torch.randn(N, L, E), causal_mask(L)
    first, second = block(x, mask=mask)[0], block(x, mask=mask)[0]
    assert torch.equal(first, second)
    torch.testing.assert_close(first, no_dropout(x, mask=mask)[0])
    block.train()
    assert not torch.equal(block(x, mask=mask)[0], block(x, mask=mask)[0])


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"mlp_ratio": -1}, ValueError, "mlp_ratio must be a number >= 0; got -1"),
        ({"mlp_ratio": -0.5}, ValueError, "mlp_ratio must be a number >= 0; got -0.5"),
        ({"mlp_ratio": True}, TypeError, "mlp_ratio must be a number >= 0; got bool True"),
        ({"mlp_ratio": math.inf}, ValueError, "mlp_ratio must be finite; got inf"),
        ({"mlp_ratio": 0.04}, ValueError, r"round\(mlp_ratio \* E\) >= 1; got mlp_ratio=0.04"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a probability in \[0, 1\); got 1.0"),
        ({"dropout": -0.1}, ValueError, r"dropout must be a probability in \[0, 1\); got -0.1"),
        ({"num_heads": 5}, ValueError, "embed_dim must be divisible by num_heads"),
        ({"embed_dim": 0}, ValueError, "embed_dim must be a positive integer; got 0"),
        (
            {"positions": "learned"},
            ValueError,
            r"positions must be None, 'rope', 'alibi', or a position",
        ),
        ({"num_kv_heads": 2}, ValueError, "num_kv_heads must divide num_heads"),
    ],
)
def test_block_constructor_errors(kwargs, error, match):
    args = {"embed_dim": E, "num_heads": H, **kwargs}
    with pytest.raises(error, match=match):
        TransformerBlock(args.pop("embed_dim"), args.pop("num_heads"), **args)


def test_block_input_errors_raised_by_the_attention():
    """The block names x; errors of the mask come from the attention."""
    block = TransformerBlock(E, H)
    with pytest.raises(ValueError, match=r"x must be 2-D or 3-D; got 4-D .*\(1, 2, 5, 12\)"):
        block(torch.randn(1, N, L, E))
    with pytest.raises(ValueError, match=r"mask must have shape .*got \(4, 4\)"):
        block(torch.randn(N, L, E), mask=causal_mask(4))
    with pytest.raises(TypeError, match="mask must be boolean .*got dtype torch.int64"):
        block(torch.randn(N, L, E), mask=causal_mask(L).long())


@pytest.mark.parametrize(
    "x,error,match",
    [
        (
            torch.randn(N, L, 10),
            ValueError,
            r"x must have shape \(N=2, L, E=12\); got \(2, 5, 10\)",
        ),
        (torch.randn(10), ValueError, r"x must be 2-D or 3-D; got 1-D"),
        (torch.ones(N, L, E, dtype=torch.long), TypeError, "x must be a floating-point"),
        (torch.randn(N, L, E, dtype=torch.float64), TypeError, "x has dtype torch.float64"),
    ],
    ids=["width-10", "1-D", "int64", "float64-into-float32"],
)
def test_block_checks_x_before_its_layer_norm(x, error, match):
    with pytest.raises(error, match=match):
        TransformerBlock(E, H)(x)


# ---- the language model: causality, cache, generation -----------------------------------------


@pytest.mark.parametrize("positions", POSITIONS)
@settings(max_examples=4, deadline=None)
@given(
    t=st.integers(0, S - 1),
    shift=st.integers(1, V - 1),
    seed=st.integers(0, 2**16),
)
def test_a_token_changes_no_logit_before_it(positions, t, shift, seed):
    lm = MODELS[positions]
    ids = prompt(length=S, seed=seed)
    changed = ids.clone()
    changed[:, t] = (changed[:, t] + shift) % V
    with torch.no_grad():
        before, after = lm(ids)[0], lm(changed)[0]
    assert torch.equal(before[:, :t], after[:, :t])  # exactly: the causal mask blocks it
    assert all((before[n, t:] != after[n, t:]).any() for n in range(N))


@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_forward_equals_uncached(positions):
    lm = MODELS[positions]
    ids = prompt(length=S)
    with torch.no_grad():
        full = lm(ids)[0]  # (N, S, V)
        cache = lm.new_cache()
        assert isinstance(cache, ModelCache) and (cache.length, cache.nbytes) == (0, 0)
        steps = [lm(ids[:, :L], cache=cache)[0]]  # the prompt at once
        sizes = [(cache.length, cache.nbytes)]
        for t in range(L, S):  # then one token at a time
            steps.append(lm(ids[:, t : t + 1], cache=cache)[0])
            sizes.append((cache.length, cache.nbytes))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert sizes == [(s, 2 * LAYERS * N * H * s * D * 4) for s in range(L, S + 1)]
    assert repr(cache) == f"ModelCache(layers=2, length={S}, nbytes={sizes[-1][1]})"


@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_weights_are_rows_of_the_full_weights(positions):
    lm = MODELS[positions]
    ids = prompt(length=S)
    with torch.no_grad():
        full = lm(ids, need_weights=True)[1]  # LAYERS x (N, H, S, S)
        cache = lm.new_cache()
        first = lm(ids[:, :L], cache=cache, need_weights=True)[1]
        for layer in range(LAYERS):
            torch.testing.assert_close(first[layer], full[layer][:, :, :L, :L])
        for t in range(L, S):
            step = lm(ids[:, t : t + 1], cache=cache, need_weights=True)[1]
            for layer in range(LAYERS):
                assert step[layer].shape == (N, H, 1, t + 1)
                torch.testing.assert_close(step[layer][:, :, 0], full[layer][:, :, t, : t + 1])


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 0.8, "top_k": 5}])
def test_generate_with_and_without_cache(positions, batched, sampling):
    lm = MODELS[positions]
    ids = prompt(batched)
    out = {
        use_cache: lm.generate(
            ids,
            6,
            use_cache=use_cache,
            generator=torch.Generator().manual_seed(7),
            **sampling,
        )
        for use_cache in (True, False)
    }
    assert torch.equal(out[True], out[False])
    assert out[True].shape == ((N, L + 6) if batched else (L + 6,))
    assert torch.equal(out[True][..., :L], ids)  # the prompt is kept as the prefix


@pytest.mark.parametrize("batched", [True, False])
def test_greedy_is_the_argmax_of_the_logits(batched):
    lm = MODELS["learned"]
    ids = prompt(batched)
    out = lm.generate(ids, 3, temperature=0)
    for t in range(L, L + 3):
        with torch.no_grad():
            logits = lm(out[..., :t])[0]
        assert torch.equal(out[..., t], logits[..., -1, :].argmax(-1))


def test_generate_zero_tokens_top_k_one_and_seeds():
    lm = MODELS["rope"]
    ids = prompt()
    assert torch.equal(lm.generate(ids, 0), ids)
    assert torch.equal(lm.generate(ids[0], 0), ids[0])
    greedy = lm.generate(ids, 6, temperature=0)
    g = torch.Generator().manual_seed(3)
    assert torch.equal(lm.generate(ids, 6, temperature=1.5, top_k=1, generator=g), greedy)

    def sample(seed):
        gen = torch.Generator().manual_seed(seed)
        return lm.generate(ids, 8, temperature=1.0, generator=gen)

    assert torch.equal(sample(11), sample(11))
    assert not torch.equal(sample(11), sample(12))  # 2 x 8 draws from 97 tokens


def test_top_k_only_draws_among_the_k_most_likely():
    lm = MODELS["alibi"]
    ids = prompt()
    with torch.no_grad():
        allowed = lm(ids)[0][:, -1].topk(5).indices  # (N, 5)
    for seed in range(10):
        out = lm.generate(ids, 1, top_k=5, generator=torch.Generator().manual_seed(seed))
        assert all(out[n, -1] in allowed[n] for n in range(N))


@pytest.mark.parametrize("training", [True, False])
def test_generate_restores_the_training_mode(training):
    lm = model("learned", dropout=0.2).train(training)
    ids = prompt()
    greedy = [lm.generate(ids, 4, temperature=0) for _ in range(2)]
    assert lm.training is training
    assert all(block.training is training for block in lm.blocks)
    assert torch.equal(greedy[0], greedy[1])  # no dropout while generating


def test_dropout_in_the_model_only_in_training_mode():
    lm = model("learned", dropout=0.2)
    ids = prompt()
    with torch.no_grad():
        assert torch.equal(lm(ids)[0], lm(ids)[0])
        lm.train()
        assert not torch.equal(lm(ids)[0], lm(ids)[0])


# ---- attention weights ------------------------------------------------------------------------


def layer0_by_hand(lm, ids):
    """Layer 0 written out: embeddings + positions, ln1, projections, heads, softmax."""
    n, length = ids.shape
    x = lm.token_embedding.weight[ids]  # (N, L, E)
    if lm.positions == "learned":
        x = x + lm.position_embedding.weight[:length]
    elif lm.positions == "sinusoidal":
        x = x + sinusoidal_encoding(length, E)
    block = lm.blocks[0]
    attn = block.attn
    y = block.ln1(x)

    def heads(t):
        return t.view(n, length, H, D).transpose(1, 2)  # (N, H, L, D)

    q, k, v = heads(attn.q_proj(y)), heads(attn.k_proj(y)), heads(attn.v_proj(y))
    if lm.positions == "rope":
        q, k = rotary_embedding(q), rotary_embedding(k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (N, H, L, L)
    if lm.positions == "alibi":
        scores = scores + alibi_bias(H, length)
    scores = scores.masked_fill(~causal_mask(length), -math.inf)
    weights = torch.softmax(scores, dim=-1)
    x = x + attn.out_proj((weights @ v).transpose(1, 2).reshape(n, length, E))
    x = x + block.mlp(block.ln2(x))
    return weights, x


@pytest.mark.parametrize("positions", POSITIONS)
def test_returned_weights_are_the_weights_applied(positions):
    lm = MODELS[positions]
    ids = prompt(length=S)
    seen = []
    # block 0's output is what block 1's first LayerNorm reads (the model calls the blocks'
    # private _forward, which runs no hook of the block itself)
    hook = lm.blocks[1].ln1.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    try:
        with torch.no_grad():
            logits, weights = lm(ids, need_weights=True)
            expected_weights, expected_out = layer0_by_hand(lm, ids)
    finally:
        hook.remove()
    assert len(weights) == LAYERS and all(w.shape == (N, H, S, S) for w in weights)
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(N, H, S))
        assert (w[..., ~causal_mask(S)] == 0).all()
    torch.testing.assert_close(weights[0], expected_weights)
    torch.testing.assert_close(seen[0], expected_out)
    torch.testing.assert_close(logits, lm(ids)[0], atol=1e-5, rtol=1e-5)
    assert lm(ids)[1] is None


def test_unbatched_forward_and_weights():
    lm = MODELS["learned"]
    ids = prompt()
    logits, weights = lm(ids[1], need_weights=True)
    batched_logits, batched_weights = lm(ids, need_weights=True)
    assert logits.shape == (L, V) and all(w.shape == (H, L, L) for w in weights)
    torch.testing.assert_close(logits, batched_logits[1])
    torch.testing.assert_close(weights[1], batched_weights[1][1])


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("masked", [True, False])
def test_alibi_inside_attention_equals_the_float_mask(batched, masked):
    alibi = randomise(MultiHeadAttention(E, H, bias=True, positions="alibi"))
    plain = MultiHeadAttention(E, H, bias=True)
    plain.load_state_dict(alibi.state_dict())
    x = torch.randn(N, L, E) if batched else torch.randn(L, E)
    bias = alibi_bias(H, L)  # (H, L, L)
    if masked:
        bias = bias.masked_fill(~causal_mask(L), -math.inf)
    float_mask = bias.unsqueeze(0) if batched else bias  # batched: (1, H, L, L)
    bool_mask = causal_mask(L) if masked else None
    for need_weights in (True, False):
        out, w = alibi(x, mask=bool_mask, need_weights=need_weights)
        expected, expected_w = plain(x, mask=float_mask, need_weights=need_weights)
        torch.testing.assert_close(out, expected)
        if need_weights:
            torch.testing.assert_close(w, expected_w)


@pytest.mark.parametrize("base", [10000.0, 100.0])
@pytest.mark.parametrize("batched", [True, False])
def test_rope_inside_attention_equals_rotating_by_hand(base, batched):
    rope = randomise(MultiHeadAttention(E, H, bias=True, positions="rope", rope_base=base))
    x = torch.randn(N, L, E) if batched else torch.randn(L, E)
    xb = x if batched else x.unsqueeze(0)

    def heads(t):
        return t.view(xb.shape[0], L, H, D).transpose(1, 2)  # (N, H, L, D)

    q = rotary_embedding(heads(rope.q_proj(xb)), base=base)
    k = rotary_embedding(heads(rope.k_proj(xb)), base=base)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~causal_mask(L), -math.inf)
    weights = torch.softmax(scores, dim=-1)
    expected = rope.out_proj((weights @ heads(rope.v_proj(xb))).transpose(1, 2).flatten(2))
    out, w = rope(x, mask=causal_mask(L))
    torch.testing.assert_close(out, expected if batched else expected[0])
    torch.testing.assert_close(w, weights if batched else weights[0])


# ---- embeddings, tying, freezing, training ----------------------------------------------------


def test_tied_and_untied_read_out():
    tied = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN)
    assert tied.lm_head.weight is tied.token_embedding.weight
    assert tied.lm_head.bias is None
    untied = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN, tie_weights=False)
    assert untied.lm_head.weight is not untied.token_embedding.weight
    assert untied.lm_head.weight.shape == (V, E)
    n_tied = sum(p.numel() for p in tied.parameters())
    assert sum(p.numel() for p in untied.parameters()) == n_tied + V * E
    assert tied.double().lm_head.weight is tied.token_embedding.weight  # still one tensor


def test_embeddings_are_copied_into_the_token_embedding():
    vectors = torch.randn(V, E, dtype=torch.float64)
    lm = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN, embeddings=vectors)
    torch.testing.assert_close(lm.token_embedding.weight, vectors.float())
    assert lm.lm_head.weight is lm.token_embedding.weight
    vectors.zero_()  # a copy: the caller's tensor is not the model's
    assert lm.token_embedding.weight.abs().sum() > 0


def loss_of(lm, ids):
    logits, _ = lm(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1))


@pytest.mark.parametrize("tie_weights", [True, False])
def test_frozen_embeddings_stay_fixed(tie_weights):
    lm = LanguageModel(
        V, E, H, LAYERS, max_len=MAX_LEN, freeze_embeddings=True, tie_weights=tie_weights
    )
    assert not lm.token_embedding.weight.requires_grad
    before = {name: p.detach().clone() for name, p in lm.named_parameters()}
    optimiser = torch.optim.Adam([p for p in lm.parameters() if p.requires_grad], lr=1e-2)
    loss_of(lm, prompt(length=S)).backward()
    assert lm.token_embedding.weight.grad is None
    optimiser.step()
    after = dict(lm.named_parameters())
    assert torch.equal(after["token_embedding.weight"], before["token_embedding.weight"])
    changed = [name for name in before if not torch.equal(after[name], before[name])]
    assert "blocks.0.attn.q_proj.weight" in changed and "position_embedding.weight" in changed
    assert ("lm_head.weight" in changed) is not tie_weights  # tied: frozen with the embedding


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("tie_weights", [True, False])
def test_every_parameter_gets_a_finite_gradient(positions, tie_weights):
    lm = LanguageModel(
        V, E, H, LAYERS, max_len=MAX_LEN, positions=positions, tie_weights=tie_weights
    ).train()
    loss_of(lm, prompt(length=S)).backward()
    for name, p in lm.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_attention_only_model():
    lm = model("rope", mlp_ratio=0)
    assert all(block.mlp is None and block.ln2 is None for block in lm.blocks)
    ids = prompt(length=S)
    with torch.no_grad():
        cache = lm.new_cache()
        steps = [lm(ids[:, t : t + 1], cache=cache)[0] for t in range(S)]
        torch.testing.assert_close(torch.cat(steps, dim=1), lm(ids)[0], atol=1e-5, rtol=1e-5)


def test_a_few_adam_steps_reduce_the_loss():
    lm = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN).train()
    ids = torch.tensor([[3, 8, 3, 8, 3, 8, 3], [42, 42, 42, 42, 42, 42, 42]])
    optimiser = torch.optim.Adam(lm.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        optimiser.zero_grad()
        loss = loss_of(lm, ids)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < 0.75 * losses[0], losses  # 4.5 -> 2.9 in 8 steps


@pytest.mark.parametrize("positions", POSITIONS)
def test_float64_model_cached_equals_uncached(positions):
    lm = model(positions).double()
    ids = prompt(length=S)
    with torch.no_grad():
        full = lm(ids)[0]
        cache = lm.new_cache()
        steps = [lm(ids[:, :2], cache=cache)[0]]
        steps += [lm(ids[:, t : t + 1], cache=cache)[0] for t in range(2, S)]
    assert full.dtype == torch.float64
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-12, rtol=1e-12)
    assert cache.nbytes == 2 * LAYERS * N * H * S * D * 8
    greedy = [lm.generate(ids, 3, temperature=0, use_cache=c) for c in (True, False)]
    assert torch.equal(greedy[0], greedy[1])


# ---- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ids,error,match",
    [
        (
            torch.tensor([[1, -1, 2]]),
            ValueError,
            r"ids must hold token indices in 0..96 .*got \[-1\]",
        ),
        (torch.tensor([[1, 97, 2]]), ValueError, r"in 0..96 \(vocab_size=97\); got \[97\]"),
        (torch.tensor([[1.0, 2.0]]), TypeError, "ids must be an integer tensor .*torch.float32"),
        (torch.tensor([[True, False]]), TypeError, "ids must be an integer tensor .*torch.bool"),
        ([[1, 2]], TypeError, "ids must be a torch.Tensor of token indices; got list"),
        (
            torch.zeros(1, 2, 3, dtype=torch.long),
            ValueError,
            r"\(L,\) or \(N, L\); got 3-D \(1, 2, 3\)",
        ),
        (torch.tensor(4), ValueError, r"ids must have shape \(L,\) or \(N, L\); got 0-D"),
    ],
    ids=["negative", "too-large", "float", "bool", "list", "3-D", "0-D"],
)
def test_bad_ids(ids, error, match):
    lm = MODELS["learned"]
    with pytest.raises(error, match=match):
        lm(ids)
    with pytest.raises(error, match=match):
        lm.generate(ids, 2)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sequences_longer_than_max_len(positions):
    lm = MODELS[positions]
    lm(prompt(length=MAX_LEN))  # exactly max_len is fine
    match = (
        rf"the sequence \(ids plus the cached tokens\) must be at most max_len=16 tokens with "
        rf"positions='{positions}' .*got 17"
    )
    with pytest.raises(ValueError, match=match):
        lm(prompt(length=MAX_LEN + 1))
    cache = lm.new_cache()
    lm(prompt(length=10), cache=cache)
    with pytest.raises(ValueError, match=match):
        lm(prompt(length=7), cache=cache)
    # the last new token is never read: 10 + 7 - 1 = 16 tokens go through the model
    assert lm.generate(prompt(length=10), 7).shape == (N, MAX_LEN + 1)
    assert lm.generate(prompt(length=MAX_LEN), 1).shape == (N, MAX_LEN + 1)
    with pytest.raises(
        ValueError, match=r"ids plus max_new_tokens - 1 must be at most max_len=16.*got 17"
    ):
        lm.generate(prompt(length=10), 8)


@pytest.mark.parametrize("positions", ["rope", "alibi", None])
def test_relative_positions_have_no_length_limit(positions):
    lm = MODELS[positions]
    ids = prompt(length=MAX_LEN + 4)
    logits, _ = lm(ids)
    assert logits.shape == (N, MAX_LEN + 4, V)
    out = lm.generate(ids, 3, temperature=0)
    assert out.shape == (N, MAX_LEN + 7)
    assert torch.equal(out, lm.generate(ids, 3, temperature=0, use_cache=False))


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"top_k": 0}, ValueError, r"top_k must be an int >= 1 \(or None for all tokens\); got 0"),
        (
            {"top_k": 2.0},
            TypeError,
            r"top_k must be an int >= 1 \(or None for all tokens\); got float 2\.0",
        ),
        ({"temperature": -0.5}, ValueError, r"temperature must be a finite number >= 0 .*got -0.5"),
        (
            {"temperature": math.nan},
            ValueError,
            "temperature must be a finite number >= 0 .*got nan",
        ),
        (
            {"temperature": math.inf},
            ValueError,
            "temperature must be a finite number >= 0 .*got inf",
        ),
        (
            {"temperature": "1"},
            TypeError,
            r"temperature must be a finite number >= 0 \(0 = greedy\); got str '1'",
        ),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens must be an integer >= 0; got -1"),
        (
            {"max_new_tokens": 1.5},
            TypeError,
            r"max_new_tokens must be an integer >= 0; got float 1\.5",
        ),
    ],
)
def test_generate_argument_errors(kwargs, error, match):
    args = {"max_new_tokens": 2, **kwargs}
    with pytest.raises(error, match=match):
        MODELS["rope"].generate(prompt(), args.pop("max_new_tokens"), **args)


@pytest.mark.parametrize(
    "empty", [torch.zeros(0, dtype=torch.long), torch.zeros(N, 0, dtype=torch.long)]
)
def test_generate_refuses_an_empty_prompt(empty):
    with pytest.raises(
        ValueError, match="ids must hold at least one token to continue; got an empty prompt"
    ):
        MODELS["rope"].generate(empty, 2)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            {"positions": "absolute"},
            ValueError,
            r"positions must be one of 'learned', 'sinusoidal', 'rope', 'alibi', None, or an "
            r"attnlib.positions.Rotary or ALiBi object; "
            "got 'absolute'",
        ),
        (
            {"embeddings": torch.randn(V, E - 1)},
            ValueError,
            r"embeddings must have shape \(V=97, E=12\); got \(97, 11\)",
        ),
        (
            {"embeddings": torch.randn(V)},
            ValueError,
            r"embeddings must have shape \(V=97, E=12\); got \(97,\)",
        ),
        (
            {"embeddings": torch.ones(V, E, dtype=torch.long)},
            TypeError,
            "embeddings must be a float torch.Tensor .*got torch.int64",
        ),
        (
            {"embeddings": [[0.0] * E] * V},
            TypeError,
            "embeddings must be a float torch.Tensor .*got list",
        ),
        (
            {"num_heads": 4, "positions": "rope"},
            ValueError,
            r"positions='rope' needs an even head_dim D .*got D=3",
        ),
        (
            {"embed_dim": 9, "positions": "sinusoidal"},
            ValueError,
            "positions='sinusoidal' needs an even embed_dim; got embed_dim=9",
        ),
        ({"vocab_size": 0}, ValueError, "vocab_size must be a positive integer; got 0"),
        ({"num_layers": 0}, ValueError, "num_layers must be a positive integer; got 0"),
        ({"max_len": 2.5}, TypeError, "max_len must be a positive integer; got float 2.5"),
        ({"mlp_ratio": -1}, ValueError, "mlp_ratio must be a number >= 0; got -1"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a probability in \[0, 1\); got 1.0"),
    ],
)
def test_model_constructor_errors(kwargs, error, match):
    args = {"vocab_size": V, "embed_dim": E, "num_heads": H, "num_layers": LAYERS, **kwargs}
    sizes = [args.pop(name) for name in ("vocab_size", "embed_dim", "num_heads", "num_layers")]
    args.setdefault("max_len", MAX_LEN)
    with pytest.raises(error, match=match):
        LanguageModel(*sizes, **args)


def test_cache_errors():
    lm = MODELS["learned"]
    ids = prompt()
    with pytest.raises(
        TypeError, match=r"cache must be an attnlib.ModelCache \(model.new_cache\(\)\); got KVCache"
    ):
        lm(ids, cache=KVCache())
    with pytest.raises(ValueError, match=r"cache must have one layer cache per block \(2\); got 3"):
        lm(ids, cache=ModelCache(3))
    with pytest.raises(ValueError, match="layers must be a positive integer; got 0"):
        ModelCache(0)
    with pytest.raises(ValueError, match="window must be a positive integer; got 0"):
        ModelCache(2, window=0)
    with pytest.raises(ValueError, match="window must be a positive integer; got 0"):
        LanguageModel(V, E, H, 2, max_len=MAX_LEN, window=0)
    cache = lm.new_cache()
    lm(ids, cache=cache)
    with pytest.raises(
        ValueError,
        match=r"cache \(layer 0\) holds keys of shape \(N=2, G=3, S=5, D=4\); this step needs "
        r"\(N=1, G=3, S, D=4\)",
    ):
        lm(ids[:1, :1], cache=cache)  # another batch size: the cache belongs to one batch


def test_activation_gelu_tanh_is_gpt2s_gelu():
    """``activation="gelu_tanh"`` puts GELU's tanh approximation in every block's MLP; the
    exact GELU stays the default, and anything else is refused naming ``activation``."""
    torch.manual_seed(0)
    exact = LanguageModel(30, 12, 3, 2, max_len=8)
    tanh = LanguageModel(30, 12, 3, 2, max_len=8, activation="gelu_tanh")
    tanh.load_state_dict(exact.state_dict())
    assert [b.mlp[1].approximate for b in tanh.blocks] == ["tanh", "tanh"]
    assert exact.blocks[0].mlp[1].approximate == "none"
    y = torch.linspace(-4, 4, 81)  # where the two forms differ by up to 5e-4
    torch.testing.assert_close(
        tanh.blocks[0].mlp[1](y), 0.5 * y * (1 + torch.tanh(0.7978845608 * (y + 0.044715 * y**3)))
    )
    assert (tanh.blocks[0].mlp[1](y) - exact.blocks[0].mlp[1](y)).abs().max() > 1e-4
    with pytest.raises(
        ValueError, match=r"activation must be one of \('gelu', 'gelu_tanh'\); got 'relu'"
    ):
        TransformerBlock(12, 3, activation="relu")
    with pytest.raises(TypeError, match="activation must be a str.*got NoneType None"):
        LanguageModel(30, 12, 3, 1, max_len=8, activation=None)


def test_block_to_torch_refuses_the_tanh_gelu():
    block = TransformerBlock(12, 3, activation="gelu_tanh")
    with pytest.raises(ValueError, match=r'block must use activation="gelu".*gelu_tanh'):
        block_to_torch(block)
