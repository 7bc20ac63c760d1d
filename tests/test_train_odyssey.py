"""scripts/train_odyssey.py itself: several processes train as one (DDP), the variants are the
models they claim to be, and runs merge only when their settings agree."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import attnlib
import pytest
import torch
import train_odyssey as script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "train_odyssey.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_in(out: Path, processes: int) -> dict:
    """Three steps of the main model without dropout, in ``processes`` processes."""
    args = ["--only", "main", "--seeds", "0", "--steps", "3", "--dropout", "0", "--no-counts"]
    args += ["--threads", "1", "--out", str(out)]
    if processes == 1:
        command = [sys.executable, str(SCRIPT), *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node"]
        command += [str(processes), "--master_port", str(free_port()), str(SCRIPT), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return torch.load(out / "model.pt", weights_only=True)


@pytest.mark.slow
def test_two_processes_take_the_same_steps_as_one(tmp_path):
    one = train_in(tmp_path / "one", 1)
    two = train_in(tmp_path / "two", 2)
    assert one.keys() == two.keys()
    start = script.make_model(script.BASE, len(one["token_embedding.weight"]), 0)
    moved = 0
    for name, weight in one.items():
        # each process computed the gradient of its 16 windows; DDP averaged them
        torch.testing.assert_close(two[name], weight, atol=1e-4, rtol=1e-4, msg=name)
        moved += not torch.equal(weight, start.state_dict()[name])
    assert moved > 10  # the three steps changed the weights: the comparison is not vacuous
    results = json.loads((tmp_path / "two" / "results.json").read_text())
    run = results["runs"]["main"]["0"]
    assert (run["processes"], run["threads"], run["device"]) == (2, 1, "cpu")
    assert "CPUs; Python" in run["machine"] and run["seconds"] > 0


def test_post_ln_model_normalises_after_each_sum():
    config = dict(script.BASE, norm="post", dropout=0.0, context=16)
    model = script.make_model(config, 40, seed=3).eval()
    assert all(isinstance(b, attnlib.encoder.PostNormBlock) for b in model.blocks)
    ids = torch.randint(0, 40, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = model.token_embedding(ids) + model.position_embedding(torch.arange(11))
        for block in model.blocks:
            x, _ = block(x, mask=attnlib.causal_mask(11))  # the checked, public forward
        expected = model.lm_head(model.ln_f(x))
        logits, _ = model(ids)
    torch.testing.assert_close(logits, expected)
    # causal: the first five positions ignore what comes after them
    changed = ids.clone()
    changed[:, 5:] = 0
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[0][:, :5], logits[:, :5])


def test_variants_change_what_they_say():
    sizes = {}
    for name, change in script.VARIANTS.items():
        config = dict(script.BASE, **change)
        model = script.make_model(config, 30, seed=0)
        sizes[name] = sum(p.numel() for p in model.parameters())
        assert len(model.blocks) == config["num_layers"]
        assert (model.blocks[0].mlp is None) == (name == "no_mlp")
        window = config["window"]
        layers = len(model.blocks)
        assert model.windows == (tuple(window) if isinstance(window, list) else (window,) * layers)
        assert (type(model.blocks[0].attn).__name__ == "MultiHeadLatentAttention") == (
            name == "mla"
        )
        assert model.token_embedding.weight.requires_grad != config["freeze_embeddings"]
    assert sizes["no_mlp"] < sizes["one_layer"] < sizes["main"] == sizes["post_ln"]
    assert script.VARIANTS["bpe"]["context"] * script.VARIANTS["bpe"]["batch_size"] == (
        script.BASE["context"] * script.BASE["batch_size"]
    )  # the same number of tokens a step


def test_seeds_change_the_initial_weights():
    a, b = (script.make_model(script.BASE, 30, seed=s).state_dict() for s in (0, 1))
    assert not torch.equal(a["blocks.0.attn.q_proj.weight"], b["blocks.0.attn.q_proj.weight"])


def write_run(folder: Path, base: dict, runs: dict, variants=None) -> None:
    folder.mkdir()
    variants = script.VARIANTS if variants is None else variants
    results = {"base": base, "variants": variants, "data": {}, "counts": {}, "runs": runs}
    (folder / "results.json").write_text(json.dumps(results))
    for name in ("vocab.txt", "merges.txt"):
        (folder / name).write_text(name)


def test_merge_joins_seeds_and_refuses_other_settings(tmp_path):
    write_run(tmp_path / "a", script.BASE, {"one_layer": {"1": {"x": 1}}})
    write_run(tmp_path / "b", script.BASE, {"one_layer": {"0": {"x": 0}}, "no_mlp": {"2": {}}})
    script.merge([tmp_path / "a", tmp_path / "b"], tmp_path)
    merged = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert list(merged) == ["one_layer", "no_mlp"]  # in the order of VARIANTS
    assert list(merged["one_layer"]) == ["0", "1"]  # seeds in order
    write_run(tmp_path / "c", dict(script.BASE, lr=1.0), {})
    with pytest.raises(SystemExit, match=r"c: its base differs from .*a's; cannot merge"):
        script.merge([tmp_path / "a", tmp_path / "c"], tmp_path)
    # a folder made before a variant was added merges; one whose variant changed does not
    older = {k: v for k, v in script.VARIANTS.items() if k != "mla"}
    write_run(tmp_path / "d", script.BASE, {"main": {"2": {}}}, variants=older)
    script.merge([tmp_path / "a", tmp_path / "d"], tmp_path)
    merged = json.loads((tmp_path / "results.json").read_text())
    assert merged["variants"] == json.loads(json.dumps(script.VARIANTS))
    assert list(merged["runs"]) == ["main", "one_layer"]
    write_run(tmp_path / "e", script.BASE, {}, variants=dict(older, no_mlp={"mlp_ratio": 1.0}))
    with pytest.raises(SystemExit, match=r"e: its variant 'no_mlp' is \{'mlp_ratio': 1.0\}"):
        script.merge([tmp_path / "a", tmp_path / "e"], tmp_path)


def test_batch_must_split_evenly(monkeypatch):
    model = script.make_model(dict(script.BASE, context=4), 30, seed=0)
    ids = torch.arange(100) % 30
    # train() asks torch.distributed only whether it runs in a group, its rank and its size
    monkeypatch.setattr(script.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(script.dist, "get_rank", lambda: 0)
    monkeypatch.setattr(script.dist, "get_world_size", lambda: 3)
    with pytest.raises(SystemExit, match=r"batch_size=32 must be divisible by the 3 processes"):
        script.train(
            model, ids, ids, steps=1, context=4, batch_size=32, lr=1e-3, weight_decay=0, seed=0
        )


def test_post_ln_model_decodes_with_a_cache():
    """The post-LN model's blocks are attnlib.PostNormBlock (no private override): they take
    a cache, and generating with one gives the tokens of generating without."""
    model = script.make_model(dict(script.BASE, norm="post", context=16), 40, seed=0).eval()
    prompt = torch.tensor([1, 2, 3])
    with_cache = model.generate(prompt, 4, temperature=0)
    assert torch.equal(with_cache, model.generate(prompt, 4, temperature=0, use_cache=False))
