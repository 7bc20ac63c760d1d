"""attnlib.transformer: TransformerBlock (and the block converters of attnlib.convert).

Oracles: ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`` with copied weights
for the block (several cases ported from PyTorch's own tests: ``gelu`` given as a string, a
function or a module, ``batch_first``, the fast path under ``no_grad``, masks and key padding);
the block written out by hand. Sizes are all different (E=12, H=3, D=4, FF=28, L=5, N=2).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib import MultiHeadAttention, TransformerBlock, causal_mask
from attnlib.convert import block_from_torch, block_to_torch
from torch import nn

E, H, D, FF, L, S, N, V, LAYERS, MAX_LEN = 12, 3, 4, 28, 5, 7, 2, 97, 2, 16
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


def test_block_to_torch_errors():
    with pytest.raises(TypeError, match="block must be an attnlib.TransformerBlock; got Linear"):
        block_to_torch(nn.Linear(E, E))
    with pytest.raises(TypeError, match="got TransformerEncoderLayer"):
        block_to_torch(torch_layer())
    with pytest.raises(ValueError, match="block must have an MLP.*got an attention-only block"):
        block_to_torch(TransformerBlock(E, H, mlp_ratio=0))
    for positions in ("rope", "alibi"):
        with pytest.raises(
            ValueError, match=f"must not use positions inside .*got positions='{positions}'"
        ):
            block_to_torch(TransformerBlock(E, H, positions=positions))
    with pytest.raises(
        ValueError,
        match="num_kv_heads == num_heads for torch.nn.MultiheadAttention.*"
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
        ({"mlp_ratio": True}, ValueError, "mlp_ratio must be a number >= 0; got True"),
        ({"mlp_ratio": math.inf}, ValueError, "mlp_ratio must be finite; got inf"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a probability in \[0, 1\); got 1.0"),
        ({"dropout": -0.1}, ValueError, r"dropout must be a probability in \[0, 1\); got -0.1"),
        ({"num_heads": 5}, ValueError, "embed_dim must be divisible by num_heads"),
        ({"embed_dim": 0}, ValueError, "embed_dim must be a positive integer; got 0"),
        ({"positions": "learned"}, ValueError, r"positions must be one of \(None, 'rope'"),
        ({"num_kv_heads": 2}, ValueError, "num_kv_heads must divide num_heads"),
    ],
)
def test_block_constructor_errors(kwargs, error, match):
    args = {"embed_dim": E, "num_heads": H, **kwargs}
    with pytest.raises(error, match=match):
        TransformerBlock(args.pop("embed_dim"), args.pop("num_heads"), **args)


def test_block_input_errors_raised_by_the_attention():
    """Errors that reach the attention name its argument (query, mask)."""
    block = TransformerBlock(E, H)
    with pytest.raises(ValueError, match=r"query must be 2-D or 3-D; got 4-D .*\(1, 2, 5, 12\)"):
        block(torch.randn(1, N, L, E))
    with pytest.raises(ValueError, match=r"mask must have shape .*got \(4, 4\)"):
        block(torch.randn(N, L, E), mask=causal_mask(4))
    with pytest.raises(TypeError, match="mask must be boolean .*got dtype torch.int64"):
        block(torch.randn(N, L, E), mask=causal_mask(L).long())


@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason="TransformerBlock.forward runs ln1 (nn.LayerNorm) before the attention checks x, so "
    "a wrong width or dtype raises PyTorch's RuntimeError, not the documented ValueError/"
    "TypeError naming query",
)
@pytest.mark.parametrize(
    "x,error,match",
    [
        (torch.randn(N, L, 10), ValueError, r"query must have shape \(N=2, L, E=12\); got"),
        (torch.ones(N, L, E, dtype=torch.long), TypeError, "query must be a floating-point"),
        (torch.randn(N, L, E, dtype=torch.float64), TypeError, "query has dtype torch.float64"),
    ],
    ids=["width-10", "int64", "float64-into-float32"],
)
def test_block_checks_x_before_its_layer_norm(x, error, match):
    with pytest.raises(error, match=match):
        TransformerBlock(E, H)(x)
