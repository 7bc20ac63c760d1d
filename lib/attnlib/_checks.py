"""Input checks shared by the modules: each raises with the argument's name, what was
expected and what came, so a reader can fix the call from the message alone."""

from __future__ import annotations

import torch
from torch import Tensor


def shape_str(shape) -> str:
    """``(2, 7, 12)`` for a ``torch.Size``/tuple, the way the error messages print shapes."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def check_tensor(name: str, x, ranks: tuple[int, ...]) -> Tensor:
    """Check that ``x`` is a floating-point tensor whose rank is one of ``ranks``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name} must be {want}; got {x.dim()}-D with shape {shape_str(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {x.dtype}")
    return x


def check_mask(mask, target: tuple[int, ...], allowed: str) -> Tensor:
    """Check that ``mask`` is boolean and broadcasts to ``target`` (the scores' shape).

    ``allowed`` spells the accepted shapes for the message, e.g. ``"(L, S) or (N, L, S)"``.
    """
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a boolean torch.Tensor; got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a boolean tensor (True = may attend); got dtype {mask.dtype}. "
            "Convert an additive float mask with `mask == 0`, a PyTorch attn_mask with `~attn_mask`"
        )
    ok = mask.dim() <= len(target) and all(
        m in (1, t) for m, t in zip(reversed(mask.shape), reversed(target))
    )
    if not ok or mask.shape[-2:] != torch.Size(target[-2:]):
        raise ValueError(
            f"mask must have shape {allowed} = {shape_str(target)} "
            f"(broadcastable); got {shape_str(mask.shape)}"
        )
    return mask
