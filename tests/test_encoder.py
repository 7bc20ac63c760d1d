"""attnlib.PostNormBlock, attnlib.Encoder and attnlib.sentence_embedding: shapes, masks, errors,
and equal numbers to ``nn.TransformerEncoderLayer(norm_first=False)`` and to ``transformers``'
``BertModel`` on a small random configuration made offline (all sizes different: V=37, E=12,
H=3, D=4, MLP 20, 2 layers, 17 positions, 3 segments, L=5/7)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib import Encoder, PostNormBlock, sentence_embedding  # noqa: E402
from attnlib.pretrained import from_hf_bert  # noqa: E402
from torch import nn  # noqa: E402

V, E, H, INNER, LAYERS, POSITIONS, SEGMENTS = 37, 12, 3, 20, 2, 17, 3
TOL = dict(rtol=0, atol=1e-5)


def padded_batch(generator=None):
    """Ids (3, 7) of lengths 7, 5 and 2, right-padded with 0, their mask and segments."""
    g = generator or torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (3, 7), generator=g)  # (N, L)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 2 + [0] * 5])  # (N, L)
    types = torch.tensor([[0, 0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0]])
    return ids * mask, mask, types


# ---------------------------------------------------------------- PostNormBlock


def test_post_norm_block_equals_torch_encoder_layer_post_norm():
    block = PostNormBlock(E, H, mlp_ratio=INNER / E).eval()
    layer = nn.TransformerEncoderLayer(
        E, H, dim_feedforward=INNER, dropout=0.0, activation="gelu", batch_first=True
    ).eval()
    assert not layer.norm_first
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(
            torch.cat(
                [block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight]
            )
        )
        layer.self_attn.in_proj_bias.copy_(
            torch.cat([block.attn.q_proj.bias, block.attn.k_proj.bias, block.attn.v_proj.bias])
        )
        layer.self_attn.out_proj.load_state_dict(block.attn.out_proj.state_dict())
        layer.linear1.load_state_dict(block.mlp[0].state_dict())
        layer.linear2.load_state_dict(block.mlp[2].state_dict())
        layer.norm1.load_state_dict(block.ln1.state_dict())
        layer.norm2.load_state_dict(block.ln2.state_dict())
    x = torch.randn(2, 5, E)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])  # PyTorch: True = blocked
    expected = layer(x, src_key_padding_mask=padding)
    mine, weights = block(x, mask=~padding.unsqueeze(1), need_weights=True)  # (N, 1, S)
    torch.testing.assert_close(mine[0], expected[0], **TOL)
    torch.testing.assert_close(mine[1, :3], expected[1, :3], **TOL)  # PyTorch's fast path
    assert weights.shape == (2, H, 5, 5) and weights[1, :, :, 3:].abs().max() == 0


def test_post_norm_block_unbatched_and_fast_path_agree():
    block = PostNormBlock(E, H).eval()
    x = torch.randn(5, E)
    y, w = block(x, need_weights=True)
    y_fast, none = block(x)
    assert y.shape == (5, E) and w.shape == (H, 5, 5) and none is None
    torch.testing.assert_close(y, y_fast, **TOL)
    torch.testing.assert_close(y, block(x.unsqueeze(0))[0][0], **TOL)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda b: b(torch.randn(5, 7)),
            ValueError,
            r"x must have shape \(L, E=12\); got \(5, 7\)",
        ),
        (lambda b: b(torch.ones(5, E, dtype=torch.long)), TypeError, "floating-point"),
        (lambda b: b(torch.randn(5, E).double()), TypeError, "dtype torch.float64"),
        (lambda b: b(torch.randn(2, 5, E), mask=torch.ones(2, 4)), ValueError, r"mask must"),
        (
            lambda b: b(torch.randn(5, E), mask=torch.ones(5, 5, dtype=torch.long)),
            TypeError,
            "bool",
        ),
        (lambda b: PostNormBlock(E, 5), ValueError, "divisible by num_heads"),
        (lambda b: PostNormBlock(E, H, mlp_ratio=0), ValueError, "mlp_ratio must be a number > 0"),
    ],
)
def test_post_norm_block_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(PostNormBlock(E, H))


# ---------------------------------------------------------------- Encoder


def test_encoder_shapes_and_padding():
    model = Encoder(V, E, H, LAYERS, max_len=POSITIONS, type_vocab_size=SEGMENTS).eval()
    ids, mask, types = padded_batch()
    out, weights = model(ids, attention_mask=mask, token_type_ids=types, need_weights=True)
    assert out.shape == (3, 7, E) and len(weights) == LAYERS
    for w in weights:
        assert w.shape == (3, H, 7, 7)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, H, 7))
        assert w[2, :, :, 2:].abs().max() == 0  # padding is never attended to
    states = model.hidden_states(ids, attention_mask=mask, token_type_ids=types)
    assert len(states) == LAYERS + 1
    torch.testing.assert_close(states[-1], out, **TOL)  # F.sdpa's path, without weights
    # the real tokens' vectors do not depend on the padding: sentence 3 alone
    alone, _ = model(ids[2, :2], token_type_ids=types[2, :2])  # (2, E), unbatched
    torch.testing.assert_close(alone, out[2, :2], **TOL)
    fast, none = model(ids, attention_mask=mask.bool(), token_type_ids=types)
    assert none is None
    torch.testing.assert_close(fast, out, **TOL)


def test_encoder_all_padding_gives_no_nan():
    model = Encoder(V, E, H, LAYERS, max_len=POSITIONS).eval()
    ids = torch.zeros(2, 4, dtype=torch.long)
    out, weights = model(ids, attention_mask=torch.zeros(2, 4, dtype=torch.long), need_weights=True)
    assert torch.isfinite(out).all() and weights[0].abs().max() == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            dict(ids=torch.tensor([[1, 37]])),
            ValueError,
            r"ids must hold token indices .* got \[37\]",
        ),
        (dict(ids=torch.tensor([[-1, 2]])), ValueError, r"ids must hold .* 0\.\.36.* got \[-1\]"),
        (dict(ids=torch.tensor([[1.0, 2.0]])), TypeError, "ids must be an integer tensor"),
        (dict(ids=[1, 2]), TypeError, "ids must be a torch.Tensor"),
        (dict(ids=torch.ones(1, 2, 3, dtype=torch.long)), ValueError, r"\(L,\) or \(N, L\)"),
        (dict(ids=torch.ones(1, 18, dtype=torch.long)), ValueError, "max_len=17 .* got L=18"),
        (
            dict(attention_mask=torch.ones(2, 3, dtype=torch.long)),
            ValueError,
            r"attention_mask must have the shape of ids, \(2, 4\); got \(2, 3\)",
        ),
        (
            dict(attention_mask=torch.ones(2, 4)),
            TypeError,
            "attention_mask .* got dtype torch.float32",
        ),
        (
            dict(attention_mask=torch.full((2, 4), 2)),
            ValueError,
            r"attention_mask must hold .*\[2\]",
        ),
        (
            dict(attention_mask=torch.ones(4, dtype=torch.bool)),
            ValueError,
            "attention_mask must have",
        ),
        (
            dict(attention_mask=[[1, 1, 1, 1]] * 2),
            TypeError,
            "attention_mask must be a torch.Tensor",
        ),
        (
            dict(token_type_ids=torch.full((2, 4), 3)),
            ValueError,
            r"token_type_ids .* 0\.\.2.*\[3\]",
        ),
        (
            dict(token_type_ids=torch.zeros(2, 5, dtype=torch.long)),
            ValueError,
            "token_type_ids must have",
        ),
        (dict(token_type_ids=torch.zeros(2, 4)), TypeError, "token_type_ids must be an integer"),
    ],
)
def test_encoder_errors(kwargs, error, match):
    model = Encoder(V, E, H, LAYERS, max_len=POSITIONS, type_vocab_size=SEGMENTS)
    kwargs = {"ids": torch.ones(2, 4, dtype=torch.long), **kwargs}
    with pytest.raises(error, match=match):
        model(kwargs.pop("ids"), **kwargs)


def test_encoder_constructor_errors():
    with pytest.raises(TypeError, match="num_layers must be a positive integer; got float 2.0"):
        Encoder(V, E, H, 2.0)
    with pytest.raises(ValueError, match="type_vocab_size must be a positive integer; got 0"):
        Encoder(V, E, H, 2, type_vocab_size=0)


# ---------------------------------------------------------------- sentence_embedding


def test_sentence_embedding_is_the_normalised_mean_of_real_tokens():
    hidden = torch.randn(3, 7, E)
    _, mask, _ = padded_batch()
    got = sentence_embedding(hidden, mask)
    for i, n in enumerate([7, 5, 2]):
        mean = hidden[i, :n].mean(0)
        torch.testing.assert_close(got[i], mean / mean.norm(), **TOL)
        torch.testing.assert_close(sentence_embedding(hidden[i, :n]), got[i], **TOL)
    torch.testing.assert_close(sentence_embedding(hidden, mask.bool()), got)
    torch.testing.assert_close(
        sentence_embedding(hidden, mask, normalize=False)[2], hidden[2, :2].mean(0)
    )


def test_sentence_embedding_errors():
    with pytest.raises(TypeError, match="hidden must be a floating-point tensor"):
        sentence_embedding(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"attention_mask must have the shape of hidden .*\(2, 3\)"
    ):
        sentence_embedding(torch.randn(2, 3, E), torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="attention_mask must be an integer or boolean"):
        sentence_embedding(torch.randn(2, 3, E), torch.ones(2, 3))


# ---------------------------------------------------------------- a random BERT


@pytest.fixture(scope="module")
def random_bert():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        num_hidden_layers=LAYERS,
        intermediate_size=INNER,
        max_position_embeddings=POSITIONS,
        type_vocab_size=SEGMENTS,
        hidden_act="gelu",
        attn_implementation="eager",
    )
    torch.manual_seed(3)
    reference = transformers.BertModel(config).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that copying them is tested
        for name, p in reference.named_parameters():
            if "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return reference, config


def test_random_bert_round_trips(random_bert):
    reference, config = random_bert
    model = from_hf_bert(reference.state_dict(), config)
    assert not model.training
    ids, mask, types = padded_batch()
    with torch.no_grad():
        expected = reference(
            input_ids=ids,
            attention_mask=mask,
            token_type_ids=types,
            output_hidden_states=True,
            output_attentions=True,
        )
        states = model.hidden_states(ids, attention_mask=mask, token_type_ids=types)
        out, weights = model(ids, attention_mask=mask, token_type_ids=types, need_weights=True)
    assert len(states) == len(expected.hidden_states) == LAYERS + 1
    for mine, theirs in zip(states, expected.hidden_states):
        torch.testing.assert_close(mine, theirs, **TOL)
    for mine, theirs in zip(weights, expected.attentions):
        torch.testing.assert_close(mine, theirs, **TOL)
    torch.testing.assert_close(out, expected.last_hidden_state, **TOL)


def test_from_hf_bert_accepts_a_dict_config_and_the_bert_prefix(random_bert):
    reference, config = random_bert
    prefixed = {f"bert.{k}": v for k, v in reference.state_dict().items()}
    model = from_hf_bert(prefixed, config.to_dict())
    assert torch.equal(
        model.blocks[1].mlp[2].weight, reference.encoder.layer[1].output.dense.weight
    )


def test_from_hf_bert_refuses_what_it_cannot_carry(random_bert):
    reference, config = random_bert
    sd = reference.state_dict()
    with pytest.raises(ValueError, match=r"config\['hidden_act'\] must be 'gelu' .* got 'relu'"):
        from_hf_bert(sd, {**config.to_dict(), "hidden_act": "relu"})
    with pytest.raises(ValueError, match="position_embedding_type"):
        from_hf_bert(sd, {**config.to_dict(), "position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match=r"lacks the BERT tensors for \['blocks.0.ln2.bias'\]"):
        from_hf_bert(
            {k: v for k, v in sd.items() if k != "encoder.layer.0.output.LayerNorm.bias"}, config
        )
    with pytest.raises(ValueError, match="'cls.predictions.bias' .* has no place"):
        from_hf_bert({**sd, "cls.predictions.bias": torch.zeros(V)}, config)
    with pytest.raises(ValueError, match=r"token_embedding.weight must have shape \(38, 12\)"):
        from_hf_bert(sd, {**config.to_dict(), "vocab_size": V + 1})
    with pytest.raises(TypeError, match="state_dict must be a dict of str to torch.Tensor"):
        from_hf_bert(reference, config)
    with pytest.raises(TypeError, match="config must be a dict"):
        from_hf_bert(sd, "config.json")
