"""attnlib.seq2seq: Bahdanau's additive attention, the decoder block and the encoder-decoder.

Oracles: the additive score written out with einsum and a case by hand; PyTorch's
``nn.TransformerDecoderLayer`` and ``nn.Transformer`` (``norm_first=True``, GELU) with the
weights copied both ways and random biases; ``nn.MultiheadAttention`` and Keras'
``MultiHeadAttention`` for one cross-attention. Sizes all differ: N=2, E=12, H=3 (D=4), a
target of L=5, a source of S=7, an MLP of 20, vocabularies of 23 and 17.
"""

import math

import pytest
import torch
from attnlib import causal_mask
from attnlib.convert import (
    decoder_block_from_torch,
    decoder_block_to_torch,
    encoder_decoder_from_torch,
    encoder_decoder_to_torch,
    to_torch,
)
from attnlib.seq2seq import AdditiveAttention, DecoderBlock, EncoderDecoder
from torch import nn

N, E, H, L, S, FF = 2, 12, 3, 5, 7, 20
V_SRC, V_TGT = 23, 17


def randomize(module, seed=0):
    """Every parameter drawn again (biases and LayerNorm weights too), so none is 0 or 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def source_mask():
    mask = torch.ones(N, S, dtype=torch.bool)
    mask[1, 4:] = False  # the second source has 4 real tokens, then padding
    return mask


# ---- additive attention -----------------------------------------------------------------------
def test_additive_attention_equals_its_formula():
    torch.manual_seed(0)
    attn = randomize(AdditiveAttention(6, 8, 5, bias=True))
    q, k, v = torch.randn(N, 3, 6), torch.randn(N, 4, 8), torch.randn(N, 4, 9)
    hidden = torch.einsum("nla,nsa->nlsa", attn.q_proj(q), torch.ones(N, 4, 5))
    hidden = hidden + attn.k_proj(k).unsqueeze(1)  # (N, 3, 4, 5)
    scores = torch.einsum("nlsa,a->nls", torch.tanh(hidden), attn.v.weight[0])
    weights = torch.softmax(scores, dim=-1)
    out, w = attn(q, k, v)
    torch.testing.assert_close(w, weights)
    torch.testing.assert_close(out, weights @ v)


def test_additive_attention_by_hand():
    """W_q = W_k = I and v = (1, 1): e = tanh(q1 + k1) + tanh(q2 + k2)."""
    attn = AdditiveAttention(2, 2, 2).double()
    with torch.no_grad():
        attn.q_proj.weight.copy_(torch.eye(2))
        attn.k_proj.weight.copy_(torch.eye(2))
        attn.v.weight.fill_(1.0)
    q = torch.tensor([[[0.5, -1.0]]], dtype=torch.float64)
    k = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]], dtype=torch.float64)
    e = [math.tanh(1.5) + math.tanh(-1.0), math.tanh(0.5) + math.tanh(1.0)]
    expected = torch.softmax(torch.tensor(e, dtype=torch.float64), 0)
    _, w = attn(q, k, k)
    torch.testing.assert_close(w[0, 0], expected, rtol=1e-12, atol=1e-12)


def test_additive_attention_never_attends_to_padding():
    torch.manual_seed(0)
    attn = AdditiveAttention(6, 8, 5)
    q, k = torch.randn(N, 3, 6), torch.randn(N, S, 8)
    mask = source_mask().unsqueeze(1)  # (N, 1, S)
    out, w = attn(q, k, k, mask=mask)
    assert (w[1, :, 4:] == 0).all()
    k2 = k.clone()
    k2[1, 4:] = 100.0  # what hides behind the padding changes nothing
    torch.testing.assert_close(attn(q, k2, k2, mask=mask)[0], out)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda a: a(torch.randn(2, 3, 5), torch.randn(2, 4, 8), torch.randn(2, 4, 8)),
            ValueError,
            r"query must have shape \(N, ., 6\); got \(2, 3, 5\)",
        ),
        (
            lambda a: a(torch.randn(2, 3, 6), torch.randn(3, 4, 8), torch.randn(3, 4, 8)),
            ValueError,
            r"the same batch size N",
        ),
        (
            lambda a: a(torch.randn(3, 6), torch.randn(4, 8), torch.randn(4, 8)),
            ValueError,
            r"query must be",
        ),
        (
            lambda a: a(
                torch.randn(2, 3, 6),
                torch.randn(2, 4, 8),
                torch.randn(2, 4, 8),
                mask=torch.ones(2, 1, 4),
            ),
            TypeError,
            r"mask must be boolean",
        ),
        (
            lambda a: a(
                torch.randn(2, 3, 6),
                torch.randn(2, 4, 8),
                torch.randn(2, 4, 8),
                mask=torch.ones(2, 1, 5, dtype=torch.bool),
            ),
            ValueError,
            r"mask must have shape",
        ),
    ],
)
def test_additive_attention_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call(AdditiveAttention(6, 8, 5))


# ---- the decoder block against nn.TransformerDecoderLayer -------------------------------------
def torch_layer(dtype=torch.float32, bias=True):
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(
        E, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True, bias=bias
    )
    return randomize(layer).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_decoder_block_equals_pytorch_both_ways(dtype, bias):
    layer = torch_layer(dtype, bias)
    x, memory = torch.randn(N, L, E, dtype=dtype), torch.randn(N, S, E, dtype=dtype)
    causal = causal_mask(L)
    target_real = torch.tensor([[True] * L, [True] * 3 + [False] * 2])  # target padding
    source_real = source_mask()
    theirs = layer(
        x,
        memory,
        tgt_mask=~causal,
        tgt_key_padding_mask=~target_real,
        memory_key_padding_mask=~source_real,
    )
    block = decoder_block_from_torch(layer)
    mask = causal & target_real[:, None, :]  # (N, L, L)
    ours, _ = block(x, memory, mask=mask, memory_mask=source_real[:, None, None, :])
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {}
    real = target_real.unsqueeze(-1)  # rows of padded queries are not compared
    torch.testing.assert_close(ours * real, theirs * real, **tol)
    back = decoder_block_to_torch(block)
    for name, p in layer.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], p, rtol=0, atol=0)


def test_decoder_block_weights_and_cross_attention_shape():
    block = decoder_block_from_torch(torch_layer())
    x, memory = torch.randn(N, L, E), torch.randn(N, S, E)
    _, (self_w, cross_w) = block(
        x,
        memory,
        mask=causal_mask(L),
        memory_mask=source_mask()[:, None, None, :],
        need_weights=True,
    )
    assert self_w.shape == (N, H, L, L) and cross_w.shape == (N, H, L, S)
    assert (self_w.triu(1) == 0).all()  # causal
    assert (cross_w[1, :, :, 4:] == 0).all()  # padding
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(N, H, L))


def test_decoder_block_bad_inputs():
    block = DecoderBlock(E, H)
    x = torch.randn(N, L, E)
    with pytest.raises(
        ValueError, match=r"memory must have shape \(N, ., E=12\); got \(2, 7, 10\)"
    ):
        block(x, torch.randn(N, S, 10))
    with pytest.raises(ValueError, match=r"memory must have the batch size of x \(N=2\)"):
        block(x, torch.randn(3, S, E))
    with pytest.raises(ValueError, match=r"mask must have shape"):
        block(x, torch.randn(N, S, E), memory_mask=torch.ones(L, S + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mlp_ratio must give a hidden width"):
        DecoderBlock(E, H, mlp_ratio=0.0)
    with pytest.raises(TypeError, match=r"layer must be a torch.nn.TransformerDecoderLayer"):
        decoder_block_from_torch(nn.Linear(2, 2))
    post = nn.TransformerDecoderLayer(E, H, FF, activation="gelu", norm_first=False)
    with pytest.raises(ValueError, match=r"norm_first=True"):
        decoder_block_from_torch(post)
    relu = nn.TransformerDecoderLayer(E, H, FF, norm_first=True)
    with pytest.raises(ValueError, match=r'activation="gelu"'):
        decoder_block_from_torch(relu)
    with pytest.raises(ValueError, match=r'activation="gelu".*gelu_tanh'):
        decoder_block_to_torch(DecoderBlock(E, H, activation="gelu_tanh"))


# ---- the model against nn.Transformer ---------------------------------------------------------
def model(dtype=torch.float32, layers=(2, 3)):
    torch.manual_seed(0)
    m = EncoderDecoder(V_SRC, V_TGT, E, H, *layers, max_len=9, mlp_ratio=FF / E)
    return randomize(m).to(dtype).eval()


def ids(seed=1):
    g = torch.Generator().manual_seed(seed)
    source = torch.randint(0, V_SRC, (N, S), generator=g)
    target = torch.randint(0, V_TGT, (N, L), generator=g)
    return source, target


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_equals_nn_transformer_both_ways(dtype):
    m = model(dtype)
    source, target = ids()
    src_real = source_mask()
    tgt_real = torch.tensor([[True] * L, [True] * 3 + [False] * 2])
    ours, _ = m(source, target, source_mask=src_real, target_mask=tgt_real)
    core = encoder_decoder_to_torch(m)
    hidden = core(
        m.embed_source(source),
        m.embed_target(target),
        tgt_mask=~causal_mask(L),
        src_key_padding_mask=~src_real,
        tgt_key_padding_mask=~tgt_real,
        memory_key_padding_mask=~src_real,
    )
    theirs = m.lm_head(hidden)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    real = tgt_real.unsqueeze(-1)
    torch.testing.assert_close(ours * real, theirs * real, **tol)
    back = encoder_decoder_from_torch(core, source_vocab=V_SRC, target_vocab=V_TGT, max_len=9)
    back.load_state_dict(
        {
            **back.state_dict(),
            **{k: v for k, v in m.state_dict().items() if "embedding" in k or "lm_head" in k},
        }
    )
    torch.testing.assert_close(
        back(source, target, source_mask=src_real, target_mask=tgt_real)[0] * real,
        ours * real,
        **tol,
    )


def test_the_decoder_is_causal_and_padding_is_never_read():
    m = model()
    source, target = ids()
    mask = source_mask()
    logits, weights = m(source, target, source_mask=mask, need_weights=True)
    later = target.clone()
    later[:, 3:] = (later[:, 3:] + 1) % V_TGT
    torch.testing.assert_close(m(source, later, source_mask=mask)[0][:, :3], logits[:, :3])
    padded = source.clone()
    padded[1, 4:] = (padded[1, 4:] + 5) % V_SRC
    torch.testing.assert_close(m(padded, target, source_mask=mask)[0], logits)
    for w in weights["cross"]:
        assert (w[1, :, :, 4:] == 0).all()
    for w in weights["encoder"]:
        assert (w[1, :, :, 4:] == 0).all()
    assert [w.shape for w in weights["decoder"]] == [(N, H, L, L)] * 3


@pytest.mark.parametrize("eos_id", [None, 2])
def test_generate_with_the_cache_equals_recomputing(eos_id):
    m = model()
    source, _ = ids()
    mask = source_mask()
    cached = m.generate(source, 8, bos_id=1, eos_id=eos_id, source_mask=mask)
    again = m.generate(source, 8, bos_id=1, eos_id=eos_id, source_mask=mask, use_cache=False)
    assert torch.equal(cached, again)
    assert (cached[:, 0] == 1).all() and cached.shape[1] <= 9
    # greedy: each token is the argmax of the teacher-forced logits of the tokens before it
    logits, _ = m(source, cached[:, :-1], source_mask=mask)
    if eos_id is None:
        assert torch.equal(logits.argmax(-1), cached[:, 1:])
    assert m.cross_cache_nbytes(source) == 3 * 2 * N * S * E * 4


def test_generate_stops_at_eos():
    m = model()
    source, _ = ids()
    with torch.no_grad():
        m.lm_head.weight.zero_()
        m.lm_head.weight[2, :] = 1.0  # every logit of token 2 is the sum of the features...
        m.decoder_norm.weight.fill_(0.0)
        m.decoder_norm.bias.fill_(1.0)  # ...which is E after the final norm: eos at once
    out = m.generate(source, 8, bos_id=1, eos_id=2)
    assert out.tolist() == [[1, 2], [1, 2]]


# ---- padding on either side (issue 48) ----------------------------------------------------
REAL = 4  # real tokens of the padded sources below, in S = 7 slots
LAYOUTS = {  # where the 4 real tokens sit among the 7 slots
    "right": [True] * 4 + [False] * 3,
    "left": [False] * 3 + [True] * 4,
    "both": [False, True, True, True, True, False, False],
    "between": [True, False, True, True, False, True, False],
}


def padded(real, layout, pad_id=0):
    """``real`` ``(1, 4)`` ids placed in the slots of ``layout``, the others ``pad_id``."""
    mask = torch.tensor([layout])  # (1, S)
    source = torch.full((1, S), pad_id, dtype=torch.long)
    source[mask] = real.flatten()
    return source, mask


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_padding_on_any_side_gives_the_numbers_of_the_unpadded_source(layout):
    """A real token's position counts the real tokens before it: padded on the left (the old
    code counted from the padding: logits moved by 0.088, memory by 1.15 here), on both sides or
    between tokens, the source gives the logits, memory and generated ids of itself alone."""
    m = model()
    real, target = ids()[0][:1, :REAL], ids()[1][:1]  # (1, 4), (1, L)
    source, mask = padded(real, LAYOUTS[layout], pad_id=5)
    alone, _ = m(real, target)  # (1, L, V_t)
    logits, _ = m(source, target, source_mask=mask)
    torch.testing.assert_close(logits, alone)
    right = padded(real, LAYOUTS["right"], pad_id=5)
    torch.testing.assert_close(logits, m(*right[:1], target, source_mask=right[1])[0])
    memory, _ = m.encode(source, source_mask=mask)  # (1, S, E)
    torch.testing.assert_close(memory[mask], m.encode(real)[0][0])  # (4, E): the real rows
    for use_cache in (True, False):
        generated = m.generate(source, 8, bos_id=1, source_mask=mask, use_cache=use_cache)
        assert torch.equal(generated, m.generate(real, 8, bos_id=1, use_cache=use_cache))


def test_a_batch_of_left_and_right_padded_sources():
    """Both layouts in one batch (two sources of 4 and 6 real tokens): each row equals its
    source alone, for the logits and for greedy decoding."""
    m = model()
    (a, b), target = ids()[0][:, :6], ids()[1]
    source = torch.zeros(N, S, dtype=torch.long)
    mask = torch.zeros(N, S, dtype=torch.bool)
    source[0, 3:], mask[0, 3:] = a[:4], True  # left-padded: 3 pads, then 4 real tokens
    source[1, :6], mask[1, :6] = b, True  # right-padded: 6 real tokens, then 1 pad
    logits, _ = m(source, target, source_mask=mask)
    generated = m.generate(source, 8, bos_id=1, eos_id=2, source_mask=mask)
    for row, real in enumerate((a[:4], b)):
        alone, _ = m(real[None], target[row : row + 1])
        torch.testing.assert_close(logits[row : row + 1], alone)
        own = m.generate(real[None], 8, bos_id=1, eos_id=2)  # (1, 1 + T)
        assert generated[row, : own.shape[1]].tolist() == own[0].tolist()


def test_a_left_padded_target_gives_the_logits_of_the_unpadded_one():
    """The target's positions count its real tokens too: the real rows of a target padded on
    the left are the logits of the target alone."""
    m = model()
    source, target = ids()
    tgt = torch.zeros(N, L + 2, dtype=torch.long)
    tgt[:, 2:] = target
    tgt_mask = torch.ones(N, L + 2, dtype=torch.bool)
    tgt_mask[:, :2] = False
    logits, _ = m(source, tgt, source_mask=source_mask(), target_mask=tgt_mask)
    alone, _ = m(source, target, source_mask=source_mask())
    torch.testing.assert_close(logits[:, 2:], alone)
    assert torch.isfinite(logits).all()


def test_the_padded_model_compiles_as_one_graph():
    """Positions from the mask are traced (no branch on its values): fullgraph compiles."""
    m = model()
    source, mask = padded(ids()[0][:1, :REAL], LAYOUTS["both"])
    target = ids()[1][:1]
    compiled = torch.compile(m, fullgraph=True, backend="eager")
    torch.testing.assert_close(
        compiled(source, target, source_mask=mask)[0], m(source, target, source_mask=mask)[0]
    )


def test_embed_source_with_the_mask_carries_left_padding_into_nn_transformer():
    """``embed_source(source, source_mask=...)`` gives ``nn.Transformer`` the positions the
    model uses, so the converted core agrees on a left-padded source too."""
    m = model()
    real, target = ids()[0][:1, :REAL], ids()[1][:1]
    source, mask = padded(real, LAYOUTS["left"])
    core = encoder_decoder_to_torch(m)
    hidden = core(
        m.embed_source(source, source_mask=mask),
        m.embed_target(target),
        tgt_mask=~causal_mask(L),
        src_key_padding_mask=~mask,
        memory_key_padding_mask=~mask,
    )
    torch.testing.assert_close(m.lm_head(hidden), m(real, target)[0], rtol=1e-5, atol=1e-5)


def test_model_bad_inputs():
    m = model()
    source, target = ids()
    with pytest.raises(ValueError, match=r"target must hold 1 to max_len=9 tokens .* got 10"):
        m(source, torch.zeros(N, 10, dtype=torch.long))
    with pytest.raises(ValueError, match=r"source must hold 1 to max_len=9 tokens .* got 0"):
        m(torch.zeros(N, 0, dtype=torch.long), target)
    with pytest.raises(ValueError, match=r"target must have the batch size of source \(N=2\)"):
        m(source, target[:1])
    with pytest.raises(ValueError, match=r"source must hold token indices in 0..22"):
        m(source + V_SRC, target)
    with pytest.raises(TypeError, match=r"source must be an integer tensor"):
        m(source.float(), target)
    with pytest.raises(ValueError, match=r"source must have shape \(N, S\)"):
        m(source[0], target)
    with pytest.raises(TypeError, match=r"source_mask must be a boolean tensor"):
        m(source, target, source_mask=torch.ones(N, S))
    with pytest.raises(ValueError, match=r"source_mask must have the shape of its ids \(2, 7\)"):
        m(source, target, source_mask=torch.ones(N, S + 1, dtype=torch.bool))
    empty = source_mask()
    empty[0] = False
    with pytest.raises(ValueError, match=r"source_mask must keep at least one token .* rows \[0\]"):
        m(source, target, source_mask=empty)
    with pytest.raises(ValueError, match=r"max_new_tokens must be at most max_len=9"):
        m.generate(source, 10, bos_id=1)
    with pytest.raises(ValueError, match=r"eos_id must be a target id in 0 .. 16; got 17"):
        m.generate(source, 3, bos_id=1, eos_id=17)
    with pytest.raises(TypeError, match=r"bos_id must be a target id in 0 \.\. 16; got float 1\.0"):
        m.generate(source, 3, bos_id=1.0)
    with pytest.raises(ValueError, match=r"embed_dim must be even"):
        EncoderDecoder(5, 5, 9, 3, 1, 1, max_len=4)
    with pytest.raises(TypeError, match=r"core must be a torch.nn.Transformer"):
        encoder_decoder_from_torch(nn.Linear(2, 2), source_vocab=3, target_vocab=3, max_len=3)
    with pytest.raises(TypeError, match=r"model must be an attnlib.seq2seq.EncoderDecoder"):
        encoder_decoder_to_torch(nn.Linear(2, 2))


# ---- one cross-attention, moved into PyTorch and Keras ----------------------------------------
def test_cross_attention_moves_into_pytorch_and_keras():
    """Queries from the target, keys and values from the source: nn.MultiheadAttention takes
    (query, key, value); Keras takes (query, value, key)."""
    block = decoder_block_from_torch(torch_layer())
    cross = block.cross_attn
    q, memory = torch.randn(N, L, E), torch.randn(N, S, E)
    ours, w = cross(q, memory, memory, need_weights=True)
    mha = to_torch(cross)
    theirs, w_torch = mha(q, memory, memory, average_attn_weights=False)
    torch.testing.assert_close(theirs, ours)
    torch.testing.assert_close(w_torch, w)
    from attnlib.convert import to_keras

    layer = to_keras(cross)
    out_k, w_k = layer(q, memory, key=memory, return_attention_scores=True)  # query, value, key
    torch.testing.assert_close(torch.as_tensor(out_k).detach(), ours, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.as_tensor(w_k).detach(), w, rtol=1e-5, atol=1e-6)
