"""Paged key-value caches: fixed-size blocks and a block table per sequence, as vLLM's
PagedAttention (Kwon et al., SOSP 2023).

A server decodes many sequences at once, and does not know how long each will grow. A
:class:`attnlib.decoding.PreallocatedCache` per sequence reserves ``max_len`` positions up
front, most of them never written; a :class:`attnlib.decoding.KVCache` grows, but each
sequence's keys must then be one contiguous tensor. PagedAttention borrows the operating
system's answer to the same problem, virtual memory:

- the physical memory of a layer is one :class:`BlockPool` of ``num_blocks`` blocks of
  ``block_size`` positions each, shared by every sequence;
- each sequence is a :class:`PagedCache` with a *block table*, the list of the blocks that hold
  its positions: position ``p`` lives in block ``block_table[p // block_size]`` at offset
  ``p % block_size``. A sequence takes a new block only when its last one is full.

Two things follow. The memory a sequence holds but does not use is at most the unwritten
slots of its last block, fewer than ``block_size`` positions (*internal fragmentation*,
:attr:`PagedCache.wasted_nbytes`), where a preallocated buffer wastes ``max_len - S``. And
two sequences may point at the same block: prompts with a common prefix (a system prompt,
several samples of one prompt) hold the prefix's blocks once (:meth:`PagedCache.fork`), each
block counting its users; a write into a shared block first copies it (*copy-on-write*).

The attention here reads a sequence's keys by copying its blocks into one tensor
(:meth:`PagedCache.update` gathers them through the block table), so that any attention
function can use them and the book can print them. A real paged-attention kernel never makes
that copy: it reads the blocks in place, following the table.

For a whole :class:`attnlib.LanguageModel`, one pool per layer and a :class:`PagedModelCache`
(a :class:`attnlib.ModelCache` of one :class:`PagedCache` per layer).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlib._checks import check_int, shape_str
from attnlib.decoding import Cache, ModelCache

__all__ = ["BlockPool", "PagedCache", "PagedModelCache"]


def _count(n: int, noun: str) -> str:
    """``"1 token"``, ``"3 tokens"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


class BlockPool:
    """The physical key-value memory of one attention layer: ``num_blocks`` blocks of
    ``block_size`` positions, shared by every sequence decoded through that layer.

    Keys and values are two tensors, ``(num_blocks, G, block_size, D)`` and
    ``(num_blocks, G, block_size, D_v)``: block ``i`` holds ``block_size`` consecutive positions
    of whichever sequence owns it. They are allocated at the first write, which tells the pool
    the layer's key/value heads ``G``, sizes ``D`` and ``D_v``, dtype and device; later steps of
    another kind are refused (a pool belongs to one layer). Its memory is then fixed,
    :attr:`nbytes`, however many sequences share it:

    .. math::

        \\text{nbytes} = \\text{num\\_blocks} \\cdot G \\cdot \\text{block\\_size}
        \\cdot (D + D_v) \\cdot \\text{bytes per number}

    The pool keeps a free list and a reference count per block (how many block tables point at
    it): :meth:`allocate` takes a free block, :meth:`retain` adds a user (a sequence shares the
    block), :meth:`release` removes one and puts the block back on the free list when none is
    left. The :class:`PagedCache` objects call these; a reader rarely needs to.

    Args:
        num_blocks: how many blocks the pool holds, ``>= 1``.
        block_size: how many positions a block holds, ``>= 1``. vLLM's default is 16: small
            blocks waste little memory in each sequence's last block, large ones make the table
            shorter and the kernel's reads longer.

    Attributes:
        num_blocks: as given.
        block_size: as given.
        key: the key storage, ``(num_blocks, G, block_size, D)``, or ``None`` before the first
            write.
        value: the value storage, ``(num_blocks, G, block_size, D_v)``, or ``None``.
        ref_counts: the number of block tables that hold each block, a list of
            ``num_blocks`` ints (0: free).

    Raises:
        TypeError: if ``num_blocks`` or ``block_size`` is not an ``int``; from a write, if the
            step's keys or values have another dtype than the pool holds.
        ValueError: if ``num_blocks`` or ``block_size`` is below 1; from :meth:`allocate`, if
            every block is in use (the pool is out of blocks); from a write, if the step's
            ``G``, ``D``, ``D_v`` or device differ from the pool's; from :meth:`retain` or
            :meth:`release`, if the block is not in use.

    Example:
        >>> pool = BlockPool(8, 16)
        >>> first, second = pool.allocate(), pool.allocate()
        >>> first, second, pool.used_blocks, pool.ref_counts[:3]
        (0, 1, 2, [1, 1, 0])
        >>> pool.release(first)
        >>> pool.used_blocks, pool.free_blocks, pool.nbytes  # no storage before a write
        (1, 7, 0)
    """

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int("num_blocks", num_blocks, low=1)
        self.block_size = check_int("block_size", block_size, low=1)
        self.key: Tensor | None = None  # (num_blocks, G, block_size, D) from the first write
        self.value: Tensor | None = None  # (num_blocks, G, block_size, D_v)
        self.ref_counts = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # a stack: block 0 is taken first

    @property
    def free_blocks(self) -> int:
        """How many blocks are free."""
        return len(self._free)

    @property
    def used_blocks(self) -> int:
        """How many blocks some sequence holds (a shared block counts once)."""
        return self.num_blocks - len(self._free)

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block, keys and values (0 before the first write)."""
        if self.key is None:
            return 0
        return (self.key.nbytes + self.value.nbytes) // self.num_blocks

    @property
    def nbytes(self) -> int:
        """Bytes of the whole storage, every block, used or free (0 before the first write)."""
        return self.num_blocks * self.block_nbytes

    @property
    def used_nbytes(self) -> int:
        """Bytes of the blocks in use, each shared block counted once (the memory the sequences
        need)."""
        return self.used_blocks * self.block_nbytes

    def allocate(self) -> int:
        """Take a free block for one sequence (its reference count becomes 1); return its id.

        Raises ValueError if every block is in use.
        """
        if not self._free:
            raise ValueError(
                f"BlockPool is out of blocks: all {self.num_blocks} blocks of {self.block_size} "
                "positions are in use; release finished sequences (PagedCache.release()) or "
                "make a pool with more blocks"
            )
        block = self._free.pop()
        self.ref_counts[block] = 1
        return block

    def retain(self, block: int) -> None:
        """Add a user to a block in use: one more block table points at it (a shared prefix).

        Raises ValueError if the block is free or not a block of this pool.
        """
        block = self._check_in_use(block)
        self.ref_counts[block] += 1

    def release(self, block: int) -> None:
        """Remove a user from a block; with no user left it goes back to the free list.

        Raises ValueError if the block is free (released twice) or not a block of this pool.
        """
        block = self._check_in_use(block)
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self._free.append(block)

    def _check_in_use(self, block) -> int:
        block = check_int("block", block, what="a block id, an int")
        inside = 0 <= block < self.num_blocks
        if not inside or self.ref_counts[block] == 0:
            why = "a free block: released more often than taken" if inside else "outside the pool"
            raise ValueError(
                f"block must be a block in use, 0 .. {self.num_blocks - 1} with a reference "
                f"count above 0; got {block} ({why})"
            )
        return block

    def _fit(self, key: Tensor, value: Tensor) -> None:
        """Make the storage from the first step ``(1, G, L_new, D)`` and ``(1, G, L_new, D_v)``,
        or check that a step fits the storage made (nothing is written or allocated when it
        does not)."""
        if self.key is None:
            _, G, _, D = key.shape
            self.key = key.new_zeros(self.num_blocks, G, self.block_size, D)
            self.value = value.new_zeros(self.num_blocks, G, self.block_size, value.shape[3])
            return
        for name, new, kept in (("key", key, self.key), ("value", value, self.value)):
            _, G, _, D = kept.shape
            if (new.shape[1], new.shape[3]) != (G, D):
                raise ValueError(
                    f"{name} must have shape (N, G={G}, L_new, D={D}) to be written into this "
                    f"BlockPool, whose blocks are (num_blocks={self.num_blocks}, G={G}, "
                    f"block_size={self.block_size}, D={D}); got {shape_str(new.shape)} (a pool "
                    "belongs to one layer: make a BlockPool per layer)"
                )
            if new.dtype != kept.dtype or new.device != kept.device:
                raise (TypeError if new.dtype != kept.dtype else ValueError)(
                    f"{name} must have the BlockPool's dtype {kept.dtype} on {kept.device}; got "
                    f"{new.dtype} on {new.device} (a pool belongs to one layer: make a "
                    "BlockPool per layer)"
                )

    def __repr__(self) -> str:
        return (
            f"BlockPool(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"used_blocks={self.used_blocks}, nbytes={self.nbytes})"
        )


class PagedCache(Cache):
    """One sequence's key-value cache in one layer, kept in the blocks of a :class:`BlockPool`
    and found through a block table.

    Position ``p`` of the sequence lives in block ``block_table[p // b]`` at offset ``p % b``
    (``b`` the pool's ``block_size``). A step of ``L_new`` tokens writes them at positions
    ``length .. length + L_new - 1``, taking a new block from the pool whenever the last one is
    full, so the sequence holds ``ceil(S / b)`` blocks for ``S`` positions, wherever they are in
    the pool. It returns the keys and values of positions ``0 .. S-1`` gathered through the
    table, ``(1, G, S, D)``: a copy, made so that any attention function can read them; a real
    paged-attention kernel reads the blocks in place instead.

    Memory (:attr:`nbytes`) is counted per sequence: the blocks in its table, a shared block
    counted in full by each sequence that holds it (it is what the sequence reads). The memory
    of all sequences together, each shared block once, is the pool's
    :attr:`BlockPool.used_nbytes`. Of the sequence's blocks only the last may be partly
    unwritten: :attr:`wasted_nbytes` is those slots,

    .. math::

        \\text{wasted} = (\\lceil S / b \\rceil\\, b - S) \\cdot G\\, (D + D_v) \\cdot
        \\text{bytes per number} < b \\cdot G\\, (D + D_v) \\cdot \\text{bytes per number}.

    :meth:`fork` starts a second sequence that continues from this one's tokens without copying
    them (a shared prefix), :meth:`release` gives the blocks back when the sequence is done. A
    :class:`PagedCache` holds one sequence (batch ``N = 1``: each sequence of a batch has its own
    table, of its own length) and every position (no ``window``: a model with sliding-window
    layers refuses it).

    Args:
        pool: the :class:`BlockPool` of the layer this cache belongs to.

    Attributes:
        pool: the pool.
        block_table: the ids of the blocks that hold the sequence's positions, in order.
        key: the kept keys gathered through the table, ``(1, G, length, D)``, or ``None``
            before the first step.
        value: the kept values, gathered the same way, ``(1, G, length, D_v)``.
        length: the number of tokens written, the position of the next token.
        released: whether :meth:`release` gave the blocks back (the cache is then unusable).

    Shape:
        ``update(key, value)``: ``key (1, G, L_new, D)``, ``value (1, G, L_new, D_v)``; returns
        ``(1, G, S, D)`` and ``(1, G, S, D_v)``, ``S = length + L_new``.

    Raises:
        TypeError: if ``pool`` is not a :class:`BlockPool`; from :meth:`update`, if a step's
            ``key`` or ``value`` is not a tensor, or has another dtype than the pool holds.
        ValueError: from :meth:`update`, if the step holds ``N != 1`` sequences, does not match
            the ``G``, ``D`` or device the pool holds, or needs more blocks than the pool has
            free (nothing is written then); from :meth:`update`, :meth:`fork` or
            :meth:`release`, once the cache is released.

    Example:
        >>> pool = BlockPool(8, 4)
        >>> cache = PagedCache(pool)
        >>> k = torch.arange(6.0).view(1, 1, 6, 1)  # six positions of one head, D = 1
        >>> keys, values = cache.update(k, k)
        >>> cache.block_table, keys.flatten().tolist()
        ([0, 1], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
        >>> cache.nbytes, cache.wasted_nbytes, pool.nbytes  # 8 bytes a position (key + value)
        (64, 16, 256)
        >>> child = cache.fork()  # shares both blocks: no copy
        >>> _ = child.update(torch.full((1, 1, 1, 1), 9.0), torch.zeros(1, 1, 1, 1))
        >>> child.block_table, pool.ref_counts[:3]  # its write copied the shared block 1
        ([0, 2], [2, 1, 1])
        >>> cache.key.flatten().tolist(), child.key.flatten().tolist()
        ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 9.0])
    """

    def __init__(self, pool: BlockPool):
        super().__init__()
        if not isinstance(pool, BlockPool):
            raise TypeError(
                "pool must be an attnlib.paged.BlockPool (one per layer); got "
                f"{type(pool).__name__}"
            )
        self.pool = pool
        self.block_table: list[int] = []
        self.released = False

    @property
    def key(self) -> Tensor | None:
        return None if not self.block_table else self._gather(self.pool.key, self.length)

    @property
    def value(self) -> Tensor | None:
        return None if not self.block_table else self._gather(self.pool.value, self.length)

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks in this sequence's table, shared ones included in full."""
        return len(self.block_table) * self.pool.block_nbytes

    @property
    def wasted_nbytes(self) -> int:
        """Bytes of the slots allocated but not written (the end of the last block, fewer than
        ``block_size`` positions)."""
        slots = len(self.block_table) * self.pool.block_size - self.length
        return 0 if not self.block_table else slots * self.pool.block_nbytes // self.pool.block_size

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Write a step's keys and values into the sequence's blocks; return the keys and values
        of every position, gathered through the block table (see :class:`PagedCache`)."""
        self._check_live("update")
        return super().update(key, value)

    def _check(self, name: str, new: Tensor, kept: Tensor | None) -> None:
        super()._check(name, new, None)  # a 4-D tensor
        if new.shape[0] != 1:
            raise ValueError(
                f"{name} must hold one sequence, (N=1, G, L_new, D): a PagedCache is the block "
                f"table of one sequence; got {shape_str(new.shape)}. Make one PagedCache per "
                "sequence (they can share one BlockPool)"
            )
        super()._check(name, new, kept)

    def _update(self, key, value):
        pool, b = self.pool, self.pool.block_size
        pool._fit(key, value)  # the storage from the first step, or the step checked against it
        end = self.length + key.shape[2]
        table = self.block_table
        first = self.length // b  # the block the first new token goes into
        shared = end > self.length and first < len(table) and pool.ref_counts[table[first]] > 1
        needed = -(-end // b) - len(table) + shared  # new blocks, and a copy of a shared one
        if needed > pool.free_blocks:
            raise ValueError(
                f"BlockPool is out of blocks: this step of {_count(key.shape[2], 'token')} needs "
                f"{_count(needed, 'more block')} of {b} positions and {pool.free_blocks} of the "
                f"pool's {pool.num_blocks} are free; release finished sequences "
                "(PagedCache.release()) or make a pool with more blocks"
            )
        if shared:  # copy-on-write: the other sequences keep the block as it is
            table[first] = self._copy_block(table[first])
        while len(table) * b < end:
            table.append(pool.allocate())
        p = torch.arange(self.length, end, device=key.device)  # (L_new,) positions to write
        blocks = torch.tensor(table, device=key.device)[p // b]  # (L_new,) their blocks
        pool.key[blocks, :, p % b] = key[0].transpose(0, 1)  # (L_new, G, D) into their slots
        pool.value[blocks, :, p % b] = value[0].transpose(0, 1)  # (L_new, G, D_v)
        positions = torch.arange(end, device=key.device)  # (S,)
        return self._gather(pool.key, end), self._gather(pool.value, end), positions

    def _copy_block(self, block: int) -> int:
        """A fresh copy of a shared block for this sequence; the old one loses a user."""
        pool = self.pool
        copy = pool.allocate()
        pool.key[copy] = pool.key[block]
        pool.value[copy] = pool.value[block]
        pool.release(block)
        return copy

    def _gather(self, storage: Tensor, S: int) -> Tensor:
        """Positions ``0 .. S-1`` of ``storage`` ``(num_blocks, G, b, D)`` read through the
        block table: the table's blocks end to end, ``(1, G, S, D)`` (a copy)."""
        table = torch.tensor(self.block_table, dtype=torch.long, device=storage.device)
        blocks = storage.index_select(0, table)  # (B, G, b, D), the table's blocks in order
        B, G, b, D = blocks.shape
        return blocks.transpose(0, 1).reshape(1, G, B * b, D)[:, :, :S]  # (1, G, S, D)

    def fork(self) -> PagedCache:
        """A new sequence that continues from this one's tokens: it shares every block of the
        table (each block's reference count + 1), nothing is copied.

        The two may then diverge: the first write into a shared block (only the last, partly
        written block can be written into) copies it for the writer, so neither sequence ever
        sees the other's tokens. After both have written, a prefix of ``P`` tokens is held
        once in its ``P // block_size`` full blocks, and its partial last block once per
        sequence. This is how vLLM shares a prompt among parallel samples (copy-on-write), and
        unlike copying the partial block at once it costs nothing if one sequence stops here.

        Raises ValueError if the cache was released.
        """
        self._check_live("fork")
        child = PagedCache(self.pool)
        for block in self.block_table:
            self.pool.retain(block)
        child.block_table = list(self.block_table)
        child.length = self.length
        child.positions = None if self.positions is None else self.positions.clone()
        child._owner = self._owner  # the same layer continues it
        return child

    def release(self) -> None:
        """Give the blocks back: each loses this sequence as a user, and returns to the pool's
        free list when no other sequence holds it. The cache is unusable afterwards.

        Raises ValueError if the cache was released already.
        """
        self._check_live("release")
        for block in self.block_table:
            self.pool.release(block)
        self.block_table = []
        self.released = True

    def _check_live(self, what: str) -> None:
        if self.released:
            raise ValueError(
                f"cannot {what} a released PagedCache: release() gave its blocks back to the "
                "pool; make a new PagedCache(pool) for another sequence"
            )

    def _options(self) -> str:
        return f"block_size={self.pool.block_size}, block_table={self.block_table}"


class PagedModelCache(ModelCache):
    """A :class:`attnlib.ModelCache` of one :class:`PagedCache` per layer: one sequence of a
    :class:`attnlib.LanguageModel`, kept in one :class:`BlockPool` per layer.

    The same as ``ModelCache([PagedCache(pool) for pool in pools])``, with :meth:`fork` and
    :meth:`release` for all the layers at once. Every layer writes the same positions, so the
    layers' pools allocate in step and the layers' tables come out the same; vLLM keeps one
    table per sequence for all its layers for that reason.

    Args:
        pools: one :class:`BlockPool` per layer of the model (the first for the first block).

    Attributes:
        layers: the per-layer :class:`PagedCache` objects.
        pools: the per-layer pools.

    Raises:
        TypeError: if ``pools`` is not a non-empty list or tuple of :class:`BlockPool` objects.
        ValueError: from the model's forward, as for any :class:`attnlib.ModelCache` (a model
            with sliding-window layers refuses a :class:`PagedCache`, which keeps every
            position).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> from attnlib import LanguageModel
        >>> lm = LanguageModel(50, 12, 3, 2, max_len=32).eval()
        >>> cache = PagedModelCache([BlockPool(16, 4) for _ in range(lm.num_layers)])
        >>> prompt = torch.tensor([[3, 1, 4, 1, 5, 9]])
        >>> logits, _ = lm(prompt, cache=cache)
        >>> torch.allclose(logits, lm(prompt)[0], atol=1e-6), cache.layers[1].block_table
        (True, [0, 1])
        >>> sample = cache.fork()  # a second continuation of the prompt, sharing its blocks
        >>> _ = lm(torch.tensor([[2]]), cache=sample)
        >>> sample.layers[1].block_table, cache.pools[1].used_blocks
        ([0, 2], 3)
    """

    def __init__(self, pools: list[BlockPool] | tuple[BlockPool, ...]):
        if (
            not isinstance(pools, (list, tuple))
            or not pools
            or not all(isinstance(p, BlockPool) for p in pools)
        ):
            got = (
                f"[{', '.join(type(p).__name__ for p in pools)}]"
                if isinstance(pools, (list, tuple))
                else type(pools).__name__
            )
            raise TypeError(
                f"pools must be a non-empty list of attnlib.paged.BlockPool objects, one per "
                f"layer; got {got}"
            )
        super().__init__([PagedCache(pool) for pool in pools])

    @property
    def pools(self) -> list[BlockPool]:
        """The per-layer pools."""
        return [layer.pool for layer in self.layers]

    def fork(self) -> PagedModelCache:
        """A new sequence that continues from this one, every layer forked
        (:meth:`PagedCache.fork`: the blocks are shared, nothing is copied).

        Raises ValueError if the cache was released.
        """
        child = object.__new__(type(self))
        ModelCache.__init__(child, [layer.fork() for layer in self.layers])
        return child

    def release(self) -> None:
        """Give every layer's blocks back to its pool (:meth:`PagedCache.release`).

        Raises ValueError if the cache was released already.
        """
        for layer in self.layers:
            layer.release()
