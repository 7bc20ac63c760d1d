"""Input checks shared by the modules: each raises with the argument's name, what was
expected and what came, so a reader can fix the call from the message alone.

The rules, decided here once for the whole package:

- **Where**: a public function or a module's ``forward`` checks its arguments once, on entry;
  the private kernels it calls (``_attention``, ``_attend``, ...) trust them and check nothing.
- **Which exception**: ``TypeError`` when an argument has the wrong *type* (not a tensor, not
  an ``int``, an integer tensor where a float one is needed, a dtype that differs from the
  module's); ``ValueError`` when its type is right and its *value* is wrong (a shape, a size
  below 1, a probability outside ``[0, 1)``, a tensor on another device).
- **Traceable**: a check reads types, shapes, dtypes and devices, never the values of a tensor,
  so ``torch.compile(fullgraph=True)`` traces every public entry; the few checks that must read
  values (token ids within the vocabulary) are skipped under ``torch.compiler.is_compiling()``.
- **One integer check, one number check**: every integer argument of the package goes through
  :func:`check_int` and every real one through :func:`check_real`, so that they all take the
  same things (a Python or NumPy number, a 0-D tensor) and refuse the same (a ``bool`` first),
  with one message: ``"<name> must be <what>; got <type> <value>"``.

Checks only: the mask arithmetic that attention applies lives in :mod:`attnlib.attention`, the
repr and file helpers in :mod:`attnlib._util`.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np
import torch
from torch import Tensor

from attnlib._util import short_repr

INDEX_DTYPES = (torch.int64, torch.int32)  # what nn.Embedding takes as indices
BEYOND_FLOAT32 = "is out of the float32 range (largest 3.4028235e+38)"


def shape_str(shape) -> str:
    """``(2, 7, 12)`` for a ``torch.Size``/tuple, the way the error messages print shapes
    (``(4,)`` for one dimension, as Python prints a 1-tuple)."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def check_tensor(name: str, x, ranks: tuple[int, ...]) -> Tensor:
    """Check that ``x`` is a floating-point tensor whose rank is one of ``ranks``; a
    ``ranks`` of ``(r, None)`` means ``r`` or more (any number of batch dimensions)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if ranks[-1] is None:
        if x.dim() < ranks[0]:
            raise ValueError(
                f"{name} must be at least {ranks[0]}-D; got {x.dim()}-D with shape "
                f"{shape_str(x.shape)}"
            )
    elif x.dim() not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name} must be {want}; got {x.dim()}-D with shape {shape_str(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {x.dtype}")
    return x


def check_same_kind(**tensors: Tensor) -> None:
    """Check that the tensors share one dtype and one device (PyTorch would raise deep inside
    a matrix product, naming neither argument)."""
    (first, t0), *rest = tensors.items()
    for name, t in rest:
        if t.dtype != t0.dtype:
            raise TypeError(
                f"{first} and {name} must have the same dtype; got {first} {t0.dtype} and "
                f"{name} {t.dtype} (convert one with .to({t0.dtype}))"
            )
        if t.device != t0.device:
            raise ValueError(
                f"{first} and {name} must be on the same device; got {first} on {t0.device} "
                f"and {name} on {t.device}"
            )


def _and(items: list[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_batch_broadcast(**tensors: Tensor) -> None:
    """The batch dimensions (all but the last two) of the named tensors broadcast together;
    else a ValueError naming each tensor with its shape."""
    try:
        torch.broadcast_shapes(*(t.shape[:-2] for t in tensors.values()))
    except RuntimeError:
        shapes = [f"{name} {shape_str(t.shape)}" for name, t in tensors.items()]
        raise ValueError(
            f"{_and(list(tensors))} batch dimensions must broadcast; got {_and(shapes)}"
        ) from None


def check_qk(query: Tensor, key: Tensor) -> None:
    """``query (..., L, d_k)`` and ``key (..., S, d_k)`` can be multiplied: float tensors of one
    kind, the same ``d_k >= 1``, batch dimensions that broadcast."""
    check_tensor("query", query, (2, None))
    check_tensor("key", key, (2, None))
    check_same_kind(query=query, key=key)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension d_k; got query "
            f"{shape_str(query.shape)} (d_k={query.shape[-1]}) and key {shape_str(key.shape)} "
            f"(d_k={key.shape[-1]})"
        )
    if query.shape[-1] == 0:
        raise ValueError(f"query and key must have d_k >= 1; got query {shape_str(query.shape)}")
    check_batch_broadcast(query=query, key=key)


def check_value(query: Tensor, key: Tensor, value: Tensor) -> None:
    """``value (..., S, d_v)`` has one row per key and batch dimensions that broadcast."""
    check_tensor("value", value, (2, None))
    check_same_kind(query=query, value=value)
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"value must have one row per key, shape (..., S={key.shape[-2]}, d_v); "
            f"got {shape_str(value.shape)}"
        )
    check_batch_broadcast(query=query, key=key, value=value)


def check_int(
    name: str, n, *, low: int | None = None, high: int | None = None, what: str | None = None
) -> int:
    """``n`` as an ``int``, the one integer check of the package: a Python or NumPy integer or a
    0-D int64 or int32 tensor (a ``bool``, a float, a string and a tensor of another dtype are
    refused, not cast; a traced size, ``torch.SymInt``, passes as it is), in ``low .. high``
    (``None``: no bound).

    ``what`` spells what is expected for the message; by default ``"a positive integer"`` for
    ``low=1``, else ``"an integer"``, ``"an integer >= low"`` or ``"an integer in low..high"``.
    TypeError if ``n`` is not an integer, ValueError if it is outside the range.

    Example:
        >>> check_int("num_heads", np.int64(4), low=1)
        4
        >>> check_int("num_heads", True, low=1)
        Traceback (most recent call last):
          ...
        TypeError: num_heads must be a positive integer; got bool True
    """
    if isinstance(n, int) and not isinstance(n, bool):
        value = n
    elif isinstance(n, torch.SymInt):
        value = n
    elif isinstance(n, Tensor):
        value = int(n.item()) if n.dim() == 0 and n.dtype in INDEX_DTYPES else None
    elif isinstance(n, (bool, np.bool_)):
        value = None
    else:
        try:
            value = operator.index(n)  # a NumPy integer
        except TypeError:
            value = None
    if what is None:
        if low == 1 and high is None:
            what = "a positive integer"
        elif high is not None:
            what = f"an integer in {low}..{high}"
        else:
            what = "an integer" if low is None else f"an integer >= {low}"
    if value is None:
        raise TypeError(f"{name} must be {what}; got {type(n).__name__} {short_repr(n)}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be {what}; got {value!r}")
    return value


def check_sizes(**sizes) -> tuple[int, ...]:
    """Each keyword's value through :func:`check_int` with ``low=1``, in order: a layer's sizes.

    Example:
        >>> check_sizes(embed_dim=8, num_heads=np.int64(2))
        (8, 2)
    """
    return tuple(check_int(name, n, low=1) for name, n in sizes.items())


def check_real(name: str, x, what: str = "a real number", ok=None) -> float:
    """``x`` as a ``float``, the one number check of the package: a finite real number (a
    Python or NumPy number or a 0-D tensor of one; a ``bool`` and a string are refused) for
    which ``ok(x)`` holds (``None``: any). ``what`` says which, e.g. ``"a number > 1"``.

    TypeError if ``x`` is not a real number; ValueError if ``ok(x)`` fails (NaN fails every
    comparison) or ``x`` is infinite.

    Example:
        >>> check_real("base", np.float32(2.5), "a number > 1", lambda b: b > 1)
        2.5
        >>> check_real("base", 1, "a number > 1", lambda b: b > 1)
        Traceback (most recent call last):
          ...
        ValueError: base must be a number > 1; got 1
    """
    value = x.item() if isinstance(x, np.generic) else x  # a NumPy number as Python's
    if isinstance(x, Tensor):
        real = not (x.is_complex() or x.dtype == torch.bool)
        value = x.item() if x.dim() == 0 and real else None
    elif isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        value = None
    if value is None:
        raise TypeError(f"{name} must be {what}; got {type(x).__name__} {short_repr(x)}")
    if ok is not None and not ok(value):
        raise ValueError(f"{name} must be {what}; got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return float(value)


def check_dropout(name: str, p) -> float:
    """``p`` is a probability in ``[0, 1)``, returned as a ``float``: :func:`check_real`, with
    TypeError if it is not a real number, ValueError if it is outside ``[0, 1)``."""
    return check_real(name, p, "a probability in [0, 1)", lambda p: 0 <= p < 1)


def check_dim(name: str, dim, ndim: int) -> int:
    """``dim`` indexes one of the ``ndim`` dimensions of ``name`` (negative counts from the end);
    returned as the non-negative index."""
    dim = check_int("dim", dim, what="an int")
    if not -ndim <= dim < ndim:
        raise ValueError(
            f"dim must be in [{-ndim}, {ndim - 1}] for the {ndim}-D {name}; got {dim}"
            if ndim
            else f"dim must index a dimension of {name}, which is 0-D; got {dim}"
        )
    return dim % ndim


def check_floating_dtype(name: str, dtype) -> torch.dtype:
    """``dtype`` is a floating-point ``torch.dtype``."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point torch.dtype; got {dtype!r}")
    return dtype


def check_module_input(name: str, x: Tensor, weight: Tensor) -> None:
    """An input must have its module's dtype and be on its module's device (PyTorch would raise
    inside ``F.linear``, or, for a module on the ``meta`` device, return memory that holds
    nothing)."""
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's weights are {weight.dtype}; convert "
            f"the input (x.to({weight.dtype})) or the module (module.to({x.dtype}))"
        )
    if x.device != weight.device:
        hint = (
            " (a module on the meta device has no values: give it weights with "
            "module.to_empty(device=...) and initialise or load them)"
            if weight.device.type == "meta"
            else ""
        )
        raise ValueError(
            f"{name} is on {x.device} but the module's weights are on {weight.device}; move "
            f"the input (x.to({str(weight.device)!r})) or the module{hint}"
        )


def check_input(
    x, mask, *, weight: Tensor, width: int, heads: int, key_length: int | None = None, name="x"
) -> tuple[Tensor, Tensor | None, bool]:
    """The one check of a layer's input and mask, and its batch dimension added.

    ``x`` must be a float tensor ``(L, width)`` or ``(N, L, width)`` of the dtype and device of
    ``weight`` (the module's); ``mask`` ``None``, or boolean or float and broadcastable to the
    scores ``(N, heads, L, S)`` (``S = key_length``, default ``L``): ``(L, S)``, ``(N, L, S)``
    or ``(N, H, L, S)`` (unbatched ``(L, S)`` or ``(H, L, S)``).

    Returns:
        ``(x, mask, batched)``: ``x`` ``(N, L, width)`` (a view with ``N = 1`` if it came
        unbatched), ``mask`` ``None`` or 4-D, broadcastable to ``(N, H, L, S)``, and whether
        ``x`` had its batch dimension (:func:`unbatch` takes it off the results).

    Example:
        >>> causal = torch.ones(5, 5).tril().bool()
        >>> x, mask, batched = check_input(
        ...     torch.zeros(5, 12), causal, weight=torch.zeros(1), width=12, heads=3
        ... )
        >>> tuple(x.shape), tuple(mask.shape), batched
        ((1, 5, 12), (1, 1, 5, 5), False)
    """
    check_tensor(name, x, (2, 3))
    check_module_input(name, x, weight)
    batched = x.dim() == 3
    if x.shape[-1] != width:
        n = f"N={x.shape[0]}, " if batched else ""
        letter = "E" if name in ("x", "query") else "width"
        raise ValueError(
            f"{name} must have shape ({n}L, {letter}={width}); got {shape_str(x.shape)}"
        )
    if not batched:
        x = x.unsqueeze(0)  # (1, L, width)
    S = x.shape[1] if key_length is None else key_length
    mask = as_heads_mask(mask, batched, (x.shape[0], heads, x.shape[1], S), x.device)
    return x, mask, batched


def as_heads_mask(mask, batched: bool, scores: tuple[int, int, int, int], device):
    """``mask`` (``None`` passes) checked against the scores ``(N, H, L, S)`` of a batched or
    unbatched input (:func:`check_mask`) and made 4-D, broadcastable to them: the shapes every
    attention layer takes, ``(L, S)``, ``(N, L, S)`` or ``(N, H, L, S)`` (unbatched ``(L, S)``
    or ``(H, L, S)``); a 3-D mask of a batched input is ``(N, L, S)``, the same for every head.
    """
    if mask is None:
        return None
    N, H, L, S = scores
    if batched:
        allowed = "(L, S), (N, L, S) or (N, H, L, S)"
        if isinstance(mask, Tensor) and mask.dim() == 3:  # (N, L, S): check before
            check_mask(mask, (N, L, S), allowed, device)  # aligning it with (N, H, L, S)
            mask = mask.unsqueeze(1)  # (N, 1, L, S): the same mask for every head
        else:
            check_mask(mask, (N, H, L, S), allowed, device)
    else:
        check_mask(mask, (H, L, S), "(L, S) or (H, L, S)", device)
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D, for F.sdpa


def cache_alone(cache, mask, key=None, value=None) -> None:
    """With a ``cache`` (the new tokens of a causal self-attention) a call has no ``key``,
    ``value`` or ``mask``: the cache applies the causal mask."""
    if cache is not None and (key is not None or value is not None or mask is not None):
        raise ValueError(
            "cache must not be combined with key, value or mask: with a cache, query holds "
            "the new tokens of a causal self-attention and the cache applies the mask"
        )


def unbatch(batched: bool, *tensors: Tensor | None):
    """Undo :func:`check_input`'s batch dimension: each tensor (``None`` passes) without its
    first dimension when the input came unbatched; one tensor or a tuple, as given.

    Example:
        >>> output, weights = unbatch(False, torch.zeros(1, 5, 12), None)
        >>> output.shape, weights
        (torch.Size([5, 12]), None)
        >>> unbatch(True, torch.zeros(1, 5, 12)).shape
        torch.Size([1, 5, 12])
    """
    if not batched:
        tensors = tuple(None if t is None else t.squeeze(0) for t in tensors)
    return tensors[0] if len(tensors) == 1 else tensors


def check_mask(mask, target: tuple[int, ...], allowed: str, device=None) -> Tensor:
    """Check that ``mask`` is boolean or floating point, broadcasts to ``target`` (the
    scores' shape) and, if ``device`` is given, lies on it (the query's device).

    ``allowed`` spells the accepted shapes for the message, e.g. ``"(L, S) or (N, L, S)"``.
    """
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"mask must be a torch.Tensor, boolean (True = may attend) or floating point "
            f"(added to the scores); got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"mask must be boolean (True = may attend) or floating point (added to the scores, "
            f"-inf = blocked); got dtype {mask.dtype}. Convert a 0/1 mask with `mask.bool()`, "
            "a PyTorch attn_mask (True = blocked) with `~attn_mask`"
        )
    ok = 1 <= mask.dim() <= len(target) and all(
        m in (1, t) for m, t in zip(reversed(mask.shape), reversed(target))
    )
    if not ok:  # e.g. a key-padding mask (N, 1, S) broadcasts over the queries: accepted
        raise ValueError(
            f"mask must have shape {allowed} = {shape_str(target)} "
            f"(broadcastable); got {shape_str(mask.shape)}"
        )
    if device is not None and mask.device != device:
        raise ValueError(f"mask must be on the device of query, {device}; got {mask.device}")
    return mask


def as_words(name: str, words) -> list[str]:
    """``words`` as a list of ``str``, or a TypeError naming the first item that is not."""
    if isinstance(words, str):
        raise TypeError(f"{name} must be a sequence of str, not one str; got {short_repr(words)}")
    try:
        words = list(words)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of str; got {type(words).__name__}") from None
    try:
        "".join(words)  # a fast check that every item is a str
    except TypeError:
        i, bad = next((i, w) for i, w in enumerate(words) if not isinstance(w, str))
        raise TypeError(
            f"{name} must all be str; got {type(bad).__name__} {short_repr(bad)} at position {i}"
        ) from None
    return words


def as_matrix(name: str, vectors) -> np.ndarray:
    """``vectors`` as a 2-D NumPy array of real numbers with at least one column, without
    copying an array (a read-only memory map stays one)."""
    if isinstance(vectors, Tensor):
        if vectors.is_complex() or vectors.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers; got dtype {vectors.dtype}")
        vectors = vectors.detach().cpu()
        if vectors.dtype not in (torch.float32, torch.float64, torch.float16):
            vectors = vectors.float()  # bfloat16 and integers: NumPy has no bfloat16
        array = vectors.numpy()
    elif isinstance(vectors, np.ndarray):
        array = vectors
    elif isinstance(vectors, (str, bytes)):
        raise ValueError(f"{name} must be a 2-D array (V, D); got {type(vectors).__name__}")
    else:
        try:
            array = np.asarray(vectors)
        except ValueError:  # NumPy refuses rows of different lengths
            raise ValueError(
                f"{name} must be a 2-D array (V, D); got a ragged nested list"
            ) from None
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers; got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (V, D); got {shape_str(array.shape)}")
    if array.shape[1] == 0:
        raise ValueError(
            f"{name} must have at least one column, (V, D) with D >= 1; got "
            f"{shape_str(array.shape)}"
        )
    return array


def values_unreadable(x: Tensor) -> bool:
    """Whether a test of ``x``'s values must be skipped: under ``torch.compile`` (a branch on
    values breaks the graph) and on the ``meta`` device (shapes without values, where
    ``bool(t)`` raises). The code then takes the path that is right whatever the values are."""
    return torch.compiler.is_compiling() or x.device.type == "meta"


def check_ids(ids, vocab_size: int, name: str = "ids") -> Tensor:
    """``ids`` is an ``int64`` or ``int32`` tensor ``(L,)`` or ``(N, L)`` of token indices in
    ``0 .. vocab_size - 1``. TypeError for another dtype (``uint8`` and ``bool`` index tensors
    are masks in PyTorch, ``int8``/``int16`` are not indices to ``nn.Embedding``), ValueError
    for another rank or an index out of range. The range is a test of the values: skipped
    where they cannot be read (:func:`values_unreadable`)."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token indices; got {type(ids).__name__}")
    if ids.dtype not in INDEX_DTYPES:
        hint = (
            " (a uint8 or bool index tensor is a mask in PyTorch, not indices)"
            if ids.dtype in (torch.uint8, torch.bool)
            else ""
        )
        raise TypeError(
            f"{name} must be an integer tensor of token indices, int64 or int32; got dtype "
            f"{ids.dtype}{hint}: convert with {name}.long()"
        )
    if ids.dim() not in (1, 2):
        raise ValueError(
            f"{name} must have shape (L,) or (N, L); got {ids.dim()}-D {shape_str(ids.shape)}"
        )
    if values_unreadable(ids):  # the test below reads the values
        return ids
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids[(ids < 0) | (ids >= vocab_size)].unique().tolist()[:5]
        raise ValueError(
            f"{name} must hold token indices in 0..{vocab_size - 1} (vocab_size={vocab_size}); "
            f"got {bad}"
        )
    return ids


def _ids_dtype_hint(dtype: torch.dtype) -> str:
    """Why a tensor of ``dtype`` cannot hold token ids, and how to convert exact ones."""
    if dtype == torch.bool:
        return "a bool tensor is a mask, not token ids"
    if dtype.is_floating_point or dtype.is_complex:
        return "a float tensor is refused, not rounded: convert exact ids with ids.long()"
    bits = torch.iinfo(dtype).bits
    if bits > 16:
        return "convert with ids.long()"
    return (
        f"{'an' if bits == 8 else 'a'} {bits}-bit tensor holds at most {2**bits} distinct ids, "
        "so larger ones may have "
        "wrapped around already: build the ids as int64 (torch.long), or convert with ids.long()"
    )


def check_ids_tensor(name: str, ids) -> Tensor:
    """``ids`` is a tensor of token ids whose dtype ``nn.Embedding`` takes (int64 or int32):
    TypeError for anything else (a list, a float, bool, int8 or uint8 tensor)."""
    if not isinstance(ids, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of token ids (int64); got {type(ids).__name__} "
            f"(convert with torch.tensor({name}))"
        )
    if ids.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"{name} must hold token ids as torch.int64 (long) or torch.int32; got dtype "
            f"{ids.dtype} ({_ids_dtype_hint(ids.dtype)})"
        )
    return ids


def check_cache_fits(
    name: str, cache, *, N: int, kv_heads: int, head_dim: int, dtype, device, hint: str
) -> None:
    """A key-value cache that already holds keys, ``(N', G', S, D')``, can take a step of
    ``N`` sequences through a layer of ``kv_heads`` key/value heads of size ``head_dim``, in
    ``dtype`` on ``device``; else an error naming ``name``, what it holds and what the step
    needs, then ``hint`` (how to make the right cache). An empty cache fits any step."""
    cache_fits(name, cache, N, kv_heads, head_dim, dtype, device, hint)


def cache_fits(name, cache, N, kv_heads, head_dim, dtype, device, hint) -> None:
    """:func:`check_cache_fits` without the spy's count: what a layer's ``check_cache`` runs
    (a model runs it once per layer)."""
    key = cache.key
    if key is None:
        return
    n, g, s, d = key.shape
    if (n, g, d) != (N, kv_heads, head_dim):
        raise ValueError(
            f"{name} holds keys of shape (N={n}, G={g}, S={s}, D={d}); this step needs "
            f"(N={N}, G={kv_heads}, S, D={head_dim}): {hint}"
        )
    if key.dtype != dtype:
        raise TypeError(
            f"{name} holds keys of dtype {key.dtype}; this step computes in {dtype}: {hint}"
        )
    if key.device != device:
        raise ValueError(f"{name} holds keys on {key.device}; this step runs on {device}: {hint}")


def check_model_cache(cache, cls, *, num_layers: int, windows) -> None:
    """``cache`` is a ``cls`` (``ModelCache``) made for this model: one layer cache per block,
    each layer's sliding window in its cache (a cache without it would keep, and attend to,
    positions the model must not see; a layer without a window also takes a ``SinkCache``,
    StreamingLLM's approximation), and the same number of tokens seen in every layer. What
    each layer's cache holds (its heads, sizes, batch, dtype, device, owner) the layer checks
    itself (``check_cache``)."""
    hint = "a cache belongs to one model and one batch; start a new one with model.new_cache()"
    if not isinstance(cache, cls):
        raise TypeError(
            f"cache must be an attnlib.{cls.__name__} (model.new_cache()); got "
            f"{type(cache).__name__}"
        )
    if len(cache.layers) != num_layers:
        raise ValueError(
            f"cache must have one layer cache per block ({num_layers}); got {len(cache.layers)}"
            f": {hint}"
        )
    for i, (layer, window) in enumerate(zip(cache.layers, windows)):
        if layer.streaming and window is None:
            continue  # a SinkCache on a global layer: StreamingLLM's approximation, on purpose
        if layer.sinks:
            raise ValueError(
                f"cache must keep the model's window={window} (sliding-window attention) in every "
                f"layer; got a SinkCache with sinks={layer.sinks} in layer {i}: a SinkCache "
                "(StreamingLLM) stands in for a layer without a window; for a windowed layer use "
                "RollingCache(window) or "
                "KVCache(window=window)"
            )
        if layer.window != window:
            raise ValueError(
                f"cache must keep the model's window={window} (sliding-window attention) in every "
                f"layer; got window={layer.window} in layer {i}: {hint}"
            )
    lengths = [layer.length for layer in cache.layers]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"cache must have seen the same tokens in every layer; got lengths {lengths}: {hint}"
        )


def as_id_list(name: str, ids, *, flatten: bool = False) -> list[int]:
    """``ids`` (a tensor of int64 or int32 ids, or a sequence of ints) as a list of ``int``.

    TypeError for a str, a non-sequence, a tensor of another dtype, or an item that is not an
    integer (a float is refused, not truncated; a ``bool`` is refused); ValueError for a tensor
    that is not 1-D, unless ``flatten``, which reads a tensor of any shape in row-major order.
    """
    if isinstance(ids, Tensor):
        check_ids_tensor(name, ids)
        if not flatten and ids.dim() != 1:
            raise ValueError(f"{name} must be 1-D, (T,); got shape {shape_str(ids.shape)}")
        return ids.reshape(-1).tolist()
    if isinstance(ids, (str, bytes, bytearray)):
        raise TypeError(
            f"{name} must be a tensor or a sequence of int token ids; got {type(ids).__name__} "
            f"{short_repr(ids)}"
        )
    try:
        items = list(ids)
    except TypeError:
        raise TypeError(
            f"{name} must be a tensor or a sequence of int token ids; got {type(ids).__name__}"
        ) from None
    if all(type(i) is int for i in items):  # the common case, at C speed
        return items
    out = []
    for i, x in enumerate(items):
        try:
            out.append(check_int(name, x))
        except TypeError:
            raise TypeError(
                f"{name} must all be int token ids; got {type(x).__name__} {short_repr(x)} at "
                f"position {i}"
                + (" (a float is refused, not truncated)" if isinstance(x, float) else "")
            ) from None
    return out


def _check_indices(
    name: str, t, size: int, what: str, like: Tensor | None = None, like_name: str = "ids"
) -> Tensor:
    """``t`` is an integer tensor of ``(L,)`` or ``(N, L)`` (or of the shape and device of
    ``like``, named ``like_name``) whose values lie in ``0 .. size - 1``."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of {what}; got {type(t).__name__}")
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(f"{name} must be an integer tensor of {what}; got dtype {t.dtype}")
    _check_like(name, t, like, like_name)
    if torch.compiler.is_compiling():  # the test below reads the values: not traceable
        return t
    if t.numel() and (t.min() < 0 or t.max() >= size):
        bad = t[(t < 0) | (t >= size)].unique().tolist()[:5]
        raise ValueError(f"{name} must hold {what} in 0..{size - 1}; got {bad}")
    return t


def _check_like(name: str, t: Tensor, like: Tensor | None, like_name: str) -> None:
    """``t`` is ``(L,)`` or ``(N, L)``, or has the shape and device of ``like``."""
    if like is None:
        if t.dim() not in (1, 2):
            raise ValueError(
                f"{name} must have shape (L,) or (N, L); got {t.dim()}-D {shape_str(t.shape)}"
            )
        return
    if t.shape != like.shape:
        raise ValueError(
            f"{name} must have the shape of {like_name}, {shape_str(like.shape)}; got "
            f"{shape_str(t.shape)}"
        )
    if t.device != like.device:
        raise ValueError(
            f"{name} must be on the device of {like_name}, {like.device}; got {t.device}"
        )


def _check_attention_mask(attention_mask, like: Tensor, like_name: str = "ids") -> Tensor:
    """``attention_mask`` is a boolean tensor, or an integer tensor of 0s and 1s, with the
    shape and device of ``like``."""
    what = "1 (a real token) or 0 (padding)"
    if not isinstance(attention_mask, Tensor):
        raise TypeError(
            f"attention_mask must be a torch.Tensor of {what}; got {type(attention_mask).__name__}"
        )
    if attention_mask.dtype == torch.bool:
        _check_like("attention_mask", attention_mask, like, like_name)
        return attention_mask
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(
            f"attention_mask must be an integer or boolean tensor of {what}; got dtype "
            f"{attention_mask.dtype} (convert it with .long())"
        )
    return _check_indices("attention_mask", attention_mask, 2, what, like, like_name)
