"""The paged key-value cache (attnlib.paged): blocks, block tables, prefix sharing.

Oracles: full causal attention over the whole sequence (``MultiHeadAttention`` with
``causal_mask``, ``LanguageModel`` without a cache) and a :class:`KVCache` decoded step by step
alongside; for prefix sharing, two sequences decoded with independent caches; for memory,
block counts and byte counts computed by hand. Sizes all differ (E=24, H=6, D=4, G=2 or 6,
T=11 tokens in chunks 5, 1, 1, 3, 1).
"""

import math

import pytest
import torch
from attnlib import LanguageModel, ModelCache, MultiHeadAttention, causal_mask
from attnlib.decoding import KVCache
from attnlib.paged import BlockPool, PagedCache, PagedModelCache

E, H, D, T = 24, 6, 4, 11
CHUNKS = (5, 1, 1, 3, 1)  # a prefill, single steps, a step of 3 across a block boundary
CUDA = torch.cuda.is_available()


def layer(G, seed=0):
    torch.manual_seed(seed)
    m = MultiHeadAttention(E, H, num_kv_heads=G).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.4)  # random biases too
    return m


def decode(m, x, cache, chunks=CHUNKS):
    """Feed ``x`` ``(1, T, E)`` through ``m`` in ``chunks`` with ``cache``; the outputs and the
    last step's weights."""
    outs, start = [], 0
    for size in chunks:
        out, w = m(x[:, start : start + size], cache=cache)
        outs.append(out)
        start += size
    return torch.cat(outs, dim=1), w


def lm(positions, seed=0, **kwargs):
    torch.manual_seed(seed)
    return LanguageModel(50, 12, 3, 2, max_len=32, positions=positions, **kwargs).eval()


# ---- one layer: paged == KVCache == full causal attention --------------------------------------


@pytest.mark.parametrize("G", [2, 6])
@pytest.mark.parametrize("block_size", [1, 3, 16])  # 16 > T: the whole sequence in one block
def test_paged_equals_kv_cache_equals_full_attention(G, block_size):
    m = layer(G)
    x = torch.randn(1, T, E)
    pool = BlockPool(12, block_size)
    paged, plain = PagedCache(pool), KVCache()
    out_paged, w_paged = decode(m, x, paged)
    out_plain, w_plain = decode(m, x, plain)
    full, _ = m(x, mask=causal_mask(T))
    torch.testing.assert_close(out_paged, out_plain)
    torch.testing.assert_close(out_paged, full)
    torch.testing.assert_close(w_paged, w_plain)  # (1, H, 1, T): the last step's weights
    assert torch.equal(paged.key, plain.key) and torch.equal(paged.value, plain.value)
    assert paged.key.shape == (1, G, T, D) and paged.length == T
    assert paged.positions.tolist() == list(range(T))
    blocks = math.ceil(T / block_size)  # 11, 4, 1
    assert len(paged.block_table) == pool.used_blocks == blocks
    assert sorted(paged.block_table) == list(range(blocks))  # one sequence: blocks 0, 1, ...
    assert pool.key.shape == (12, G, block_size, D)


def test_keys_live_in_the_blocks_the_table_names():
    """Position p is in block block_table[p // b] at offset p % b: read the pool by hand."""
    pool = BlockPool(6, 3)
    other, cache = PagedCache(pool), PagedCache(pool)
    k = torch.randn(1, 2, 7, 4)
    v = torch.randn(1, 2, 7, 5)  # values of another size than the keys
    other.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 5))  # takes block 0
    for t in range(7):  # interleaved with the other sequence: its blocks are not contiguous
        cache.update(k[:, :, t : t + 1], v[:, :, t : t + 1])
        if t == 3:
            other.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 5))  # fills 0, takes 3
    assert other.block_table == [0, 3] and cache.block_table == [1, 2, 4]
    for p in range(7):
        block, offset = cache.block_table[p // 3], p % 3
        assert torch.equal(pool.key[block, :, offset], k[0, :, p])
        assert torch.equal(pool.value[block, :, offset], v[0, :, p])
    assert torch.equal(cache.key, k) and torch.equal(cache.value, v)
    assert cache.value.shape == (1, 2, 7, 5)


def test_an_empty_step_leaves_the_cache_as_it_was():
    m, x = layer(2), torch.randn(1, 4, E)
    cache = PagedCache(BlockPool(4, 3))
    m(x, cache=cache)
    out, _ = m(x[:, :0], cache=cache)
    assert out.shape == (1, 0, E) and cache.length == 4 and cache.block_table == [0, 1]


# ---- a language model ----------------------------------------------------------------------


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_language_model_paged_decode_equals_full_forward_and_generate(positions):
    model = lm(positions)
    ids = torch.randint(0, 50, (1, 10), generator=torch.Generator().manual_seed(1))
    pools = [BlockPool(8, 3) for _ in range(model.num_layers)]
    cache = ModelCache([PagedCache(pool) for pool in pools])  # the plain way, one per layer
    steps = [model(ids[:, :4], cache=cache)[0]]  # a prefill of 4
    steps += [model(ids[:, t : t + 1], cache=cache)[0] for t in range(4, 10)]
    full, _ = model(ids)
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert [pool.used_blocks for pool in pools] == [4, 4]  # ceil(10 / 3) in every layer
    assert cache.nbytes == 2 * 4 * (3 * 3 * (4 + 4) * 4)  # layers * blocks * block bytes

    # greedy decoding by hand with paged and plain caches, and model.generate
    prompt, new = ids[:, :5], 8
    expected = model.generate(prompt, new, temperature=0)
    for cache in (PagedModelCache([BlockPool(5, 4) for _ in range(2)]), model.new_cache()):
        out, step = prompt, prompt
        for _ in range(new):
            logits, _ = model(step, cache=cache)
            step = logits[:, -1:].argmax(-1)  # (1, 1)
            out = torch.cat([out, step], dim=1)
        assert torch.equal(out, expected), type(cache.layers[0]).__name__
    assert cache.length == 5 + new - 1  # the last token is never fed back


def test_a_model_with_a_window_refuses_paged_caches():
    model = lm("rope", window=4)
    with pytest.raises(ValueError, match=r"window=4 .* got window=None in layer 0"):
        model(torch.tensor([[1, 2]]), cache=PagedModelCache([BlockPool(4, 4) for _ in "ab"]))


# ---- prefix sharing --------------------------------------------------------------------------


def test_prefix_sharing_decodes_as_independent_caches_and_holds_fewer_blocks():
    """Two prompts with a common 10-token prefix, block_size 4: the prefix goes through once,
    the second sequence is a fork, then each goes on with its own 3 tokens and 4 greedy steps
    (interleaved), 17 positions each."""
    model = lm("rope")
    gen = torch.Generator().manual_seed(2)
    prefix = torch.randint(0, 50, (1, 10), generator=gen)
    suffixes = [torch.tensor([[7, 8, 9]]), torch.tensor([[31, 8, 2]])]
    pools = [BlockPool(12, 4) for _ in range(2)]
    a = PagedModelCache(pools)
    model(prefix, cache=a)
    b = a.fork()
    assert [p.used_blocks for p in pools] == [3, 3]  # 4 + 4 + 2 positions, nothing copied
    assert pools[0].ref_counts[:4] == [2, 2, 2, 0]

    alone = [PagedModelCache([BlockPool(12, 4) for _ in range(2)]) for _ in range(2)]
    for cache in alone:  # the same chunks as the shared ones: the same numbers, bit for bit
        model(prefix, cache=cache)
    fed, last = [[prefix], [prefix]], [[], []]
    steps = list(suffixes)
    for _ in range(5):  # the suffix, then 4 greedy tokens fed back, A and B in turn
        for i, cache in enumerate((a, b)):
            logits, _ = model(steps[i], cache=cache)
            logits_alone, _ = model(steps[i], cache=alone[i])
            torch.testing.assert_close(logits, logits_alone, rtol=0, atol=0)
            fed[i].append(steps[i])
            last[i].append(logits[:, -1])
            steps[i] = logits[:, -1:].argmax(-1)  # (1, 1)
    for i, cache in enumerate((a, b)):  # and each equals the full forward of its own tokens
        ids = torch.cat(fed[i], dim=1)  # (1, 17)
        assert cache.length == alone[i].length == ids.shape[1] == 17
        torch.testing.assert_close(torch.cat(last[i]), model(ids)[0][0, 12:])
        assert torch.equal(cache.layers[1].key, alone[i].layers[1].key)
    assert torch.equal(a.layers[1].key[:, :, :10], b.layers[1].key[:, :, :10])
    assert not torch.equal(a.layers[1].key[:, :, 10], b.layers[1].key[:, :, 10])

    # A wrote first into the shared partial block 2: it got a copy (3), B kept block 2
    assert [layer.block_table for layer in a.layers] == [[0, 1, 3, 4, 6]] * 2
    assert [layer.block_table for layer in b.layers] == [[0, 1, 2, 5, 7]] * 2
    assert [p.used_blocks for p in pools] == [8, 8]  # 2 shared + 3 + 3 per layer
    assert [p.used_blocks for c in alone for p in c.pools] == [5, 5, 5, 5]  # 10 per layer
    block = 3 * 4 * (4 + 4) * 4  # G * block_size * (D + D_v) * 4 bytes = 384
    assert a.nbytes == b.nbytes == alone[0].nbytes == 2 * 5 * block  # each counts its 5
    assert sum(p.used_nbytes for p in pools) == 2 * 8 * block == 6144
    assert sum(p.used_nbytes for c in alone for p in c.pools) == 2 * 10 * block == 7680

    a.release()  # A's own blocks go back; the shared ones stay for B
    assert [p.used_blocks for p in pools] == [5, 5] and pools[0].ref_counts[:2] == [1, 1]
    logits, _ = model(steps[1], cache=b)
    logits_alone, _ = model(steps[1], cache=alone[1])
    torch.testing.assert_close(logits, logits_alone, rtol=0, atol=0)
    b.release()
    assert [p.used_blocks for p in pools] == [0, 0] and pools[0].free_blocks == 12


@pytest.mark.parametrize("prefix", [8, 10])  # on a block boundary, and inside block 2
def test_writing_into_a_fork_never_changes_the_parent(prefix):
    pool = BlockPool(10, 4)
    parent = PagedCache(pool)
    gen = torch.Generator().manual_seed(3)
    k, v = torch.randn(1, 2, prefix, 4, generator=gen), torch.randn(1, 2, prefix, 3, generator=gen)
    parent.update(k, v)
    child = parent.fork()
    assert child.block_table == parent.block_table and child.length == prefix
    assert torch.equal(child.key, k) and torch.equal(child.value, v)

    new_k = torch.randn(1, 2, 6, 4, generator=gen)  # 6 tokens: into the shared block and on
    child.update(new_k[:, :, :1], torch.ones(1, 2, 1, 3))
    child.update(new_k[:, :, 1:], torch.ones(1, 2, 5, 3))
    assert torch.equal(parent.key, k) and torch.equal(parent.value, v)  # unchanged
    assert torch.equal(child.key, torch.cat([k, new_k], dim=2))
    full = prefix // 4  # the full blocks stay shared; a partial one was copied
    assert child.block_table[:full] == parent.block_table[:full]
    assert set(child.block_table[full:]).isdisjoint(parent.block_table)
    assert pool.used_blocks == math.ceil(prefix / 4) + math.ceil((prefix + 6) / 4) - full

    snapshot = child.key.clone()
    grandchild = child.fork()  # three sequences now hold block 0
    assert pool.ref_counts[0] == 3
    parent.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 3))  # the parent writes
    grandchild.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 3))
    assert torch.equal(child.key, snapshot)
    assert torch.equal(parent.key, torch.cat([k, torch.zeros(1, 2, 3, 4)], dim=2))


# ---- memory ----------------------------------------------------------------------------------

SLOT = 2 * (4 + 6) * 4  # bytes of one position: G=2 heads, D=4 key + D_v=6 value, float32


def fill(block_size, S, num_blocks=128):
    cache = PagedCache(BlockPool(num_blocks, block_size))
    cache.update(torch.randn(1, 2, S, 4), torch.randn(1, 2, S, 6))
    return cache


@pytest.mark.parametrize(
    ("block_size", "blocks", "nbytes", "wasted"),
    [  # S = 100 positions of 80 bytes; wasted = (ceil(100 / b) * b - 100) * 80
        (1, 100, 8000, 0),
        (4, 25, 8000, 0),
        (16, 7, 8960, 960),  # 112 slots, 12 unwritten
        (64, 2, 10240, 2240),  # 128 slots, 28 unwritten
    ],
)
def test_waste_table_for_100_positions(block_size, blocks, nbytes, wasted):
    cache = fill(block_size, 100)
    assert len(cache.block_table) == blocks
    assert cache.nbytes == nbytes == blocks * block_size * SLOT
    assert cache.wasted_nbytes == wasted == cache.nbytes - 100 * SLOT
    assert cache.pool.nbytes == 128 * block_size * SLOT  # the pool's storage: every block


@pytest.mark.parametrize("block_size", [1, 3, 5])
def test_waste_is_the_end_of_the_last_block(block_size):
    cache = PagedCache(BlockPool(20, block_size))
    for S in range(1, 21):
        cache.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 6))
        slots = math.ceil(S / block_size) * block_size - S
        assert cache.wasted_nbytes == slots * SLOT < block_size * SLOT
        assert cache.nbytes == cache.pool.used_nbytes == (S + slots) * SLOT


def test_nothing_held_before_the_first_step_and_after_release():
    pool = BlockPool(4, 2)
    cache = PagedCache(pool)
    assert (cache.key, cache.nbytes, cache.wasted_nbytes, pool.nbytes) == (None, 0, 0, 0)
    cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 6))
    assert pool.nbytes == 4 * 2 * SLOT and pool.used_nbytes == 2 * 2 * SLOT
    cache.release()
    assert cache.released and (cache.key, cache.nbytes, cache.wasted_nbytes) == (None, 0, 0)
    assert pool.used_blocks == 0 and pool.nbytes == 4 * 2 * SLOT  # the storage stays
    assert "block_table=[]" in repr(cache) and "used_blocks=0" in repr(pool)


# ---- errors ----------------------------------------------------------------------------------


def test_pool_out_of_blocks():
    pool = BlockPool(2, 4)
    with pytest.raises(ValueError, match=r"BlockPool is out of blocks: all 2 blocks of 4 "):
        for _ in range(3):
            pool.allocate()
    pool = BlockPool(2, 4)
    cache = PagedCache(pool)
    cache.update(torch.zeros(1, 1, 5, 2), torch.zeros(1, 1, 5, 2))
    with pytest.raises(
        ValueError,
        match=r"BlockPool is out of blocks: this step of 4 tokens needs 1 more block of 4 "
        r"positions and 0 of the pool's 2 are free; release finished sequences",
    ):
        cache.update(torch.ones(1, 1, 4, 2), torch.ones(1, 1, 4, 2))
    assert cache.length == 5 and cache.block_table == [0, 1]  # nothing written
    assert torch.equal(cache.key, torch.zeros(1, 1, 5, 2))
    cache.update(torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))  # what fits still goes in


def test_a_fork_needs_a_free_block_for_its_copy():
    pool = BlockPool(2, 4)
    parent = PagedCache(pool)
    parent.update(torch.zeros(1, 1, 6, 2), torch.zeros(1, 1, 6, 2))
    child = parent.fork()
    with pytest.raises(ValueError, match=r"out of blocks: this step of 1 token needs 1 more block"):
        child.update(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2))
    assert child.block_table == parent.block_table == [0, 1] and pool.ref_counts == [2, 2]


def test_one_sequence_per_paged_cache():
    one = r"key must hold one sequence, \(N=1, G, L_new, D\).*got \(2, 2, 3, 4\)\. Make one"
    with pytest.raises(ValueError, match=one + r" PagedCache per sequence"):
        PagedCache(BlockPool(4, 4)).update(torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 3, 4))
    cache = PagedCache(BlockPool(4, 4))
    with pytest.raises(ValueError, match=r"one PagedCache per sequence"):
        layer(2)(torch.randn(3, 1, E), cache=cache)  # a batch of 3 through a layer
    assert cache.length == 0 and cache.pool.used_blocks == 0


@pytest.mark.parametrize(
    ("key", "value", "error", "match"),
    [
        ((1, 3, 1, 4), (1, 3, 1, 6), ValueError, r"key must have shape \(N, G=2, L_new, D=4\)"),
        ((1, 2, 1, 5), (1, 2, 1, 6), ValueError, r"key .*D=4.*got \(1, 2, 1, 5\)"),
        ((1, 2, 1, 4), (1, 2, 1, 4), ValueError, r"value must have shape \(N, G=2, L_new, D=6\)"),
    ],
)
def test_a_step_of_another_shape_than_the_pool(key, value, error, match):
    """A second sequence on a pool the first one filled: the pool checks (the new cache holds
    nothing to compare with)."""
    pool = BlockPool(4, 4)
    PagedCache(pool).update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 6))
    cache = PagedCache(pool)
    with pytest.raises(error, match=match + r".*make a BlockPool per layer"):
        cache.update(torch.zeros(key), torch.zeros(value))
    assert cache.length == 0 and pool.used_blocks == 1


def test_a_step_of_another_dtype_or_device_than_the_pool():
    pool = BlockPool(4, 4)
    PagedCache(pool).update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 6))
    k, v = torch.zeros(1, 2, 1, 4, dtype=torch.float64), torch.zeros(1, 2, 1, 6)
    with pytest.raises(TypeError, match=r"key must have the BlockPool's dtype torch.float32 on"):
        PagedCache(pool).update(k, v)
    k, v = torch.zeros(1, 2, 1, 4, device="meta"), torch.zeros(1, 2, 1, 6, device="meta")
    with pytest.raises(ValueError, match=r"key must have .* on cpu; got torch.float32 on meta"):
        PagedCache(pool).update(k, v)
    cache = PagedCache(BlockPool(4, 4))
    layer(2)(torch.randn(1, 2, E), cache=cache)
    with pytest.raises(ValueError, match=r"cache holds keys of shape .* needs \(N=1, G=6, S, D=4"):
        layer(6)(torch.randn(1, 1, E), cache=cache)  # a layer checks its cache's keys first


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, 4), ValueError, r"num_blocks must be a positive integer; got 0"),
        ((4, 0), ValueError, r"block_size must be a positive integer; got 0"),
        ((4, -2), ValueError, r"block_size must be a positive integer; got -2"),
        ((4.0, 4), TypeError, r"num_blocks must be a positive integer; got float 4.0"),
        ((4, 2.5), TypeError, r"block_size must be a positive integer; got float 2.5"),
        ((4, True), TypeError, r"block_size must be a positive integer; got bool True"),
    ],
)
def test_pool_sizes(args, error, match):
    with pytest.raises(error, match=match):
        BlockPool(*args)


def test_released_cache_and_bad_block_ids():
    pool = BlockPool(4, 2)
    cache = PagedCache(pool)
    cache.update(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    cache.release()
    step = torch.zeros(1, 1, 1, 2)
    for call in (lambda: cache.update(step, step), cache.fork, cache.release):
        with pytest.raises(ValueError, match=r"a released PagedCache: release\(\) gave its"):
            call()
    with pytest.raises(ValueError, match=r"got 0 \(a free block: released more often"):
        pool.release(0)
    with pytest.raises(ValueError, match=r"block in use, 0 \.\. 3 .*got 7 \(outside the pool\)"):
        pool.retain(7)
    with pytest.raises(TypeError, match=r"block must be a block id, an int; got float"):
        pool.retain(1.0)
    with pytest.raises(TypeError, match=r"pool must be an attnlib.paged.BlockPool .* got int"):
        PagedCache(16)
    with pytest.raises(TypeError, match=r"pools must be a non-empty list .* got \[BlockPool, int"):
        PagedModelCache([pool, 3])
    with pytest.raises(TypeError, match=r"pools must be a non-empty list .* got \[\]"):
        PagedModelCache([])


@pytest.mark.skipif(not CUDA, reason="no CUDA device (torch.cuda.is_available() is False)")
def test_paged_decode_on_cuda_equals_cpu():
    torch.backends.cuda.matmul.allow_tf32 = False
    m, x = layer(2), torch.randn(1, T, E)
    out_cpu, _ = decode(m, x, PagedCache(BlockPool(6, 3)))
    pool = BlockPool(6, 3)
    out_cuda, _ = decode(m.cuda(), x.cuda(), PagedCache(pool))
    assert pool.key.device.type == "cuda" and out_cuda.device.type == "cuda"
    torch.testing.assert_close(out_cuda.cpu(), out_cpu, rtol=1e-5, atol=1e-5)
