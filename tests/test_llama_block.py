"""A LLaMA decoder layer is one composition of attnlib's parts (issue 49), proven equal to
``transformers``' ``LlamaDecoderLayer`` and ``LlamaForCausalLM`` on small random configurations
made offline (no model hub).

The layer is ``TransformerBlock(E, attn=MultiHeadAttention(E, H, num_kv_heads=G, head_dim=D,
positions=Rotary(rope_theta), bias=attention_bias), mlp=GatedMLP(E, intermediate_size,
activation="silu", bias=mlp_bias), norm=lambda d: RMSNorm(d, eps=rms_norm_eps))``: no new
module. :func:`llama_block_from_hf` copies a layer's weights into it (``q_proj`` and ``k_proj``
rows, and their biases, permuted from rotate-half RoPE to attnlib's consecutive pairs); the
whole model is ``LanguageModel(block=..., norm=..., positions="rope")``.

Every size differs from every other (``E = 30``, ``H = 6``, ``G = 2``, ``D = 8 != E / H``,
``intermediate_size = 44``, ``V = 61``, ``L = 9``, ``N = 3``), so a transposed or swapped
size fails; ``rope_theta = 5e5`` and ``rms_norm_eps = 1e-3`` are not the defaults, and the
comparison is shown to see them (another base or eps gives other numbers).

Precision. ``transformers`` keeps three islands of float32 inside a float64 model: its
RMSNorm casts to float32, its RoPE angles are float32, and its eager softmax runs in float32.
Unpatched, float64 therefore agrees only to float32's precision (measured: 5e-7 relative to
the largest magnitude, 3e-6 on logits up to 6.5). With those three lifted to "at least
float32" (:func:`exact_float64`, each a copy of ``transformers``' code with that one change, a
no-op in float32), float64 agrees to 1e-12 relative to the largest magnitude (measured: at
most 1.3e-15 relative, 1.8e-14 absolute on layer outputs up to 25). float32 agrees to 1e-5
relative to the largest magnitude (measured: 7e-7 relative; 2.3e-5 absolute on layer outputs
up to 34, 5.4e-6 on logits up to 7.4).

Not tested: a padded batch (attnlib's ``LanguageModel`` has no padding mask), RoPE scaling
(``rope_type`` other than ``"default"``: refused by the helper), ``pretraining_tp``.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attnlib import (  # noqa: E402
    GatedMLP,
    LanguageModel,
    MultiHeadAttention,
    RMSNorm,
    TransformerBlock,
    causal_mask,
)
from attnlib.positions import Rotary, rotate_half_to_pairs  # noqa: E402

V, E, H, G, D, HIDDEN = 61, 30, 6, 2, 8, 44  # all different; D != E / H = 5
N, L, NEW = 3, 9, 8
THETA, EPS = 5e5, 1e-3  # not the defaults (10^4, 1e-6)
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
DTYPES = [torch.float32, torch.float64]
BIASES = [
    pytest.param({}, id="no-bias"),
    pytest.param({"attention_bias": True}, id="attention-bias"),
    pytest.param({"attention_bias": True, "mlp_bias": True}, id="attention-and-mlp-bias"),
]


def assert_near(ours, theirs, dtype, msg=None):
    """Equal within ``TOL[dtype]`` relative to each element and to the largest magnitude."""
    tol = TOL[dtype]
    atol = tol * max(1.0, theirs.abs().max().item())
    torch.testing.assert_close(ours, theirs, rtol=tol, atol=atol, msg=msg)


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


@pytest.fixture
def llama(transformers):
    from transformers.models.llama import modeling_llama

    return modeling_llama


def llama_config(transformers, *, layers=1, attn="eager", **kwargs):
    """A small LLaMA: grouped keys, ``head_dim != E / H``, RoPE base ``THETA``, eps ``EPS``,
    no EOS (``generate`` runs its ``NEW`` tokens)."""
    options = dict(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=D,
        intermediate_size=HIDDEN,
        num_hidden_layers=layers,
        rope_parameters={"rope_type": "default", "rope_theta": THETA},
        rms_norm_eps=EPS,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=None,
        attn_implementation=attn,
    )
    return transformers.LlamaConfig(**(options | kwargs))


def randomize(module, seed=0):
    """Every parameter drawn from N(0, 0.5^2), norm scales and biases too (a forgotten bias, a
    swapped norm or an unpermuted row shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return module


# --- the weight mapping ------------------------------------------------------------------


def llama_block(config) -> TransformerBlock:
    """An empty LLaMA decoder layer of attnlib's parts, sized by a ``LlamaConfig``."""
    rope = config.rope_parameters
    if rope["rope_type"] != "default" or config.hidden_act != "silu":
        raise ValueError(f"plain RoPE and SiLU only; got {rope}, {config.hidden_act!r}")
    E, H = config.hidden_size, config.num_attention_heads
    eps = config.rms_norm_eps
    attn = MultiHeadAttention(
        E,
        H,
        num_kv_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        positions=Rotary(rope["rope_theta"]),
        bias=config.attention_bias,  # q, k, v and o, as attention_bias
        dropout=config.attention_dropout,
    )
    mlp = GatedMLP(E, config.intermediate_size, activation="silu", bias=config.mlp_bias)
    return TransformerBlock(E, attn=attn, mlp=mlp, norm=lambda dim: RMSNorm(dim, eps=eps))


def llama_state(layer, config) -> dict:
    """A ``LlamaDecoderLayer``'s tensors under the names of :func:`llama_block`'s state dict::

    input_layernorm              ln1
    self_attn.{q,k}_proj         attn.{q,k}_proj    (rows and bias permuted to pairs)
    self_attn.v_proj             attn.v_proj
    self_attn.o_proj             attn.out_proj
    post_attention_layernorm     ln2
    mlp.{gate,up,down}_proj      mlp.{gate,up,down}_proj
    """
    heads = {"q_proj": config.num_attention_heads, "k_proj": config.num_key_value_heads}
    state = {}
    for name, tensor in layer.state_dict().items():
        if name.startswith("self_attn."):
            _, proj, kind = name.split(".")
            if proj in heads:
                tensor = rotate_half_to_pairs(tensor, heads[proj])  # weight or bias
            state[f"attn.{'out_proj' if proj == 'o_proj' else proj}.{kind}"] = tensor
        elif name.startswith("mlp."):
            state[name] = tensor
        else:
            ln = {"input_layernorm": "ln1", "post_attention_layernorm": "ln2"}[name.split(".")[0]]
            state[f"{ln}.weight"] = tensor
    return state


def llama_block_from_hf(layer, config) -> TransformerBlock:
    """``layer`` (a ``LlamaDecoderLayer``) as an attnlib :class:`TransformerBlock`, in its dtype
    and mode: every tensor has a place and every place a tensor (``strict=True``)."""
    dtype = layer.input_layernorm.weight.dtype
    block = llama_block(config).to(dtype)
    block.load_state_dict(llama_state(layer, config), strict=True)
    return block.train(layer.training)


def llama_from_hf(hf) -> LanguageModel:
    """``hf`` (a ``LlamaForCausalLM``) as ``LanguageModel(block=..., norm=...,
    positions="rope")``. The weights are copied after the model is made: its constructor draws
    every ``nn.Linear`` of the blocks afresh (GPT-2's initialisation)."""
    config = hf.config
    eps = config.rms_norm_eps
    lm = LanguageModel(
        config.vocab_size,
        config.hidden_size,
        config.num_attention_heads,
        config.num_hidden_layers,
        max_len=config.max_position_embeddings,
        positions="rope",  # inside each block's attention: nothing added to the embeddings
        tie_weights=config.tie_word_embeddings,
        block=lambda i: llama_block(config),
        norm=lambda dim: RMSNorm(dim, eps=eps),
    ).to(hf.model.embed_tokens.weight.dtype)
    state = {
        "token_embedding.weight": hf.model.embed_tokens.weight,
        "ln_f.weight": hf.model.norm.weight,
        "lm_head.weight": hf.lm_head.weight,
    }
    for i, layer in enumerate(hf.model.layers):
        state |= {f"blocks.{i}.{k}": v for k, v in llama_state(layer, config).items()}
    lm.load_state_dict(state, strict=True)
    return lm.eval()


# --- float64 without transformers' float32 islands -----------------------------------------


def _rmsnorm_at_least_float32(self, hidden_states):
    """``LlamaRMSNorm.forward`` with ``torch.float32`` made "at least float32"."""
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.promote_types(input_dtype, torch.float32))
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
    return self.weight * hidden_states.to(input_dtype)


def _rope_at_least_float32(self, x, position_ids):
    """``LlamaRotaryEmbedding.forward`` (default RoPE) with the inverse frequencies and the
    angles in at least float32."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    base, dim = self.config.rope_parameters["rope_theta"], self.config.head_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=dtype, device=x.device) / dim))
    freqs = position_ids[..., None].to(dtype) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _eager_at_least_float32(
    module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs
):
    """``eager_attention_forward`` with the softmax in at least float32."""
    from transformers.models.llama.modeling_llama import repeat_kv

    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    dtype = torch.promote_types(query.dtype, torch.float32)
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=dtype).to(query.dtype)
    attn_weights = F.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous(), attn_weights


@pytest.fixture
def exact_float64(llama, monkeypatch):
    """``exact_float64(dtype)``: for float64, ``transformers``' LLaMA with its three float32
    casts lifted (RMSNorm, RoPE, eager softmax); for float32, untouched."""

    def lift(dtype):
        if dtype == torch.float64:
            monkeypatch.setattr(llama.LlamaRMSNorm, "forward", _rmsnorm_at_least_float32)
            monkeypatch.setattr(llama.LlamaRotaryEmbedding, "forward", _rope_at_least_float32)
            monkeypatch.setattr(llama, "eager_attention_forward", _eager_at_least_float32)

    return lift


def rope(config, x, position_ids):
    """The ``(cos, sin)`` a ``LlamaModel`` hands its layers (patched or not)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(config)(x, position_ids)


def layer_pair(transformers, dtype, seed=6, **config):
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    cfg = llama_config(transformers, **config)
    layer = randomize(LlamaDecoderLayer(cfg, layer_idx=0), seed).to(dtype).eval()
    return cfg, layer, llama_block_from_hf(layer, cfg)


def model_pair(transformers, dtype, seed=8, layers=3, **config):
    cfg = llama_config(transformers, layers=layers, **config)
    hf = randomize(transformers.LlamaForCausalLM(cfg), seed).to(dtype).eval()
    return hf, llama_from_hf(hf)


def random_x(dtype, seed=7, length=L):
    return torch.randn(N, length, E, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def random_ids(seed=9, n=N, length=L):
    return torch.randint(0, V, (n, length), generator=torch.Generator().manual_seed(seed))


def run_layer(layer, cfg, x, attention_mask):
    position_ids = torch.arange(x.shape[1]).expand(x.shape[0], -1)  # (N, L)
    with torch.no_grad():
        out = layer(
            x,
            attention_mask=attention_mask,
            position_ids=position_ids,
            position_embeddings=rope(cfg, x, position_ids),
        )
    return out[0] if isinstance(out, tuple) else out  # (N, L, E)


def additive_causal(dtype, n=N, length=L):
    """``transformers``' eager 4-D mask: 0 where a query may attend, the dtype's min above the
    diagonal, ``(N, 1, L, L)``."""
    blocked = torch.full((length, length), torch.finfo(dtype).min, dtype=dtype).triu(1)
    return blocked.expand(n, 1, length, length)


# --- the decoder layer ---------------------------------------------------------------------


@pytest.mark.parametrize("bias", BIASES)
def test_llama_layer_is_one_composition_of_attnlib_parts(transformers, bias):
    cfg, layer, block = layer_pair(transformers, torch.float32, **bias)
    assert type(block) is TransformerBlock and type(block.attn) is MultiHeadAttention
    attn = block.attn
    assert (attn.embed_dim, attn.num_heads, attn.num_kv_heads, attn.head_dim) == (E, H, G, D)
    assert attn.positions == Rotary(THETA) and attn.bias == cfg.attention_bias
    assert type(block.mlp) is GatedMLP and block.mlp.activation == "silu"
    assert block.mlp.hidden == HIDDEN
    assert (block.mlp.down_proj.bias is not None) == cfg.mlp_bias
    assert type(block.ln1) is RMSNorm and type(block.ln2) is RMSNorm
    assert (block.ln1.eps, block.ln1.offset, block.ln2.eps) == (EPS, 0.0, EPS)
    assert block.post_attn_norm is None and block.post_mlp_norm is None
    # the same parameters, tensor for tensor: nothing added, nothing left out
    ours = sorted(p.numel() for p in block.parameters())
    assert ours == sorted(p.numel() for p in layer.parameters())
    assert attn.q_proj.weight.shape == (H * D, E) and attn.k_proj.weight.shape == (G * D, E)
    assert attn.out_proj.weight.shape == (E, H * D)
    # the permutation moved the rows (a test that forgot it would still pass the shapes)
    assert not torch.equal(attn.q_proj.weight, layer.self_attn.q_proj.weight)
    assert torch.equal(attn.v_proj.weight, layer.self_attn.v_proj.weight)
    if cfg.attention_bias:
        theirs = layer.self_attn.k_proj.bias
        assert torch.equal(attn.k_proj.bias, theirs.view(G, 2, D // 2).transpose(1, 2).flatten())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", BIASES)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_llama_decoder_layer_equals_transformers(transformers, exact_float64, attn, bias, dtype):
    """Eager attention takes the causal mask as a 4-D additive mask; SDPA gets ``None`` and
    makes the layer causal itself (``is_causal``). attnlib's block gets ``causal_mask(L)``."""
    exact_float64(dtype)
    cfg, layer, block = layer_pair(transformers, dtype, attn=attn, **bias)
    x = random_x(dtype)
    mask = additive_causal(dtype) if attn == "eager" else None
    theirs = run_layer(layer, cfg, x, mask)
    with torch.no_grad():
        ours, _ = block(x, mask=causal_mask(L))
    assert theirs.abs().max() > 1  # not a vanishing comparison
    assert_near(ours, theirs, dtype)
    with torch.no_grad():  # the mask matters: without it, other numbers
        assert not torch.allclose(block(x)[0], theirs, atol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_layer_without_mask_attends_both_ways(transformers, exact_float64, dtype):
    """``transformers``' eager layer given no mask is not causal (the model makes the mask);
    attnlib's block given none is not either: the same numbers, unlike the causal ones."""
    exact_float64(dtype)
    cfg, layer, block = layer_pair(transformers, dtype)
    x = random_x(dtype)
    theirs = run_layer(layer, cfg, x, None)
    with torch.no_grad():
        ours, _ = block(x)
        causal, _ = block(x, mask=causal_mask(L))
    assert_near(ours, theirs, dtype)
    assert not torch.allclose(causal, theirs, atol=1e-3)
    assert_near(causal[:, -1], theirs[:, -1], dtype)  # the last query sees every key anyway


def test_float64_without_the_lift_agrees_to_float32_precision_only(transformers):
    """The reason for :func:`exact_float64`: ``transformers``' float64 layer, unpatched, differs
    from attnlib's (all float64) by float32 rounding, far above 1e-12 and below 1e-5."""
    cfg, layer, block = layer_pair(transformers, torch.float64)
    x = random_x(torch.float64)
    theirs = run_layer(layer, cfg, x, additive_causal(torch.float64))
    with torch.no_grad():
        ours, _ = block(x, mask=causal_mask(L))
    gap = (ours - theirs).abs().max().item() / theirs.abs().max().item()
    assert 1e-10 < gap < 1e-5


@pytest.mark.parametrize(
    "change",
    ["rope-base-10000", "eps-1e-6", "q-k-rows-unpermuted", "biases-dropped"],
)
def test_layer_comparison_sees_theta_eps_permutation_and_biases(transformers, change):
    """The equality above is not luck: each of these changes to the attnlib block gives other
    numbers, far outside the tolerance."""
    cfg, layer, block = layer_pair(transformers, torch.float64, attention_bias=True)
    x = random_x(torch.float64)
    theirs = run_layer(layer, cfg, x, additive_causal(torch.float64))
    attn = block.attn
    with torch.no_grad():
        before, _ = block(x, mask=causal_mask(L))
        assert_near(before, theirs, torch.float32)  # unpatched float64: float32's agreement
        if change == "rope-base-10000":
            attn.positions = Rotary(10000.0)
        elif change == "eps-1e-6":
            block.ln1.eps = block.ln2.eps = 1e-6
        elif change == "q-k-rows-unpermuted":
            attn.q_proj.weight.copy_(layer.self_attn.q_proj.weight)
            attn.k_proj.weight.copy_(layer.self_attn.k_proj.weight)
            attn.q_proj.bias.copy_(layer.self_attn.q_proj.bias)
            attn.k_proj.bias.copy_(layer.self_attn.k_proj.bias)
        else:
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj):
                proj.bias.zero_()
        ours, _ = block(x, mask=causal_mask(L))
    gap = (ours - theirs).abs().max().item()
    assert gap > 1e-4, f"{change} left the numbers within {gap:.1e}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_layer_decodes_with_attnlib_cache(transformers, exact_float64, dtype):
    """Feeding the layer one position at a time through attnlib's ``KVCache`` (positions from
    the cache, keys kept unrotated) gives ``transformers``' whole-sequence output."""
    exact_float64(dtype)
    cfg, layer, block = layer_pair(transformers, dtype, attention_bias=True)
    x = random_x(dtype)
    theirs = run_layer(layer, cfg, x, additive_causal(dtype))
    cache = block.attn.new_cache()
    with torch.no_grad():
        steps = [block(x[:, t : t + 1], cache=cache)[0] for t in range(L)]
    assert_near(torch.cat(steps, dim=1), theirs, dtype)


# --- the whole model -----------------------------------------------------------------------


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_llama_model_is_made_of_attnlib_parts(transformers, tied):
    hf, lm = model_pair(transformers, torch.float32, tie_word_embeddings=tied)
    assert isinstance(lm, LanguageModel) and lm.num_layers == 3 and not lm.training
    assert lm.position_embedding is None and lm.embed_scale is None
    assert all(type(b.attn) is MultiHeadAttention for b in lm.blocks)
    assert type(lm.ln_f) is RMSNorm and lm.ln_f.eps == EPS
    assert (lm.lm_head.weight is lm.token_embedding.weight) == tied
    assert (hf.lm_head.weight is hf.model.embed_tokens.weight) == tied
    n_ours = sum(p.numel() for p in lm.parameters())
    assert n_ours == sum(p.numel() for p in hf.parameters())  # tied: counted once in both


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("bias", [BIASES[0], BIASES[2]])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_llama_logits_equal_transformers(transformers, exact_float64, attn, bias, tied, dtype):
    exact_float64(dtype)
    hf, lm = model_pair(transformers, dtype, attn=attn, tie_word_embeddings=tied, **bias)
    assert lm.token_embedding.weight.dtype == dtype
    ids = random_ids()
    with torch.no_grad():
        theirs = hf(ids).logits  # (N, L, V)
        ours, _ = lm(ids)
    assert theirs.abs().max() > 1
    assert_near(ours, theirs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_hidden_states_equal_transformers(transformers, exact_float64, dtype):
    """Every layer's input (read with pre-hooks on each block's ``ln1``) and the final norm's
    output are ``transformers``' ``hidden_states``: the embeddings, the outputs of layers 0 and
    1, and the last layer's output normalised."""
    exact_float64(dtype)
    hf, lm = model_pair(transformers, dtype)
    ids = random_ids()
    streams = []
    hooks = [b.ln1.register_forward_pre_hook(lambda m, a: streams.append(a[0])) for b in lm.blocks]
    hooks.append(lm.ln_f.register_forward_hook(lambda m, a, out: streams.append(out)))
    try:
        with torch.no_grad():
            theirs = hf(ids, output_hidden_states=True).hidden_states  # 4 of (N, L, E)
            lm(ids)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(theirs) == len(streams) == 4
    for i, (ours, hf_state) in enumerate(zip(streams, theirs, strict=True)):
        assert_near(ours, hf_state, dtype, msg=f"hidden state {i}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_model_is_causal_as_transformers(transformers, exact_float64, dtype):
    """Changing the last token changes only the last position's logits, in both models, and
    the two still agree."""
    exact_float64(dtype)
    hf, lm = model_pair(transformers, dtype)
    ids = random_ids()
    other = ids.clone()
    other[:, -1] = (ids[:, -1] + 1) % V
    with torch.no_grad():
        ours, theirs = lm(ids)[0], hf(ids).logits
        ours2, theirs2 = lm(other)[0], hf(other).logits
    assert torch.equal(ours2[:, :-1], ours[:, :-1])  # the earlier positions never see it
    assert_near(theirs2[:, :-1], theirs[:, :-1], dtype)
    assert not torch.allclose(ours2[:, -1], ours[:, -1], atol=1e-3)
    assert_near(ours2, theirs2, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_cached_steps_give_transformers_logits(transformers, exact_float64, dtype):
    exact_float64(dtype)
    hf, lm = model_pair(transformers, dtype, attention_bias=True)
    ids = random_ids(seed=3, length=L + 4)
    cache = lm.new_cache()
    with torch.no_grad():
        theirs = hf(ids).logits  # (N, L + 4, V)
        steps = [lm(ids[:, t : t + 1], cache=cache)[0] for t in range(ids.shape[1])]
        prompt, _ = lm(ids[:, :L], cache=(c := lm.new_cache()))  # a prompt, then steps
        rest = [lm(ids[:, t : t + 1], cache=c)[0] for t in range(L, ids.shape[1])]
    assert_near(torch.cat(steps, dim=1), theirs, dtype)
    assert_near(torch.cat([prompt, *rest], dim=1), theirs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("length", [1, L], ids=["one-token-prompt", "prompt"])
def test_llama_greedy_generation_equals_transformers(transformers, length, tied, dtype):
    """Greedy decoding with attnlib's cache gives ``generate(do_sample=False)`` token for token
    (and so does attnlib without a cache)."""
    hf, lm = model_pair(transformers, dtype, tie_word_embeddings=tied, attention_bias=True)
    ids = random_ids(seed=2, length=length)
    with torch.no_grad():
        theirs = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, do_sample=False
        )  # (N, length + NEW)
    ours = lm.generate(ids, NEW, temperature=0)
    assert theirs.shape == (N, length + NEW)
    assert torch.equal(ours, theirs)
    assert torch.equal(lm.generate(ids, NEW, temperature=0, use_cache=False), theirs)
    # not a constant sequence: the comparison sees the tokens
    assert len(set(theirs[:, length:].flatten().tolist())) > 2


def test_llama_block_refuses_scaled_rope(transformers):
    cfg = llama_config(
        transformers, rope_parameters={"rope_type": "linear", "rope_theta": THETA, "factor": 2.0}
    )
    with pytest.raises(ValueError, match="plain RoPE and SiLU only"):
        llama_block(cfg)
