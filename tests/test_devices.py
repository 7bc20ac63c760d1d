"""Every kernel and module of attnlib on every device at hand, against the same call on the CPU.

The ``device`` parameter is ``"cpu"`` and ``"cuda"``; without a CUDA device the ``cuda`` cases
are skipped, saying why (``make gpu-check`` runs only them, and fails when there is no GPU).
Each case builds its inputs on the CPU, runs the call there and on ``device``, and asserts
that the result stays on ``device`` and equals the CPU's (TF32 is switched off, so float32
matmuls on an NVIDIA GPU are float32). Sizes are all different (E=12, H=3, L=5, S=7), masks
of every shape are used, and need_weights, caches and tiles take their own paths.
"""

from __future__ import annotations

import pytest
import torch
from attnlib import (
    LanguageModel,
    ModelCache,
    ModernAttention,
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    SelfAttention,
    TransformerBlock,
    attention_weights,
    causal_mask,
    cosine_matrix,
    scaled_dot_product_attention,
    softmax,
)
from attnlib.decoding import (
    KVCache,
    PreallocatedCache,
    RollingCache,
    SinkCache,
    sliding_window_mask,
)
from attnlib.efficient import tiled_attention
from attnlib.encoder import Encoder
from attnlib.latent import MultiHeadLatentAttention
from attnlib.linear_attention import (
    LinearAttention,
    delta_rule_chunked,
    linear_attention_chunked,
)
from attnlib.paged import BlockPool, PagedModelCache
from attnlib.positions import alibi_bias, rotary_embedding, sinusoidal_encoding
from attnlib.seq2seq import AdditiveAttention, EncoderDecoder

E, H, N, L, S = 12, 3, 2, 5, 7
CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not CUDA, reason="no CUDA device (torch.cuda.is_available() is False)"
        ),
    ),
]
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch.device(request.param)


def _to(value, device):
    """``value`` with every tensor in it (tuples, lists, dicts) moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _same(on_device, on_cpu, device):
    """Tensors (or nested tuples/lists of them, or None) equal, each on ``device``."""
    if on_cpu is None:
        assert on_device is None
        return
    if isinstance(on_cpu, (tuple, list)):
        assert len(on_device) == len(on_cpu)
        for a, b in zip(on_device, on_cpu):
            _same(a, b, device)
        return
    assert on_device.device.type == device.type, f"result on {on_device.device}, not {device}"
    torch.testing.assert_close(on_device.cpu(), on_cpu, **TOL)


def _masks():
    g = torch.Generator().manual_seed(1)
    padding = torch.rand(N, 1, 1, S, generator=g) > 0.3
    padding[..., 0] = True  # every row attends somewhere
    return {
        "none": None,
        "(L, S) bool": causal_mask(L, S),
        "(N, 1, 1, S) bool": padding,
        "(L, S) float": torch.randn(L, S, generator=g),
    }


def qkv():
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(N, H, L, 4, generator=g),
        torch.randn(N, H, S, 4, generator=g),
        torch.randn(N, H, S, 6, generator=g),
    )


@pytest.mark.parametrize("mask", list(_masks()))
def test_kernels(device, mask):
    q, k, v = qkv()
    m = _masks()[mask]
    calls = {
        "sdpa": lambda q, k, v, m: scaled_dot_product_attention(q, k, v, mask=m),
        "weights": lambda q, k, v, m: attention_weights(q, k, mask=m),
        "tiled": lambda q, k, v, m: tiled_attention(q, k, v, mask=m, block_size=3),
    }
    for call in calls.values():
        _same(call(*_to((q, k, v, m), device)), call(q, k, v, m), device)


def test_causal_paths(device):
    q, k, v = qkv()
    k, v = k[:, :, :L], v[:, :, :L]
    for call in (
        lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: tiled_attention(q, k, v, is_causal=True, block_size=2),
    ):
        _same(call(*_to((q, k, v), device)), call(q, k, v), device)


def test_small_functions(device):
    x = torch.randn(N, L, E)
    _same(softmax(x.to(device)), softmax(x), device)
    _same(cosine_matrix(x[0].to(device), x[1].to(device)), cosine_matrix(x[0], x[1]), device)
    _same(rotary_embedding(x.to(device)), rotary_embedding(x), device)
    assert causal_mask(L, S, device=device).device.type == device.type
    assert sliding_window_mask(L, 2, S, device=device).device.type == device.type
    _same(alibi_bias(H, L, S, device=device), alibi_bias(H, L, S), device)
    enc = sinusoidal_encoding(L, E, device=device)
    _same(enc, sinusoidal_encoding(L, E), device)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask", ["none", "(L, S) bool", "(L, S) float"])
def test_multihead(device, cls, need_weights, mask):
    torch.manual_seed(0)
    module = cls(E, H, bias=True, kdim=10, vdim=8).eval()
    x, key, value = torch.randn(N, L, E), torch.randn(N, S, 10), torch.randn(N, S, 8)
    m = _masks()[mask]
    on_cpu = module(x, key, value, mask=m, need_weights=need_weights)
    moved = module.to(device)
    _same(
        moved(*_to((x, key, value), device), mask=_to(m, device), need_weights=need_weights),
        on_cpu,
        device,
    )


@pytest.mark.parametrize("positions", [None, "rope", "alibi"])
def test_grouped_query_and_positions(device, positions):
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, num_kv_heads=2, positions=positions).eval()  # D = 4
    x = torch.randn(N, L, 16)
    on_cpu = module(x, mask=causal_mask(L))
    _same(module.to(device)(x.to(device), mask=causal_mask(L, device=device)), on_cpu, device)


def test_self_attention(device):
    torch.manual_seed(0)
    module = SelfAttention(E, head_dim=5, bias=True).eval()
    x = torch.randn(N, L, E)
    _same(module.to(device)(x.to(device)), module.cpu()(x), device)


def test_block_with_cache(device):
    """A block on the whole sequence equals the block fed one token at a time from a cache."""
    torch.manual_seed(0)
    block = TransformerBlock(E, H).eval()
    x = torch.randn(N, L, E)
    whole_cpu, _ = block(x, mask=causal_mask(L))
    block.to(device)
    cache = KVCache()
    steps = [block(x[:, i : i + 1].to(device), cache=cache)[0] for i in range(L)]
    _same(torch.cat(steps, dim=1), whole_cpu, device)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi"])
def test_language_model(device, positions):
    torch.manual_seed(0)
    model = LanguageModel(23, E, H, 2, max_len=16, positions=positions).eval()
    ids = torch.randint(0, 23, (N, L))
    logits_cpu, weights_cpu = model(ids, need_weights=True)
    model.to(device)
    logits, weights = model(ids.to(device), need_weights=True)
    _same((logits, weights), (logits_cpu, weights_cpu), device)
    cache = ModelCache(model.num_layers)
    cached = [model(ids[:, i : i + 1].to(device), cache=cache)[0] for i in range(L)]
    _same(torch.cat(cached, dim=1), logits_cpu, device)


def test_generate(device):
    torch.manual_seed(0)
    model = LanguageModel(23, E, H, 2, max_len=16).eval()
    prompt = torch.randint(0, 23, (1, 3))
    greedy_cpu = model.generate(prompt, 6, temperature=0)
    greedy = model.to(device).generate(prompt.to(device), 6, temperature=0)
    assert greedy.device.type == device.type
    assert torch.equal(greedy.cpu(), greedy_cpu)
    sampled = model.generate(
        prompt.to(device), 4, top_k=5, generator=torch.Generator(device).manual_seed(0)
    )
    assert sampled.shape == (1, 7) and sampled.device.type == device.type


def test_backward(device):
    """Gradients flow on the device as on the CPU (training runs there too)."""
    torch.manual_seed(0)
    model = LanguageModel(23, E, H, 2, max_len=16)
    ids = torch.randint(0, 23, (N, L))
    model(ids)[0].sum().backward()
    grads_cpu = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to(device)
    model(ids.to(device))[0].sum().backward()
    _same([p.grad for p in model.parameters()], grads_cpu, device)


@pytest.mark.parametrize(
    "option", [{"qk_norm": True}, {"softcap": 2.0}, {"sink": True}, {"gate": True}]
)
def test_attention_variants(device, option):
    """QK-norm, the soft cap, the sink logit and the output gate (random sink and gate)."""
    torch.manual_seed(0)
    module = ModernAttention(E, H, num_kv_heads=1, positions="rope", **option).eval()
    for p in module.parameters():
        p.data.add_(0.1 * torch.randn_like(p))  # the sink and the norms away from their init
    x = torch.randn(N, L, E)
    on_cpu = module(x, mask=causal_mask(L), need_weights=True), module.scores(x)
    module.to(device)
    moved = _to(x, device)
    _same(
        (
            module(moved, mask=causal_mask(L, device=device), need_weights=True),
            module.scores(moved),
        ),
        on_cpu,
        device,
    )


def test_linear_attention_forms(device):
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(N, H, 11, 4, generator=g) for _ in range(3))
    beta = torch.rand(N, H, 11, generator=g)
    alpha = 0.5 + 0.5 * torch.rand(N, H, 11, generator=g)
    qn, kn = torch.nn.functional.normalize(q, dim=-1), torch.nn.functional.normalize(k, dim=-1)
    on_cpu = (
        linear_attention_chunked(q, k, v, chunk_size=4),
        delta_rule_chunked(qn, kn, v, beta, decay=alpha, chunk_size=4),
    )
    moved = _to((q, k, v, qn, kn, beta, alpha), device)
    _same(
        (
            linear_attention_chunked(*moved[:3], chunk_size=4),
            delta_rule_chunked(*moved[3:5], moved[2], moved[5], decay=moved[6], chunk_size=4),
        ),
        on_cpu,
        device,
    )


@pytest.mark.parametrize("rule", ["linear", "delta", "gated_delta"])
def test_linear_attention_layer(device, rule):
    """The layer forward and backward (the training path) on the device."""
    torch.manual_seed(0)
    module = LinearAttention(E, H, rule=rule, chunk_size=4, bias=True)
    x = torch.randn(N, 9, E)
    out = module(x)
    out.square().sum().backward()
    on_cpu = [out.detach()] + [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    module.to(device)
    out = module(x.to(device))
    out.square().sum().backward()
    _same([out.detach()] + [p.grad for p in module.parameters()], on_cpu, device)


def test_latent_attention_with_cache(device):
    """Multi-head latent attention (decoupled RoPE) whole, and one token at a time from a cache."""
    torch.manual_seed(0)
    module = MultiHeadLatentAttention(E, H, latent_dim=6, rope_dim=2, bias=True).eval()
    x = torch.randn(N, L, E)
    on_cpu, _ = module(x, mask=causal_mask(L))
    module.to(device)
    cache = KVCache()
    steps = [module(x[:, i : i + 1].to(device), cache=cache)[0] for i in range(L)]
    _same(torch.cat(steps, dim=1), on_cpu, device)


CACHES = {
    "preallocated": lambda: [PreallocatedCache(16) for _ in range(2)],
    "rolling": lambda: [RollingCache(3) for _ in range(2)],
    "sink": lambda: [SinkCache(3, sinks=1) for _ in range(2)],
    "paged": lambda: [BlockPool(8, 2) for _ in range(2)],
}


@pytest.mark.parametrize("kind", list(CACHES))
def test_cache_classes(device, kind):
    """A model fed one token at a time through each cache class: the CPU's logits."""
    torch.manual_seed(0)
    window = 3 if kind == "rolling" else None
    model = LanguageModel(23, E, H, 2, max_len=16, positions="rope", window=window).eval()
    ids = torch.randint(0, 23, (1, 7))

    def run(where):
        made = CACHES[kind]()
        cache = PagedModelCache(made) if kind == "paged" else ModelCache(made)
        steps = [model.to(where)(ids[:, i : i + 1].to(where), cache=cache)[0] for i in range(7)]
        return torch.cat(steps, dim=1)

    on_cpu = run(torch.device("cpu"))
    _same(run(device), on_cpu, device)


def test_encoder(device):
    """The BERT-style encoder with a padding mask and every layer's weights."""
    torch.manual_seed(0)
    model = Encoder(31, E, H, 2, max_len=16).eval()
    ids = torch.randint(0, 31, (N, L))
    attention_mask = torch.ones(N, L, dtype=torch.long)
    attention_mask[1, 3:] = 0
    on_cpu = model(ids, attention_mask=attention_mask, need_weights=True)
    model.to(device)
    _same(
        model(*_to((ids,), device), attention_mask=attention_mask.to(device), need_weights=True),
        on_cpu,
        device,
    )


def test_additive_attention(device):
    torch.manual_seed(0)
    module = AdditiveAttention(6, 8, 5, bias=True)
    q, k = torch.randn(N, L, 6), torch.randn(N, S, 8)
    mask = _masks()["(N, 1, 1, S) bool"][:, 0]  # (N, 1, S)
    on_cpu = module(q, k, k, mask=mask)
    module.to(device)
    _same(module(*_to((q, k, k), device), mask=mask.to(device)), on_cpu, device)


def test_encoder_decoder_and_its_generation(device):
    """Teacher forcing with every weight, then greedy generation with the cached cross keys
    and values and the decoder's KVCaches: the CPU's numbers and tokens."""
    torch.manual_seed(0)
    model = EncoderDecoder(19, 13, E, H, 2, 2, max_len=9).eval()
    source, target = torch.randint(0, 19, (N, S)), torch.randint(0, 13, (N, L))
    source_mask = torch.ones(N, S, dtype=torch.bool)
    source_mask[1, 4:] = False
    logits_cpu, weights_cpu = model(source, target, source_mask=source_mask, need_weights=True)
    ids_cpu = model.generate(source, 8, bos_id=1, source_mask=source_mask)
    model.to(device)
    moved = _to((source, target, source_mask), device)
    logits, weights = model(*moved[:2], source_mask=moved[2], need_weights=True)
    _same((logits, *weights.values()), (logits_cpu, *weights_cpu.values()), device)
    ids = model.generate(moved[0], 8, bos_id=1, source_mask=moved[2])
    assert ids.device.type == device.type and torch.equal(ids.cpu(), ids_cpu)


@pytest.mark.skipif(not CUDA, reason="no CUDA device (torch.cuda.is_available() is False)")
def test_language_model_training_steps_match_the_cpu():
    """scripts/train_odyssey.py's first 20 steps (dropout off: its masks differ between
    devices) give the CPU's losses on CUDA, step by step."""
    import train_odyssey as script

    data = script.Data(bpe=False)
    config = dict(script.BASE, dropout=0.0)
    settings = {k: config[k] for k in ("steps", "context", "batch_size", "lr", "weight_decay")}
    losses = []
    for where in ("cpu", "cuda"):
        model = script.make_model(config, len(data.vocab), 0, script.glove_matrix(data.vocab))
        ids = data.ids["words"]
        _, step_losses = script.train(
            model.to(where), ids["train"], ids["valid"], **settings, seed=0, stop_after=20
        )
        losses.append(torch.tensor(step_losses))
    torch.testing.assert_close(losses[1], losses[0], rtol=0, atol=1e-2)
