"""Input checks shared by the modules: each raises with the argument's name, what was
expected and what came, so a reader can fix the call from the message alone."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def shape_str(shape) -> str:
    """``(2, 7, 12)`` for a ``torch.Size``/tuple, the way the error messages print shapes
    (``(4,)`` for one dimension, as Python prints a 1-tuple)."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def check_tensor(name: str, x, ranks: tuple[int, ...]) -> Tensor:
    """Check that ``x`` is a floating-point tensor whose rank is one of ``ranks``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() not in ranks:
        if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
            want = f"at least {ranks[0]}-D"  # (..., L, D): any number of batch dimensions
        else:
            want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name} must be {want}; got {x.dim()}-D with shape {shape_str(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {x.dtype}")
    return x


def check_mask(mask, target: tuple[int, ...], allowed: str) -> Tensor:
    """Check that ``mask`` is boolean or floating point and broadcasts to ``target`` (the
    scores' shape).

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
    return mask


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores with ``mask`` applied, as ``F.scaled_dot_product_attention``'s ``attn_mask``:
    a boolean mask sets the blocked scores (``False``) to ``-inf``; a float mask is added
    (cast to the scores' dtype)."""
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, -math.inf)
    return scores + mask.to(scores.dtype)


def attends_somewhere(mask: Tensor) -> Tensor:
    """``(..., L, 1)`` boolean: does each query row of ``mask`` leave at least one key?
    (For a float mask: at least one entry that is not ``-inf``.)"""
    allowed = mask if mask.dtype == torch.bool else mask != -math.inf
    return allowed.any(dim=-1, keepdim=True)
