"""Attention at inference: a key-value cache for decoding one token at a time, and sliding
windows.

A causal language model generates token ``t`` from tokens ``0 .. t-1``. The keys and values of
the earlier tokens never change, so recomputing them at every step repeats work: a
:class:`KVCache` keeps them, and each step projects only the new token. Pass one cache per
attention layer to :class:`attnlib.MultiHeadAttention` as ``cache=``.

With ``window=w`` the cache keeps only the last ``w`` positions (a rolling cache of fixed
size, as in Mistral's sliding-window attention), and every query sees only the keys
``i - w < j <= i``, exactly the mask :func:`sliding_window_mask` builds for a whole sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlib._checks import check_positive_int, shape_str

__all__ = ["KVCache", "sliding_window_mask"]


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
    check_positive_int("L", L)
    check_positive_int("S", S)
    check_positive_int("window", window)
    return _sliding_window_mask(L, window, S, device)


def _sliding_window_mask(L: int, window: int, S: int, device) -> Tensor:
    """The kernel of :func:`sliding_window_mask`, without the checks (``L`` or ``S`` may be
    0)."""
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return (j <= i) & (j > i - window)  # (L, S)


class KVCache:
    """The keys and values of the tokens decoded so far, for one attention layer.

    Step ``t`` appends the new keys and values, ``(N, G, L_new, D)``, and attends from the new
    queries to everything kept; the cache applies the causal mask itself (and the window):

    .. math::

        o_t = \\operatorname{softmax}\\left(\\frac{q_t [K_{<t}; k_t]^\\top}{\\sqrt{D}}\\right)
        [V_{<t}; v_t]

    The memory it holds is ``2 * N * G * S * D * bytes`` for ``S`` kept positions (times the
    number of layers for a whole model): :attr:`nbytes`. Each step appends with ``torch.cat``,
    an ``O(S)`` copy, which keeps the code short; production caches preallocate a buffer of
    the maximum length and write into it.

    Args:
        window: keep only the last ``window`` positions (rolling cache of fixed size); each
            query then sees keys ``i - window < j <= i``. ``None``: keep everything.

    Attributes:
        key: the kept keys, ``(N, G, S, D)``, or ``None`` before the first step.
        value: the kept values, ``(N, G, S, D)``, or ``None`` before the first step.
        length: the number of tokens seen so far, the position of the next token.

    Shape:
        ``update(key, value)``: ``key``, ``value`` ``(N, G, L_new, D)``; returns the keys and
        values to attend to, ``(N, G, S_kept + L_new, D)``, and their positions ``(S_kept +
        L_new,)``.

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
        self.window = None if window is None else check_positive_int("window", window)
        self.key: Tensor | None = None
        self.value: Tensor | None = None
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept keys and values."""
        if self.key is None:
            return 0
        return self.key.numel() * self.key.element_size() * 2

    def _check(self, name: str, new: Tensor) -> None:
        if not isinstance(new, Tensor):
            raise TypeError(
                f"{name} must be a 4-D tensor (N, G, L_new, D); got {type(new).__name__}"
            )
        if new.dim() != 4:
            raise ValueError(
                f"{name} must be a 4-D tensor (N, G, L_new, D); got {shape_str(new.shape)}"
            )
        kept = self.key if name == "key" else self.value
        if kept is None:
            return
        N, G, _, D = kept.shape
        if (new.shape[0], new.shape[1], new.shape[3]) != (N, G, D):
            raise ValueError(
                f"{name} must have shape (N={N}, G={G}, L_new, D={D}) to extend this cache; got "
                f"{shape_str(new.shape)} (a cache belongs to one layer and one batch: start a "
                "new KVCache() for another)"
            )
        if new.dtype != kept.dtype or new.device != kept.device:
            raise (TypeError if new.dtype != kept.dtype else ValueError)(
                f"{name} must have the cache's dtype {kept.dtype} on {kept.device}; got "
                f"{new.dtype} on {new.device}"
            )

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Append a step's keys and values; return what to attend to, and their positions.

        The returned keys include the new ones (the queries of this step need them), and the
        positions are absolute, ``length - S_kept .. length + L_new - 1``. Afterwards the cache
        keeps the last ``window`` positions (all of them without a window).
        """
        self._check("key", key)
        self._check("value", value)
        if key.shape[:3] != value.shape[:3]:
            raise ValueError(
                f"key and value must have the same (N, G, L_new); got key {shape_str(key.shape)} "
                f"and value {shape_str(value.shape)}"
            )
        if self.key is None:
            keys, values = key, value
        else:
            keys = torch.cat([self.key, key], dim=2)  # (N, G, S_kept + L_new, D)
            values = torch.cat([self.value, value], dim=2)
        first = self.length - (keys.shape[2] - key.shape[2])  # position of keys[:, :, 0]
        positions = torch.arange(first, first + keys.shape[2], device=key.device)
        self.length += key.shape[2]
        keep = keys.shape[2] if self.window is None else min(self.window, keys.shape[2])
        if keep < keys.shape[2]:  # a rolling cache drops the oldest: copy, so that the
            keys, values = keys.contiguous(), values.contiguous()  # dropped memory is freed
            self.key, self.value = keys[:, :, -keep:].clone(), values[:, :, -keep:].clone()
        else:
            self.key, self.value = keys, values
        return keys, values, positions

    def mask(self, positions: Tensor, L_new: int) -> Tensor:
        """Boolean ``(L_new, S)`` mask for the newest ``L_new`` queries against keys at
        ``positions``: causal, and within the window if there is one."""
        q = torch.arange(self.length - L_new, self.length, device=positions.device).unsqueeze(1)
        allowed = positions.unsqueeze(0) <= q  # (L_new, S)
        if self.window is not None:
            allowed &= positions.unsqueeze(0) > q - self.window
        return allowed

    def __repr__(self) -> str:
        shape = None if self.key is None else tuple(self.key.shape)
        return f"KVCache(window={self.window}, length={self.length}, key shape={shape})"
