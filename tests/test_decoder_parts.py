"""The parts of a 2025 decoder (issue 49): RMSNorm, GatedMLP, a block composed of modules
(norms, attention, MLP; Gemma 3's sandwich norms), proven equal to ``transformers``' LLaMA and
Gemma 3 layers on small random configurations made offline (no model hub)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attnlib import (  # noqa: E402
    GatedMLP,
    LanguageModel,
    ModernAttention,
    MultiHeadAttention,
    RMSNorm,
    TransformerBlock,
    causal_mask,
)
from attnlib.decoding import sliding_window_mask  # noqa: E402
from attnlib.positions import Rotary, rotary_embedding, rotate_half_to_pairs  # noqa: E402
from torch import nn  # noqa: E402

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}
# transformers' RMSNorms compute in float32 even for a float64 input: float32's tolerance there
HF_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-6, atol=1e-6)}
DTYPES = [torch.float32, torch.float64]


def randomize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter of ``module`` drawn from N(0, 0.5^2) (norm scales too, so that a
    forgotten offset or a swapped weight shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return module


# --- RMSNorm -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_equals_torch_rmsnorm(dtype):
    torch.manual_seed(0)
    ours = randomize(RMSNorm(5, eps=1e-6)).to(dtype)
    theirs = nn.RMSNorm(5, eps=1e-6).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 3, 5, dtype=dtype) * 3
    torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_by_hand(dtype):
    torch.manual_seed(1)
    norm = randomize(RMSNorm(7, eps=1e-5, offset=1.0)).to(dtype)
    x = torch.randn(3, 4, 7, dtype=dtype)
    by_hand = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * (1 + norm.weight)
    torch.testing.assert_close(norm(x), by_hand, **TOL[dtype])


def test_rmsnorm_starts_as_the_plain_normalisation():
    x = torch.randn(2, 3, 6)
    plain = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    for offset in (0.0, 1.0):
        torch.testing.assert_close(RMSNorm(6, offset=offset)(x), plain)
    assert torch.equal(RMSNorm(6).weight, torch.ones(6))
    assert torch.equal(RMSNorm(6, offset=1.0).weight, torch.zeros(6))


def test_rmsnorm_half_precision_is_computed_in_float32():
    norm = randomize(RMSNorm(6)).to(torch.bfloat16)
    x = torch.randn(4, 6).to(torch.bfloat16) * 100
    y = norm(x)
    assert y.dtype == torch.bfloat16
    exact = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(y, (exact * norm.weight.float()).to(torch.bfloat16))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_equals_llama_and_gemma3_rmsnorm(dtype):
    pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x = torch.randn(2, 3, 9, dtype=dtype, generator=torch.Generator().manual_seed(2)) * 2
    for theirs, offset in ((LlamaRMSNorm(9, eps=1e-6), 0.0), (Gemma3RMSNorm(9, eps=1e-6), 1.0)):
        randomize(theirs, seed=3)
        ours = RMSNorm(9, eps=1e-6, offset=offset)
        ours.load_state_dict(theirs.state_dict())  # same name, same stored numbers
        ours, theirs = ours.to(dtype), theirs.to(dtype)
        torch.testing.assert_close(ours(x), theirs(x), **HF_TOL[dtype])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer; got 0"),
        ({"dim": 4.0}, TypeError, "dim must be a positive integer; got float"),
        ({"dim": 4, "eps": -1.0}, ValueError, "eps must be a number >= 0; got -1.0"),
        ({"dim": 4, "eps": "1e-6"}, TypeError, "eps must be a number >= 0; got str"),
        ({"dim": 4, "offset": float("inf")}, ValueError, "offset must be finite; got inf"),
        ({"dim": 4, "offset": None}, TypeError, "offset must be a finite number; got NoneType"),
    ],
)
def test_rmsnorm_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RMSNorm(**kwargs)


def test_rmsnorm_bad_inputs():
    norm = RMSNorm(4)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., d=4\); got \(2, 5\)"):
        norm(torch.randn(2, 5))
    with pytest.raises(ValueError, match="x must be at least 1-D; got 0-D"):
        norm(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x must be a floating-point tensor; got dtype torch.int64"):
        norm(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="x has dtype torch.float64 but the module's weights"):
        norm(torch.randn(2, 4, dtype=torch.float64))


# --- GatedMLP ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("activation", "phi"),
    [
        ("silu", F.silu),
        ("gelu_tanh", lambda z: F.gelu(z, approximate="tanh")),
        ("gelu", F.gelu),
    ],
)
def test_gated_mlp_by_hand(activation, phi, dtype):
    mlp = randomize(GatedMLP(6, 11, activation=activation, bias=True)).to(dtype)
    x = torch.randn(2, 3, 6, dtype=dtype)
    gate = x @ mlp.gate_proj.weight.T + mlp.gate_proj.bias  # (2, 3, 11)
    up = x @ mlp.up_proj.weight.T + mlp.up_proj.bias  # (2, 3, 11)
    by_hand = (phi(gate) * up) @ mlp.down_proj.weight.T + mlp.down_proj.bias  # (2, 3, 6)
    torch.testing.assert_close(mlp(x), by_hand, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gated_mlp_equals_llama_and_gemma3_mlp(dtype):
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3MLP
    from transformers.models.llama.modeling_llama import LlamaMLP

    llama = transformers.LlamaConfig(hidden_size=10, intermediate_size=17, num_attention_heads=5)
    gemma = transformers.Gemma3TextConfig(
        hidden_size=10,
        intermediate_size=17,
        num_attention_heads=5,
        num_key_value_heads=1,
        head_dim=4,
    )
    x = torch.randn(2, 3, 10, dtype=dtype, generator=torch.Generator().manual_seed(4))
    for theirs, activation in ((LlamaMLP(llama), "silu"), (Gemma3MLP(gemma), "gelu_tanh")):
        randomize(theirs, seed=5)
        ours = GatedMLP(10, 17, activation=activation)
        ours.load_state_dict(theirs.state_dict())  # gate_proj, up_proj, down_proj by name
        ours, theirs = ours.to(dtype), theirs.to(dtype)
        torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])


def test_gated_mlp_exact_gelu_is_not_gemmas():
    mlp = randomize(GatedMLP(6, 11, activation="gelu_tanh"))
    exact = GatedMLP(6, 11, activation="gelu")
    exact.load_state_dict(mlp.state_dict())
    x = torch.randn(4, 6) * 3
    assert not torch.allclose(mlp(x), exact(x), atol=1e-6)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 4), {}, ValueError, "dim must be a positive integer; got 0"),
        ((4, 0), {}, ValueError, "hidden must be a positive integer; got 0"),
        ((4, 2.5), {}, TypeError, "hidden must be a positive integer; got float"),
        ((4, 8), {"activation": "relu"}, ValueError, r"activation must be one of \('silu'"),
        ((4, 8), {"activation": F.silu}, TypeError, "activation must be a str"),
        ((4, 8), {"bias": 1}, TypeError, "bias must be a bool; got int 1"),
    ],
)
def test_gated_mlp_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        GatedMLP(*args, **kwargs)


def test_gated_mlp_bad_inputs():
    mlp = GatedMLP(4, 8)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., E=4\); got \(2, 5\)"):
        mlp(torch.randn(2, 5))
    with pytest.raises(TypeError, match="x must be a torch.Tensor; got list"):
        mlp([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(TypeError, match="x has dtype torch.float64 but the module's weights"):
        mlp(torch.randn(2, 4, dtype=torch.float64))


# --- TransformerBlock composed of modules ------------------------------------------------


def test_default_block_keeps_its_state_dict_keys_and_numbers():
    torch.manual_seed(0)
    block = TransformerBlock(12, 3).eval()
    assert list(block.state_dict()) == [
        "ln1.weight",
        "ln1.bias",
        "attn.q_proj.weight",
        "attn.q_proj.bias",
        "attn.k_proj.weight",
        "attn.k_proj.bias",
        "attn.v_proj.weight",
        "attn.v_proj.bias",
        "attn.out_proj.weight",
        "attn.out_proj.bias",
        "ln2.weight",
        "ln2.bias",
        "mlp.0.weight",
        "mlp.0.bias",
        "mlp.2.weight",
        "mlp.2.bias",
    ]
    assert block.post_attn_norm is None and block.post_mlp_norm is None
    torch.manual_seed(0)
    same = TransformerBlock(12, 3, norm=None, post_norm=None, mlp=None).eval()
    x = torch.randn(2, 5, 12)
    assert torch.equal(block(x, mask=causal_mask(5))[0], same(x, mask=causal_mask(5))[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sandwich_block_by_hand(dtype):
    torch.manual_seed(0)
    block = TransformerBlock(
        12,
        attn=MultiHeadAttention(12, 3, positions="rope"),
        mlp=GatedMLP(12, 20, activation="gelu_tanh"),
        norm=lambda E: RMSNorm(E, offset=1.0),
        post_norm=lambda E: RMSNorm(E, offset=1.0),
    )
    block = randomize(block).to(dtype).eval()
    assert list(block.state_dict())[-2:] == ["post_attn_norm.weight", "post_mlp_norm.weight"]
    x = torch.randn(2, 5, 12, dtype=dtype)
    mask = causal_mask(5)
    attended, _ = block.attn(block.ln1(x), mask=mask)
    h = x + block.post_attn_norm(attended)
    by_hand = h + block.post_mlp_norm(block.mlp(block.ln2(h)))
    torch.testing.assert_close(block(x, mask=mask)[0], by_hand, **TOL[dtype])


def test_block_with_norm_and_mlp_decodes_with_a_cache():
    torch.manual_seed(0)
    block = TransformerBlock(
        12,
        attn=MultiHeadAttention(12, 2, num_kv_heads=1, positions="rope"),
        mlp=GatedMLP(12, 20),
        norm=RMSNorm,
        post_norm=RMSNorm,
    )
    block = randomize(block).eval()
    x = torch.randn(2, 6, 12)
    full, _ = block(x, mask=causal_mask(6))
    cache = block.attn.new_cache()
    steps = [block(x[:, t : t + 1], cache=cache)[0] for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"mlp": GatedMLP(12, 20), "mlp_ratio": 2.0}, ValueError, "mlp must come alone"),
        ({"mlp": GatedMLP(12, 20), "activation": "gelu_tanh"}, ValueError, "mlp must come alone"),
        (
            {"mlp": GatedMLP(8, 20)},
            ValueError,
            r"mlp must have the block's dim E=12; got mlp.dim=8",
        ),
        ({"mlp": F.silu}, TypeError, "mlp must be an nn.Module .* got function"),
        ({"norm": RMSNorm(12)}, TypeError, "norm must be a callable .* got RMSNorm"),
        ({"norm": "rms"}, TypeError, "norm must be a callable .* got str"),
        ({"post_norm": nn.LayerNorm(12)}, TypeError, "post_norm must be a callable .* LayerNorm"),
        ({"norm": lambda E: E}, TypeError, r"norm\(12\) gave int"),
        ({"norm": RMSNorm, "norm_eps": 1e-6}, ValueError, "give the eps to norm instead"),
    ],
)
def test_block_bad_parts(kwargs, error, match):
    with pytest.raises(error, match=match):
        TransformerBlock(12, 3, **kwargs)


def test_language_model_norm_makes_ln_f():
    lm = LanguageModel(30, 12, 3, 2, max_len=8, positions="rope", norm=RMSNorm)
    assert isinstance(lm.ln_f, RMSNorm)
    assert all(isinstance(b.ln1, RMSNorm) and isinstance(b.ln2, RMSNorm) for b in lm.blocks)
    with pytest.raises(TypeError, match="norm must be a callable .* got RMSNorm"):
        LanguageModel(30, 12, 3, 2, max_len=8, norm=RMSNorm(12))


# --- LLaMA: a decoder layer and a whole model equal to transformers' -----------------------

E, H, G, HIDDEN, V = 24, 4, 2, 40, 50
N, L = 2, 7


def llama_config(transformers, num_layers=1):
    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        num_key_value_heads=G,
        intermediate_size=HIDDEN,
        num_hidden_layers=num_layers,
        rope_theta=10000.0,
        attention_bias=False,
        rms_norm_eps=1e-6,
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    return config


def llama_block() -> TransformerBlock:
    """A LLaMA decoder layer as a TransformerBlock: RMSNorm, grouped-query attention with RoPE,
    SwiGLU."""
    return TransformerBlock(
        E,
        attn=MultiHeadAttention(E, H, num_kv_heads=G, positions=Rotary(10000.0)),
        mlp=GatedMLP(E, HIDDEN, activation="silu"),
        norm=lambda dim: RMSNorm(dim, eps=1e-6),
    )


def copy_llama_layer(block: TransformerBlock, layer) -> None:
    """``layer`` (a LlamaDecoderLayer)'s weights into ``block``, q and k rows permuted."""
    attn = layer.self_attn
    with torch.no_grad():
        block.ln1.weight.copy_(layer.input_layernorm.weight)
        block.ln2.weight.copy_(layer.post_attention_layernorm.weight)
        block.attn.q_proj.weight.copy_(rotate_half_to_pairs(attn.q_proj.weight, H))
        block.attn.k_proj.weight.copy_(rotate_half_to_pairs(attn.k_proj.weight, G))
        block.attn.v_proj.weight.copy_(attn.v_proj.weight)
        block.attn.out_proj.weight.copy_(attn.o_proj.weight)
    block.mlp.load_state_dict(layer.mlp.state_dict())  # gate_proj, up_proj, down_proj


def test_rotate_half_to_pairs_is_rotary_embedding_of_the_halves():
    """The permutation is right: rotate-half RoPE of ``x`` is, permuted, the pairs' RoPE."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, rotate_half

    D = E // H
    x = torch.randn(1, 1, L, D, dtype=torch.float64)
    cos, sin = LlamaRotaryEmbedding(llama_config(transformers))(x, torch.arange(L)[None])
    halves = x * cos + rotate_half(x) * sin  # (1, 1, L, D), LLaMA's
    perm = rotate_half_to_pairs(torch.arange(D).view(D, 1), 1).flatten()
    pairs = rotary_embedding(x[..., perm])  # attnlib's on the permuted features
    torch.testing.assert_close(pairs, halves[..., perm], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_decoder_layer(dtype):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = llama_config(transformers)
    layer = randomize(LlamaDecoderLayer(config, layer_idx=0), seed=6).to(dtype).eval()
    block = llama_block().to(dtype).eval()
    copy_llama_layer(block, layer)
    x = torch.randn(N, L, E, dtype=dtype, generator=torch.Generator().manual_seed(7))
    position_ids = torch.arange(L).expand(N, L)  # (N, L)
    cos_sin = LlamaRotaryEmbedding(config)(x, position_ids)  # ((N, L, D), (N, L, D))
    blocked = torch.full((L, L), torch.finfo(dtype).min, dtype=dtype).triu(1)  # (L, L)
    with torch.no_grad():
        theirs = layer(
            x,
            attention_mask=blocked.expand(N, 1, L, L),  # (N, 1, L, L), added to the scores
            position_ids=position_ids,
            position_embeddings=cos_sin,
        )
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs  # (N, L, E)
        ours, _ = block(x, mask=causal_mask(L))
    torch.testing.assert_close(ours, theirs, **HF_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_for_causal_lm(dtype):
    """A whole LLaMA (2 layers) as a LanguageModel built with ``block=``: the same logits."""
    transformers = pytest.importorskip("transformers")
    config = llama_config(transformers, num_layers=2)
    hf = randomize(transformers.LlamaForCausalLM(config), seed=8).to(dtype).eval()
    lm = LanguageModel(
        V,
        E,
        H,
        2,
        max_len=64,
        positions="rope",
        tie_weights=False,
        block=lambda i: llama_block(),
        norm=lambda dim: RMSNorm(dim, eps=1e-6),
    )
    lm = lm.to(dtype).eval()
    with torch.no_grad():
        lm.token_embedding.weight.copy_(hf.model.embed_tokens.weight)
        lm.ln_f.weight.copy_(hf.model.norm.weight)
        lm.lm_head.weight.copy_(hf.lm_head.weight)
    for block, layer in zip(lm.blocks, hf.model.layers, strict=True):
        copy_llama_layer(block, layer)
    ids = torch.randint(0, V, (N, L), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        theirs = hf(ids).logits  # (N, L, V)
        ours, _ = lm(ids)
    torch.testing.assert_close(ours, theirs, **HF_TOL[dtype])
    # and decoding with attnlib's cache gives the same logits, token by token
    cache = lm.new_cache()
    with torch.no_grad():
        steps = [lm(ids[:, t : t + 1], cache=cache)[0] for t in range(L)]
    torch.testing.assert_close(torch.cat(steps, dim=1), theirs, **HF_TOL[dtype])


# --- Gemma 3: QK-norm, sandwich norms, 1 + w, GeGLU, local and global layers -----------------

D_GEMMA, WINDOW = 8, 4  # head_dim != E / H, as in Gemma; a window shorter than L


def gemma3_config(transformers):
    config = transformers.Gemma3TextConfig(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=D_GEMMA,
        intermediate_size=HIDDEN,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=WINDOW,
        query_pre_attn_scalar=D_GEMMA,  # scores scaled by D^-0.5, as Gemma 3 270M's 256 = D
        rms_norm_eps=1e-6,
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    return config


def gemma3_block(base: float) -> TransformerBlock:
    """A Gemma 3 decoder layer as a TransformerBlock: offset-1 RMSNorms before and after each
    sublayer, grouped-query attention with QK-norm and RoPE of ``base``, GeGLU (tanh GELU)."""
    rms = lambda dim: RMSNorm(dim, eps=1e-6, offset=1.0)  # noqa: E731
    attn = ModernAttention(
        E, H, num_kv_heads=G, head_dim=D_GEMMA, qk_norm=True, positions=Rotary(base)
    )
    mlp = GatedMLP(E, HIDDEN, activation="gelu_tanh")
    return TransformerBlock(E, attn=attn, mlp=mlp, norm=rms, post_norm=rms)


def copy_gemma3_layer(block: TransformerBlock, layer) -> None:
    """``layer`` (a Gemma3DecoderLayer)'s weights into ``block``: q and k rows permuted from
    rotate-half to pairs, and the QK-norm scales with them (ModernAttention's QK-norm is
    ``torch.nn.RMSNorm``, which stores the scale: ``1 + w``)."""
    attn = layer.self_attn
    perm = rotate_half_to_pairs(torch.arange(D_GEMMA).view(D_GEMMA, 1), 1).flatten()  # (D,)
    with torch.no_grad():
        for ours, theirs in (
            (block.ln1, layer.input_layernorm),
            (block.post_attn_norm, layer.post_attention_layernorm),
            (block.ln2, layer.pre_feedforward_layernorm),
            (block.post_mlp_norm, layer.post_feedforward_layernorm),
        ):
            ours.weight.copy_(theirs.weight)  # both store w of 1 + w
        block.attn.q_proj.weight.copy_(rotate_half_to_pairs(attn.q_proj.weight, H))
        block.attn.k_proj.weight.copy_(rotate_half_to_pairs(attn.k_proj.weight, G))
        block.attn.v_proj.weight.copy_(attn.v_proj.weight)
        block.attn.out_proj.weight.copy_(attn.o_proj.weight)
        block.attn.q_norm.weight.copy_((1 + attn.q_norm.weight)[perm])
        block.attn.k_norm.weight.copy_((1 + attn.k_norm.weight)[perm])
    block.mlp.load_state_dict(layer.mlp.state_dict())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("layer_idx", "base", "window"),
    [(0, 10000.0, WINDOW), (1, 1000000.0, None)],
    ids=["local", "global"],
)
def test_gemma3_decoder_layer(layer_idx, base, window, dtype):
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import (
        Gemma3DecoderLayer,
        Gemma3RotaryEmbedding,
    )

    config = gemma3_config(transformers)
    layer_type = config.layer_types[layer_idx]
    assert config.rope_parameters[layer_type]["rope_theta"] == base  # local 10^4, global 10^6
    layer = randomize(Gemma3DecoderLayer(config, layer_idx), seed=10).to(dtype).eval()
    block = gemma3_block(base).to(dtype).eval()
    copy_gemma3_layer(block, layer)
    x = torch.randn(N, L, E, dtype=dtype, generator=torch.Generator().manual_seed(11))
    position_ids = torch.arange(L).expand(N, L)  # (N, L)
    cos_sin = Gemma3RotaryEmbedding(config)(x, position_ids, layer_type)
    mask = causal_mask(L) if window is None else sliding_window_mask(L, window)  # (L, L)
    blocked = torch.zeros(L, L, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
    with torch.no_grad():
        theirs = layer(
            x,
            position_embeddings=cos_sin,
            attention_mask=blocked.expand(N, 1, L, L),  # (N, 1, L, L), added to the scores
            position_ids=position_ids,
        )
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs  # (N, L, E)
        ours, _ = block(x, mask=mask)
    torch.testing.assert_close(ours, theirs, **HF_TOL[dtype])
    if window is not None:  # the window matters: without it, other numbers
        unwindowed, _ = block(x, mask=causal_mask(L))
        assert not torch.allclose(unwindowed, theirs, atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"norm": RMSNorm}, "got ln1=RMSNorm, ln2=RMSNorm"),
        ({"post_norm": nn.LayerNorm}, "got post_attn_norm, post_mlp_norm"),
        ({"mlp": GatedMLP(12, 20)}, "got mlp=GatedMLP"),
    ],
)
def test_block_to_torch_refuses_parts_pytorch_lacks(kwargs, match):
    """The converter accepts by allow-list: a part nn.TransformerEncoderLayer lacks fails."""
    from attnlib.convert import block_to_torch

    with pytest.raises(ValueError, match=f"block must have the default parts .* {match}"):
        block_to_torch(TransformerBlock(12, 3, **kwargs))


def test_language_model_refuses_one_mlp_for_every_layer():
    with pytest.raises(ValueError, match="mlp must not be a model option .* got mlp=GatedMLP"):
        LanguageModel(30, 12, 3, 2, max_len=8, mlp=GatedMLP(12, 20))
