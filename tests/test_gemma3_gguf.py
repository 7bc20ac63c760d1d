"""Gemma 3 270M from the GGUF file (attnlib.gemma3) against transformers' Gemma3ForCausalLM
loaded from the same file by transformers' own GGUF reader (its own dequantization, names and
Gemma 3 defaults): logits and every layer's hidden states on a padded batch, greedy generation
with the caches past the 512-token window; and the file checks.

The reference takes about 75 s to load (transformers parses the GGUF file), once per worker.
"""

import json

import pytest
import torch
from attnlib import gemma3
from attnlib.decoding import KVCache, ModelCache, RollingCache

# Token ids of two lines of the Odyssey (Butler's translation), with <bos> (2), as Gemma's
# tokenizer gives them (tests/test_sentencepiece.py checks the tokenizer itself).
LINES = [
    [2, 38331, 531, 786, 529, 506, 880, 236764, 41554, 236764, 506, 880, 529, 76589, 532, 11747],
    [2, 54593, 786, 236764, 708, 53701, 236764, 529, 600, 96308, 11814],
]


@pytest.fixture(scope="module")
def ours():
    model, _ = gemma3.load_gemma3()
    return model


@pytest.fixture(scope="module")
def reference():
    transformers = pytest.importorskip("transformers")
    path = gemma3.gguf_path()
    model = transformers.Gemma3ForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    return model.eval()


def padded(lines):
    """A right-padded batch ``(N, L)`` and its attention mask."""
    L = max(map(len, lines))
    ids = torch.zeros(len(lines), L, dtype=torch.long)
    mask = torch.zeros(len(lines), L, dtype=torch.long)
    for i, line in enumerate(lines):
        ids[i, : len(line)] = torch.tensor(line)
        mask[i, : len(line)] = 1
    return ids, mask


def test_config_read_from_the_file(ours):
    assert ours.num_layers == 18 and ours.vocab_size == 262_144
    assert ours.token_embedding.embedding_dim == 640
    assert ours.windows == (512,) * 5 + (None,) + (512,) * 5 + (None,) + (512,) * 5 + (None,)
    attn = ours.blocks[0].attn
    assert (attn.num_heads, attn.num_kv_heads, attn.head_dim) == (4, 1, 256)
    bases = [b.attn.positions.base for b in ours.blocks]
    assert bases[5] == bases[11] == bases[17] == 1e6 and set(bases[:5]) == {1e4}
    assert ours.embed_scale == 640**0.5
    assert ours.lm_head.weight is ours.token_embedding.weight
    assert sum(p.numel() for p in ours.parameters()) == 268_098_176


def test_logits_and_hidden_states_equal_transformers_on_a_padded_batch(ours, reference):
    ids, mask = padded(LINES)
    with torch.no_grad():
        out = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        hidden = ours.hidden_states(ids, attention_mask=mask)
        logits = ours.read_out(hidden[-1])
    real = mask.bool()
    torch.testing.assert_close(logits[real], out.logits[real], atol=1e-4, rtol=0)
    assert len(out.hidden_states) == len(hidden) == 19
    hidden[-1] = ours.ln_f(hidden[-1])  # transformers' last hidden state is after the norm
    for i, (h, ref) in enumerate(zip(hidden, out.hidden_states)):
        # Gemma's residual stream reaches 1e5 at <bos>: relative to each layer's largest
        scale = ref[real].abs().max()
        err = ((h - ref)[real].abs().max() / scale).item()
        assert err <= 1e-4 * 1e-2, f"layer {i}: relative difference {err:.2e}"
    # padding changes nothing: each line alone gives its logits
    for i, line in enumerate(LINES):
        with torch.no_grad():
            alone = ours(torch.tensor([line]))[0][0]
        torch.testing.assert_close(logits[i, : len(line)], alone, atol=1e-4, rtol=0)


def test_greedy_generation_past_the_window_equals_transformers(ours, reference):
    g = torch.Generator().manual_seed(0)
    prompt = torch.cat([torch.tensor([2]), torch.randint(1000, 200_000, (504,), generator=g)])
    new = 16  # the sequence passes 512 tokens: the local layers' windows slide
    with torch.no_grad():
        expected = reference.generate(
            prompt[None],
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=new,
            do_sample=False,
            min_new_tokens=new,
        )[0]
        got = ours.generate(prompt, new, temperature=0)
        # the same with ring buffers of 512 slots in the local layers
        cache = ModelCache([RollingCache(w) if w else KVCache() for w in ours.windows])
        ids, step = prompt[None], prompt[None]
        for _ in range(new):
            logits, _ = ours(step, cache=cache)
            step = logits[:, -1:].argmax(-1)  # (1, 1)
            ids = torch.cat([ids, step], dim=1)
    assert len(prompt) + new > 512
    assert got.tolist() == expected.tolist()
    assert ids[0].tolist() == expected.tolist()


def test_a_damaged_file_is_refused_naming_both_hashes(tmp_path):
    bad = tmp_path / "gemma.gguf"
    bad.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ValueError, match=r"gemma\.gguf.* has sha256 [0-9a-f]{64}, not .*a5fd3b62"):
        gemma3.read_gguf(bad)


def test_a_damaged_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    (tmp_path / gemma3.GGUF_NAME).write_bytes(b"not the model")
    with pytest.raises(ValueError, match=r"has sha256 .*delete it and run again"):
        gemma3.gguf_path()


def test_a_damaged_conversion_is_refused(tmp_path, monkeypatch):
    weights, meta = gemma3._converted()  # the real cache's names
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    (tmp_path / weights.name).write_bytes(b"x")
    (tmp_path / meta.name).write_text(json.dumps({"sha256": "0" * 64}))
    with pytest.raises(ValueError, match=r"not the recorded conversion's 0000.*delete it"):
        gemma3.load_gemma3()


def test_another_architecture_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "llama.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match=r"must hold a Gemma 3 model .*got 'llama'"):
        gemma3.read_gguf(path, verify=False)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing\.gguf' does not exist"):
        gemma3.read_gguf(tmp_path / "nothing.gguf")
