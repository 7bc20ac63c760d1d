"""Attention at inference: key-value caches for decoding one token at a time, and sliding
windows.

A causal language model generates token ``t`` from tokens ``0 .. t-1``. The keys and values of
the earlier tokens never change, so recomputing them at every step repeats work: a cache keeps
them, and each step projects only the new token. Pass one cache per attention layer to
:class:`attnlib.MultiHeadAttention` as ``cache=``. Every cache has the interface of
:class:`Cache` (``update(key, value) -> (keys, values)``, ``length``, ``nbytes``, ``mask``), and
each way of keeping the keys is one class:

- :class:`KVCache`: appends with ``torch.cat`` (short code; each step copies the whole cache);
- :class:`PreallocatedCache`: one buffer of ``max_len`` positions, written at ``length`` (no
  copy per step);
- :class:`RollingCache`: a ring buffer of the last ``window`` positions (sliding-window
  attention, Mistral; Gemma's local layers), fixed memory;
- :class:`SinkCache`: the first ``sinks`` positions and the last ``window`` (StreamingLLM);
- :class:`attnlib.paged.PagedCache`: fixed-size blocks and a block table (vLLM).

With a window ``w`` every query sees only the keys ``i - w < j <= i``, exactly the mask
:func:`sliding_window_mask` builds for a whole sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlib._checks import check_int, shape_str

__all__ = [
    "Cache",
    "KVCache",
    "ModelCache",
    "PreallocatedCache",
    "RollingCache",
    "SinkCache",
    "sliding_window_mask",
]


def sliding_window_mask(L: int, window: int, S: int | None = None, *, device=None) -> Tensor:
    """Boolean sliding-window causal mask: query ``i`` may attend to keys ``i - w < j <= i``.

    .. math::

        M_{ij} = [\\, i - w < j \\le i \\,]

    Each query sees itself and the ``w - 1`` keys before it; ``window >= L`` gives
    :func:`attnlib.causal_mask`. Aligned top-left like ``causal_mask`` (query ``i`` and key
    ``i`` are the same position).

    Args:
        L: number of queries. window: ``w``, how many positions each query sees, ``>= 1``.
        S: number of keys; defaults to ``L``.
        device: where to create the mask.

    Returns:
        Boolean tensor, ``True`` = may attend.

    Shape:
        output: ``(L, S)``.

    Raises:
        TypeError: if ``L``, ``S`` or ``window`` is not an ``int``.
        ValueError: if ``L``, ``S`` or ``window`` is below 1.

    Example:
        >>> sliding_window_mask(4, 2)
        tensor([[ True, False, False, False],
                [ True,  True, False, False],
                [False,  True,  True, False],
                [False, False,  True,  True]])
    """
    S = L if S is None else S
    L = check_int("L", L, low=1)
    S = check_int("S", S, low=1)
    window = check_int("window", window, low=1)
    return _sliding_window_mask(L, window, S, device)


def _sliding_window_mask(L: int, window: int, S: int, device) -> Tensor:
    """The kernel of :func:`sliding_window_mask`, without the checks (``L`` or ``S`` may be
    0)."""
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return (j <= i) & (j > i - window)  # (L, S)


class Cache:
    """The interface every key-value cache has; subclasses decide how the keys are kept.

    An attention layer calls, at each step with ``L_new`` new tokens:

    1. ``keys, values = cache.update(key, value)``: the step's keys and values
       ``(N, G, L_new, D)`` go in; the keys and values to attend to come out,
       ``(N, G, S, D)``: the kept ones and the new ones, in any order;
    2. ``cache.mask(L_new)``: the boolean ``(L_new, S)`` mask of those keys for the new queries
       (causal, and the window if the cache keeps one);
    3. ``cache.position_ids(L_new)``: the positions a relative position scheme (RoPE, ALiBi)
       gives the new queries and the returned keys.

    Attributes:
        length: the number of tokens seen so far, the position of the next token.
        positions: the absolute position of each key the last :meth:`update` returned,
            ``(S,)``, or ``None`` before the first step.
        window: how many recent positions a query sees (``None``: all).
        sinks: how many first positions every query also sees (StreamingLLM's sinks; 0).
        streaming: whether a :class:`attnlib.LanguageModel` layer without a window accepts
            this cache although it keeps less than the layer would see (only
            :class:`SinkCache`: StreamingLLM's approximation is chosen, never an accident).

    Subclasses implement ``_update(key, value) -> (keys, values, positions)`` and the
    properties :attr:`key`, :attr:`value` and :attr:`nbytes`. Keys and values may have
    different sizes ``D`` (multi-head latent attention caches a RoPE key and a latent vector).

    Raises:
        TypeError: from :meth:`update`, if ``key`` or ``value`` is not a tensor, or has another
            dtype than the cache holds.
        ValueError: from :meth:`update`, if ``key`` or ``value`` is not 4-D, does not match the
            ``(N, G, ., D)`` or device the cache holds, or the two differ in ``(N, G, L_new)``.

    Example:
        >>> cache = KVCache()  # every cache class has this interface
        >>> keys, values = cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
        >>> tuple(keys.shape), cache.length, cache.positions.tolist(), cache.mask(1).tolist()
        ((1, 2, 3, 4), 3, [0, 1, 2], [[True, True, True]])
    """

    window: int | None = None
    sinks: int = 0
    keeps_keys = True  # False: a layer's state instead (attnlib.linear_attention.StateCache)
    streaming = False  # True: a model's global layer takes it as a chosen approximation

    def __init__(self):
        self.length = 0
        self.positions: Tensor | None = None
        self._owner: tuple[int, str] | None = None  # (id, description) of the layer it serves

    def claim(self, layer, *, name: str = "cache") -> None:
        """Record ``layer`` as the one layer this cache belongs to (at its first use, or when
        the layer makes it: ``new_cache()``); refuse any other.

        A cache holds one layer's keys at positions it numbers itself: a second layer's step
        would append its keys to the first one's and count its tokens again (the cache would
        then say 2 tokens after one). The layer's ``check_cache`` calls this.

        Raises:
            ValueError: if the cache belongs to another layer; the message names ``name``,
                both layers and how to make one cache per layer.

        Example:
            >>> from attnlib import MultiHeadAttention
            >>> a, b, cache = MultiHeadAttention(12, 3), MultiHeadAttention(12, 3), KVCache()
            >>> cache.claim(a)
            >>> cache.claim(b)
            Traceback (most recent call last):
              ...
            ValueError: cache belongs to the layer MultiHeadAttention(embed_dim=12, ...
        """
        text = f"{type(layer).__name__}({layer.extra_repr()}) at {hex(id(layer))}"
        if self._owner is None:
            self._owner = (id(layer), text)
        elif self._owner[0] != id(layer):
            raise ValueError(
                f"{name} belongs to the layer {self._owner[1]}; got another layer, {text}: a "
                f"cache serves one layer, so start a new {type(self).__name__}() per layer, or "
                "use model.new_cache() for a model"
            )

    @property
    def key(self) -> Tensor | None:
        """The kept keys, ``(N, G, S_kept, D)``, or ``None`` before the first step."""
        raise NotImplementedError

    @property
    def value(self) -> Tensor | None:
        """The kept values, ``(N, G, S_kept, D_v)``, or ``None`` before the first step."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes of memory the cache holds (for a buffer, all of it, used or not)."""
        raise NotImplementedError

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add a step's keys and values; return the keys and values to attend to.

        The returned keys include the new ones (the queries of this step need them); their
        absolute positions are then in ``cache.positions``. They may be views of the cache's
        memory: use them before the next step.
        """
        self._check("key", key, self.key)
        self._check("value", value, self.value)
        if key.shape[:3] != value.shape[:3]:
            raise ValueError(
                f"key and value must have the same (N, G, L_new); got key {shape_str(key.shape)} "
                f"and value {shape_str(value.shape)}"
            )
        keys, values, positions = self._update(key, value)
        self.positions = positions
        self.length += key.shape[2]
        return keys, values

    def _update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def mask(self, L_new: int) -> Tensor:
        """Boolean ``(L_new, S)`` mask for the newest ``L_new`` queries against the keys the last
        :meth:`update` returned: causal, within the window if there is one, and always the
        first ``sinks`` positions."""
        positions = self.positions  # (S,)
        q = torch.arange(self.length - L_new, self.length, device=positions.device).unsqueeze(1)
        j = positions.unsqueeze(0)  # (1, S)
        allowed = j <= q  # (L_new, S)
        if self.window is not None:
            allowed &= (j > q - self.window) | (j < self.sinks)
        return allowed

    def position_ids(self, L_new: int) -> tuple[Tensor, Tensor]:
        """The positions a relative position scheme gives the newest ``L_new`` queries,
        ``(L_new,)``, and the keys the last :meth:`update` returned, ``(S,)``: their absolute
        positions (a :class:`SinkCache` renumbers them)."""
        device = self.positions.device
        return torch.arange(self.length - L_new, self.length, device=device), self.positions

    def _check(self, name: str, new: Tensor, kept: Tensor | None) -> None:
        if not isinstance(new, Tensor):
            raise TypeError(
                f"{name} must be a 4-D tensor (N, G, L_new, D); got {type(new).__name__}"
            )
        if new.dim() != 4:
            raise ValueError(
                f"{name} must be a 4-D tensor (N, G, L_new, D); got {shape_str(new.shape)}"
            )
        if kept is None:
            return
        N, G, _, D = kept.shape
        if (new.shape[0], new.shape[1], new.shape[3]) != (N, G, D):
            raise ValueError(
                f"{name} must have shape (N={N}, G={G}, L_new, D={D}) to extend this cache; got "
                f"{shape_str(new.shape)} (a cache belongs to one layer and one batch: start a "
                f"new {type(self).__name__}() for another)"
            )
        if new.dtype != kept.dtype or new.device != kept.device:
            raise (TypeError if new.dtype != kept.dtype else ValueError)(
                f"{name} must have the cache's dtype {kept.dtype} on {kept.device}; got "
                f"{new.dtype} on {new.device}"
            )

    def _options(self) -> str:
        return f"window={self.window}"

    def __repr__(self) -> str:
        shape = None if self.key is None else tuple(self.key.shape)
        return f"{type(self).__name__}({self._options()}, length={self.length}, key shape={shape})"


def _keep_last(t: Tensor, keep: int) -> Tensor:
    """The last ``keep`` positions of ``t`` ``(N, G, S, D)``, copied so that the memory of the
    dropped ones is freed (a view would hold on to it)."""
    return t[:, :, -keep:].clone() if keep < t.shape[2] else t


class KVCache(Cache):
    """The keys and values of the tokens decoded so far, appended with ``torch.cat``.

    Step ``t`` appends the new keys and values, ``(N, G, L_new, D)``, and attends from the new
    queries to everything kept; the cache applies the causal mask itself (and the window):

    .. math::

        o_t = \\operatorname{softmax}\\left(\\frac{q_t [K_{<t}; k_t]^\\top}{\\sqrt{D}}\\right)
        [V_{<t}; v_t]

    The memory it holds is ``2 * N * G * S * D * bytes`` for ``S`` kept positions (times the
    number of layers for a whole model): :attr:`nbytes`. Each step appends with ``torch.cat``,
    an ``O(S)`` copy, which keeps the code short; :class:`PreallocatedCache` writes into a
    buffer instead, and :class:`RollingCache` keeps a window without copying.

    Args:
        window: keep only the last ``window`` positions (rolling cache of fixed size); each
            query then sees keys ``i - window < j <= i``. ``None``: keep everything.

    Attributes:
        key: the kept keys, ``(N, G, S, D)``, or ``None`` before the first step.
        value: the kept values, ``(N, G, S, D)``, or ``None`` before the first step.
        length: the number of tokens seen so far, the position of the next token.
        positions: the absolute positions of the keys the last step attended to, ``(S,)``.

    Shape:
        ``update(key, value)``: ``key``, ``value`` ``(N, G, L_new, D)``; returns the keys and
        values to attend to, ``(N, G, S_kept + L_new, D)``.

    Raises:
        TypeError: if ``window`` is not an ``int``, a step's ``key`` or ``value`` is not a tensor
            or has another dtype than the cache.
        ValueError: if ``window`` is below 1, or a step's ``key`` or ``value``
            (``update(key, value)``) does not match the shape ``(N, G, ., D)`` or device of the
            cache.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> from attnlib import MultiHeadAttention
        >>> mha = MultiHeadAttention(12, 3, num_kv_heads=1).eval()
        >>> x = torch.randn(1, 5, 12)
        >>> cache = KVCache()
        >>> steps = torch.cat([mha(x[:, t : t + 1], cache=cache)[0] for t in range(5)], dim=1)
        >>> full, _ = mha(x, mask=torch.ones(5, 5).tril().bool())
        >>> torch.allclose(steps, full, atol=1e-6), cache.length, tuple(cache.key.shape)
        (True, 5, (1, 1, 5, 4))
    """

    def __init__(self, *, window: int | None = None):
        super().__init__()
        self.window = None if window is None else check_int("window", window, low=1)
        self._key: Tensor | None = None
        self._value: Tensor | None = None

    @property
    def key(self) -> Tensor | None:
        return self._key

    @property
    def value(self) -> Tensor | None:
        return self._value

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept keys and values."""
        if self._key is None:
            return 0
        return self._key.nbytes + self._value.nbytes

    def crop(self, length: int) -> None:
        """Forget every token after the first ``length``: the cache as it was after them.

        A timing loop repeats one step from the same state this way, and speculative decoding
        drops the tokens it rejects. The kept keys are views of the ones held (no copy); the
        positions of the tokens kept stay what they were, so the next step is numbered
        ``length``.

        Raises:
            TypeError: if ``length`` is not an ``int``.
            ValueError: if ``length`` is not in ``0 .. self.length``, or the cache has a
                ``window`` and ``length < self.length`` (it has dropped the tokens before the
                window, which the earlier step would see again).

        Example:
            >>> cache = KVCache()
            >>> _ = cache.update(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
            >>> cache.crop(2)
            >>> cache.length, tuple(cache.key.shape)
            (2, (1, 1, 2, 2))
            >>> _ = cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
            >>> cache.positions.tolist()  # the new token is numbered 2 again
            [0, 1, 2]
        """
        length = check_int("length", length, low=0, high=self.length)
        if self.window is not None and length < self.length:
            raise ValueError(
                f"length must be {self.length} for a KVCache(window={self.window}): it has "
                "dropped the tokens before its window, so it cannot go back; crop needs "
                f"window=None; got length={length}"
            )
        if length == 0:
            self._key = self._value = self.positions = None
        elif self._key is not None:
            self._key = self._key[:, :, :length]  # (N, G, length, D), a view
            self._value = self._value[:, :, :length]
            self.positions = None if self.positions is None else self.positions[:length]
        self.length = length

    def _update(self, key, value):
        if self._key is None:
            keys, values = key, value
        else:
            keys = torch.cat([self._key, key], dim=2)  # (N, G, S_kept + L_new, D)
            values = torch.cat([self._value, value], dim=2)
        first = self.length - (keys.shape[2] - key.shape[2])  # position of keys[:, :, 0]
        positions = torch.arange(first, first + keys.shape[2], device=key.device)  # (S,)
        keep = keys.shape[2] if self.window is None else min(self.window, keys.shape[2])
        self._key, self._value = _keep_last(keys, keep), _keep_last(values, keep)
        return keys, values, positions


def _empty_like_step(step: Tensor, length: int) -> Tensor:
    """A buffer ``(N, G, length, D)`` with the batch, heads, size, dtype and device of a step."""
    N, G, _, D = step.shape
    return step.new_zeros(N, G, length, D)


class PreallocatedCache(Cache):
    """A key-value cache that allocates its whole length once and writes each step in place.

    The first step allocates two buffers of ``max_len`` positions, ``(N, G, max_len, D)``; step
    ``t`` writes its keys and values at positions ``length .. length + L_new - 1`` and attends to
    the view ``[:length + L_new]``. Nothing is copied but the new tokens: a step costs
    ``O(L_new)`` memory traffic where :class:`KVCache`'s ``torch.cat`` copies the whole cache.
    The price is memory reserved up front: :attr:`nbytes` counts the whole buffer
    (:attr:`used_nbytes` the positions written). HF's ``StaticCache`` and nanoGPT-style
    ``model.setup_caches(max_len)`` work this way.

    Args:
        max_len: how many positions the buffer holds.

    Attributes:
        key: a view of the written keys, ``(N, G, length, D)``, or ``None``.
        value: a view of the written values, ``(N, G, length, D_v)``, or ``None``.
        length: the number of tokens written so far.
        max_len: the buffer's length.

    Raises:
        TypeError: if ``max_len`` is not an ``int``; as :class:`KVCache` for a step's tensors.
        ValueError: if ``max_len`` is below 1, a step would write past ``max_len`` (the buffer
            is full), or a step does not match the buffer's shape or device.

    Example:
        >>> cache = PreallocatedCache(8)
        >>> k = torch.zeros(1, 2, 3, 4)
        >>> keys, values = cache.update(k, k)
        >>> tuple(keys.shape), cache.length, cache.nbytes, cache.used_nbytes
        ((1, 2, 3, 4), 3, 512, 192)
    """

    def __init__(self, max_len: int):
        super().__init__()
        self.max_len = check_int("max_len", max_len, low=1)
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None

    @property
    def key(self) -> Tensor | None:
        return None if self._key_buffer is None else self._key_buffer[:, :, : self.length]

    @property
    def value(self) -> Tensor | None:
        return None if self._value_buffer is None else self._value_buffer[:, :, : self.length]

    @property
    def nbytes(self) -> int:
        """Bytes of the two buffers, written or not."""
        if self._key_buffer is None:
            return 0
        return self._key_buffer.nbytes + self._value_buffer.nbytes

    @property
    def used_nbytes(self) -> int:
        """Bytes of the positions written so far."""
        return 0 if self._key_buffer is None else self.key.nbytes + self.value.nbytes

    def crop(self, length: int) -> None:
        """Forget every token after the first ``length`` (their slots are written again by the
        next step), as :meth:`KVCache.crop`.

        Raises:
            TypeError: if ``length`` is not an ``int``.
            ValueError: if ``length`` is not in ``0 .. self.length``.

        Example:
            >>> cache = PreallocatedCache(8)
            >>> _ = cache.update(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
            >>> cache.crop(1)
            >>> cache.length, tuple(cache.key.shape)
            (1, (1, 1, 1, 2))
        """
        self.length = check_int("length", length, low=0, high=self.length)
        self.positions = None if self.positions is None else self.positions[: self.length]

    def _update(self, key, value):
        end = self.length + key.shape[2]
        if end > self.max_len:
            raise ValueError(
                f"this PreallocatedCache(max_len={self.max_len}) is full: it holds {self.length} "
                f"positions and the step adds {key.shape[2]}; make it with a larger max_len"
            )
        if self._key_buffer is None:
            self._key_buffer = _empty_like_step(key, self.max_len)  # (N, G, max_len, D)
            self._value_buffer = _empty_like_step(value, self.max_len)  # (N, G, max_len, D_v)
        self._key_buffer[:, :, self.length : end] = key  # in place: no copy of the rest
        self._value_buffer[:, :, self.length : end] = value
        positions = torch.arange(end, device=key.device)  # (S,) = (length + L_new,)
        return self._key_buffer[:, :, :end], self._value_buffer[:, :, :end], positions

    def _options(self) -> str:
        return f"max_len={self.max_len}"


class RollingCache(Cache):
    """A ring buffer of the last ``window`` positions: sliding-window attention in fixed memory.

    Position ``p`` lives in slot ``p % window``. A step of one token overwrites the slot of the
    position that has just left the window (``length - window``) and attends to the whole
    buffer: no copy. A step of several tokens (a prefill) attends to the kept positions and the
    new ones together, then writes the last ``window`` new ones into their slots. The keys come
    out in slot order, not position order; attention does not care, because the mask and the
    position scheme read ``positions``. Mistral's rolling buffer cache and Gemma's local
    layers keep their windows this way.

    Args:
        window: ``w``: each query sees keys ``i - w < j <= i``; the buffer has ``w`` slots.

    Attributes:
        key: the ring's written key slots, ``(N, G, min(length, w), D)``, or ``None``.
        value: the ring's written value slots, ``(N, G, min(length, w), D_v)``, or ``None``.

    Raises:
        TypeError: if ``window`` is not an ``int``; as :class:`KVCache` for a step's tensors.
        ValueError: if ``window`` is below 1; as :class:`KVCache` for a step's tensors.

    Example:
        >>> cache = RollingCache(3)
        >>> for t in range(5):
        ...     _ = cache.update(torch.full((1, 1, 1, 1), float(t)), torch.zeros(1, 1, 1, 1))
        >>> cache.key.flatten().tolist(), cache.positions.tolist()  # slots hold 3, 4 and 2
        ([3.0, 4.0, 2.0], [3, 4, 2])
    """

    def __init__(self, window: int):
        super().__init__()
        self.window = check_int("window", window, low=1)
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None

    @property
    def key(self) -> Tensor | None:
        if self._key_buffer is None:
            return None
        return self._key_buffer[:, :, : min(self.length, self.window)]

    @property
    def value(self) -> Tensor | None:
        if self._value_buffer is None:
            return None
        return self._value_buffer[:, :, : min(self.length, self.window)]

    @property
    def nbytes(self) -> int:
        """Bytes of the ring buffer (``window`` positions once the first step is in)."""
        if self._key_buffer is None:
            return 0
        return self._key_buffer.nbytes + self._value_buffer.nbytes

    def _slot_positions(self, total: int, device) -> Tensor:
        """The position held by each written slot when ``total`` tokens have been written:
        the latest ``p < total`` with ``p % w == slot``."""
        slots = torch.arange(min(total, self.window), device=device)  # (S,)
        return (total - 1) - (total - 1 - slots) % self.window  # (S,)

    def _write(self, key: Tensor, value: Tensor) -> None:
        """Write the last ``window`` of a step's positions into their slots."""
        L, w = key.shape[2], self.window
        keep = min(L, w)
        first = self.length + L - keep  # position of the first written token
        slots = torch.arange(first, first + keep, device=key.device) % w  # (keep,)
        self._key_buffer[:, :, slots] = key[:, :, L - keep :]
        self._value_buffer[:, :, slots] = value[:, :, L - keep :]

    def _update(self, key, value):
        L, w = key.shape[2], self.window
        total = self.length + L
        if self._key_buffer is None:
            self._key_buffer = _empty_like_step(key, w)  # (N, G, w, D)
            self._value_buffer = _empty_like_step(value, w)  # (N, G, w, D_v)
        if L == 1 or total <= w:  # nothing a new query needs is overwritten: write, then read
            self._write(key, value)
            S = min(total, w)
            positions = self._slot_positions(total, key.device)  # (S,)
            return self._key_buffer[:, :, :S], self._value_buffer[:, :, :S], positions
        kept_positions = self._slot_positions(self.length, key.device)  # (S_kept,)
        keys = torch.cat([self.key, key], dim=2)  # (N, G, S_kept + L, D): a prefill reads
        values = torch.cat([self.value, value], dim=2)  # the old slots before they go
        new_positions = torch.arange(self.length, total, device=key.device)  # (L,)
        self._write(key, value)
        return keys, values, torch.cat([kept_positions, new_positions])

    def _options(self) -> str:
        return f"window={self.window}"


class SinkCache(Cache):
    """StreamingLLM's cache (Xiao et al., 2024): the first ``sinks`` positions and the last
    ``window``.

    Trained models put much of their attention on the first tokens (*attention sinks*), even
    when those say little. A plain window cache drops them once the text is longer than the
    window, and the model's predictions degrade; keeping the first few (``sinks = 4`` in the
    paper) restores them at the cost of a few positions. A query at position ``i`` sees keys
    ``j < sinks`` and ``i - window < j <= i``.

    As in the paper, a relative position scheme numbers the kept keys by their place in the
    cache, ``0 .. S-1`` (:meth:`position_ids`), not by their place in the text: the distance
    from a query to a sink stays within what the model saw in training. The cache is simple
    rather than fast (``torch.cat``, then the positions to keep).

    Args:
        window: how many recent positions each query sees (itself included), ``>= 1``.
        sinks: how many first positions every query also sees, ``>= 0``.

    Attributes:
        key: the kept keys, ``(N, G, S_kept, D)``, or ``None``.
        value: the kept values, ``(N, G, S_kept, D_v)``, or ``None``.

    Raises:
        TypeError: if ``window`` or ``sinks`` is not an ``int``; as :class:`KVCache` for a
            step's tensors.
        ValueError: if ``window`` is below 1 or ``sinks`` below 0; as :class:`KVCache` for a
            step's tensors.

    Example:
        >>> cache = SinkCache(2, sinks=1)
        >>> for t in range(5):
        ...     _ = cache.update(torch.full((1, 1, 1, 1), float(t)), torch.zeros(1, 1, 1, 1))
        >>> cache.key.flatten().tolist(), cache.mask(1).tolist()
        ([0.0, 3.0, 4.0], [[True, True, True]])
    """

    streaming = True

    def __init__(self, window: int, *, sinks: int = 4):
        super().__init__()
        self.window = check_int("window", window, low=1)
        self.sinks = check_int("sinks", sinks, low=0)
        self._key: Tensor | None = None
        self._value: Tensor | None = None
        self._positions: Tensor | None = None  # (S_kept,) absolute positions of the kept keys

    @property
    def key(self) -> Tensor | None:
        return self._key

    @property
    def value(self) -> Tensor | None:
        return self._value

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept keys and values."""
        return 0 if self._key is None else self._key.nbytes + self._value.nbytes

    def _update(self, key, value):
        new_positions = torch.arange(self.length, self.length + key.shape[2], device=key.device)
        if self._key is None:
            keys, values, positions = key, value, new_positions
        else:  # the kept keys no new query sees leave first, so that none is numbered
            seen = (self._positions < self.sinks) | (self._positions > self.length - self.window)
            index = seen.nonzero().flatten()  # (S_seen,)
            keys = torch.cat([self._key[:, :, index], key], dim=2)  # (N, G, S_seen + L_new, D)
            values = torch.cat([self._value[:, :, index], value], dim=2)
            positions = torch.cat([self._positions[index], new_positions])  # (S,)
        total = self.length + key.shape[2]
        keep = (positions < self.sinks) | (positions > total - 1 - self.window)  # (S,)
        index = keep.nonzero().flatten()  # (S_kept,)
        self._key, self._value = keys[:, :, index], values[:, :, index]  # copies
        self._positions = positions[index]
        return keys, values, positions

    def position_ids(self, L_new: int) -> tuple[Tensor, Tensor]:
        """Positions by place in the cache: keys ``0 .. S-1``, the new queries the last
        ``L_new`` of them."""
        S = self.positions.shape[0]
        k_pos = torch.arange(S, device=self.positions.device)  # (S,)
        return k_pos[S - L_new :], k_pos

    def _options(self) -> str:
        return f"window={self.window}, sinks={self.sinks}"


class ModelCache:
    """One key-value cache per layer of a :class:`attnlib.LanguageModel`.

    Made by :meth:`attnlib.LanguageModel.new_cache`; pass it to
    :meth:`attnlib.LanguageModel.forward` as ``cache=`` with the new tokens only. It holds
    ``2 * layers * N * G * S * D`` numbers: :attr:`nbytes`.

    Args:
        layers: the number of layers, each given a :class:`attnlib.decoding.KVCache`, or the
            list of per-layer caches (any :class:`attnlib.decoding.Cache`: a
            ``PreallocatedCache``, a ``RollingCache`` for a local layer, ...).
        window: with a number of layers, keep only the last ``window`` positions in every
            layer (sliding-window attention); ``None`` keeps all.

    Attributes:
        layers: the list of per-layer caches.

    A model takes only a cache made for it (:meth:`attnlib.LanguageModel.forward` raises
    otherwise): as many layers as it has blocks, each cache with the window of its layer (a
    layer without a window also takes a :class:`attnlib.decoding.SinkCache`, StreamingLLM's
    approximation chosen on purpose), each serving one layer of this model (the layer's
    ``check_cache``), and, once filled, keys of its heads, head size, dtype and device for the
    same batch of sequences.

    Raises:
        TypeError: if ``layers`` is neither an ``int`` nor a list of caches.
        ValueError: if ``layers`` or ``window`` is not a positive integer, the list is empty,
            or ``window`` is given with a list.

    Example:
        >>> cache = ModelCache(2)
        >>> cache.length, cache.nbytes, len(cache.layers)
        (0, 0, 2)
        >>> from attnlib.decoding import PreallocatedCache, RollingCache
        >>> ModelCache([RollingCache(16), PreallocatedCache(64)]).windows
        (16, None)
    """

    def __init__(self, layers: int | list[Cache], *, window: int | None = None):
        if isinstance(layers, (list, tuple)):
            if window is not None:
                raise ValueError(
                    "window must be None when layers is a list of caches (each cache has its "
                    f"own window); got window={window!r}"
                )
            if not layers or not all(isinstance(c, Cache) for c in layers):
                raise TypeError(
                    "layers must be a number of layers or a non-empty list of "
                    "attnlib.decoding.Cache objects; got "
                    f"[{', '.join(type(c).__name__ for c in layers)}]"
                )
            self.layers = list(layers)
        else:
            layers = check_int("layers", layers, low=1)
            self.layers = [KVCache(window=window) for _ in range(layers)]

    @property
    def length(self) -> int:
        """The number of tokens seen so far, which is the position of the next token."""
        return self.layers[0].length

    @property
    def window(self) -> int | None:
        """The window of the first layer (``None``: all positions); see :attr:`windows`."""
        return self.layers[0].window

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Each layer's window (``None``: all positions)."""
        return tuple(layer.window for layer in self.layers)

    @property
    def nbytes(self) -> int:
        """Bytes held by the caches of every layer."""
        return sum(layer.nbytes for layer in self.layers)

    def __repr__(self) -> str:
        return f"ModelCache(layers={len(self.layers)}, length={self.length}, nbytes={self.nbytes})"
