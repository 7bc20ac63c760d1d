"""Cosine similarity of vectors and of the rows of matrices.

Both functions compute the cosine so that it is right for every finite, nonzero vector,
however small or large its entries: each vector is first divided by its largest absolute
entry (which does not change its direction), so its squared length can neither underflow
to 0 (entries around ``1e-13``, where ``F.normalize``'s ``eps=1e-12`` floor would shrink the
cosine) nor overflow to ``inf`` (entries around ``1e20`` in float32, whose squares pass
float32's largest number, ``3.4e38``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlib._checks import check_tensor, shape_str

__all__ = ["cosine_matrix", "cosine_similarity"]


def _check_vectors(name: str, x, rank: int, other: str) -> Tensor:
    """``check_tensor``, with a hint on how to fix the commonest mistakes."""
    if not isinstance(x, Tensor):
        hint = f"; convert it with torch.as_tensor({name})" if _is_array_like(x) else ""
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}{hint}")
    if x.dim() != rank:
        hint = (
            f"; for the cosines of the rows of matrices use {other}"
            if rank == 1
            else f"; for two vectors use {other}, for one vector as a row use {name}[None]"
        )
        raise ValueError(
            f"{name} must be {rank}-D; got {x.dim()}-D with shape {shape_str(x.shape)}{hint}"
        )
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex()):
        raise TypeError(
            f"{name} must be a floating-point tensor; got dtype {x.dtype}; convert it with "
            f"{name}.float()"
        )
    check_tensor(name, x, (rank,))  # complex tensors end here
    if x.shape[-1] == 0:
        raise ValueError(
            f"{name} must have at least one component (D >= 1); got shape {shape_str(x.shape)}"
        )
    return x


def _is_array_like(x) -> bool:
    return hasattr(x, "__array__") or isinstance(x, (list, tuple))


def _check_pair(a_name: str, a: Tensor, b_name: str, b: Tensor) -> torch.dtype:
    """Same device; returns the dtype of the result (the promoted dtype of the two)."""
    if a.device != b.device:
        raise ValueError(
            f"{a_name} and {b_name} must be on the same device; got {a_name} on {a.device} "
            f"and {b_name} on {b.device}; move one with .to({a_name}.device)"
        )
    return torch.promote_types(a.dtype, b.dtype)


def _unit(x: Tensor, dim: int, dtype: torch.dtype) -> Tensor:
    """``x / ||x||`` along ``dim``, right for every finite nonzero vector; zero vectors stay
    zero; a vector with a NaN or an infinite entry becomes all NaN.

    Computed in ``dtype`` (at least float32: float16 and bfloat16 are upcast), after
    dividing ``x`` by its largest absolute entry, so that its squared length lies in
    ``[1, D]``: no underflow, no overflow.
    """
    x = x.to(dtype)
    largest = x.abs().amax(dim=dim, keepdim=True).detach()  # NaN if x has a NaN
    # The cosine does not depend on the length of its vectors: dividing by a constant does
    # not change the result, nor (detached) its gradient.
    scaled = x / torch.where(largest > 0, largest, torch.ones_like(largest))  # inf/inf = NaN
    norm = torch.linalg.vector_norm(scaled, dim=dim, keepdim=True)  # in [1, sqrt(D)], or 0
    return scaled / torch.where(norm > 0, norm, torch.ones_like(norm))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def cosine_similarity(u: Tensor, v: Tensor) -> Tensor:
    """Cosine of the angle between two vectors.

    .. math::

        \\cos(\\mathbf{u}, \\mathbf{v}) = \\frac{\\mathbf{u} \\cdot \\mathbf{v}}
        {\\lVert \\mathbf{u} \\rVert \\, \\lVert \\mathbf{v} \\rVert}

    The value is right (to the precision of the dtype) for any finite nonzero vectors,
    whatever the size of their entries, from ``1e-40`` to ``1e38`` in float32: each vector
    is divided by its largest absolute entry before its length is computed, so its squared
    length neither underflows nor overflows. float16 and bfloat16 inputs are computed in
    float32. The result is clamped to ``[-1, 1]`` (rounding could otherwise give
    ``1.0000001``, and ``torch.acos`` of it NaN).

    *Zero vectors.* A zero vector has no direction, and the formula gives ``0/0``. We return
    cosine 0 (as ``torch.nn.functional.cosine_similarity`` and ``F.normalize`` do): the zero
    vector is treated as similar to nothing. A teaching library favours this over NaN or an
    error because zero vectors are legitimate rows (torchtext's GloVe gives unknown words
    the zero vector), a cosine matrix of a sentence with one unknown word should still show
    the other words' cosines, and a weight of 0 adds nothing to a cosine-weighted sum.

    *NaN and infinity.* A vector with a NaN or an infinite entry has no defined direction:
    its cosines are NaN. They are returned, not raised, as every PyTorch operation does, so
    a bad row shows up where it is.

    Args:
        u: the first vector, floating point (float16, bfloat16, float32 or float64).
        v: the second vector, of the same length, on the same device. If the dtypes differ,
            the result has the promoted one (``torch.promote_types``).

    Returns:
        A 0-D tensor in ``[-1, 1]`` (NaN if a vector has a NaN or infinite entry), of the
        inputs' dtype.

    Shape:
        ``u``: ``(D,)``; ``v``: ``(D,)``; output: ``()``.

    Raises:
        TypeError: if an input is not a tensor (NumPy arrays and lists included: convert them
            with ``torch.as_tensor``), or its dtype is not floating point (integers, bool,
            complex).
        ValueError: if an input is not 1-D (use :func:`cosine_matrix` for rows of matrices),
            is empty (``D = 0``), the lengths differ, or the tensors are on different devices.

    Example:
        >>> cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
        tensor(0.7071)
        >>> cosine_similarity(torch.tensor([1e-30, 0.0]), torch.tensor([1e30, 1e30]))
        tensor(0.7071)
        >>> cosine_similarity(torch.zeros(2), torch.tensor([1.0, 1.0]))  # no direction: 0
        tensor(0.)
    """
    _check_vectors("u", u, 1, "cosine_matrix")
    _check_vectors("v", v, 1, "cosine_matrix")
    if u.shape != v.shape:
        raise ValueError(
            f"u and v must have the same length; got u {shape_str(u.shape)} and v "
            f"{shape_str(v.shape)}"
        )
    dtype = _check_pair("u", u, "v", v)
    compute = _compute_dtype(dtype)
    cosine = _unit(u, 0, compute) @ _unit(v, 0, compute)
    return cosine.clamp(-1.0, 1.0).to(dtype)


def cosine_matrix(X: Tensor, Y: Tensor | None = None) -> Tensor:
    """Cosines of every row of ``X`` with every row of ``Y`` (seed 000's ``attn_cos_weights``).

    .. math::

        C_{ij} = \\cos(\\mathbf{x}_i, \\mathbf{y}_j) = \\hat{X} \\hat{Y}^\\top,
        \\qquad \\hat{\\mathbf{x}}_i = \\mathbf{x}_i / \\lVert \\mathbf{x}_i \\rVert

    Computed as :func:`cosine_similarity` computes one cosine, and with the same choices:
    right for any finite nonzero rows, however small or large their entries; a zero row
    has cosine 0 with every row (itself included: its diagonal entry is 0, not 1); a row
    with a NaN or an infinite entry gives a NaN row (or column) of ``C``; values clamped
    to ``[-1, 1]``.

    Args:
        X: one vector per row, floating point.
        Y: one vector per row, as long as ``X``'s, on the same device; defaults to ``X``
            (then ``C`` is symmetric with ones on the diagonal, except for zero rows). If the
            dtypes differ, the result has the promoted one.

    Returns:
        The ``(n, m)`` matrix of cosines, of the inputs' dtype.

    Shape:
        ``X``: ``(n, D)``; ``Y``: ``(m, D)``; output: ``(n, m)``. ``n`` or ``m`` may be 0.

    Raises:
        TypeError: if an input is not a tensor (convert NumPy arrays with
            ``torch.as_tensor``) or its dtype is not floating point.
        ValueError: if an input is not 2-D (use :func:`cosine_similarity` for two vectors,
            ``x[None]`` for one vector as a row), has no columns (``D = 0``), the row lengths
            differ, or the tensors are on different devices.

    Example:
        >>> cosine_matrix(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
        tensor([[1.0000, 0.7071],
                [0.7071, 1.0000]])
        >>> cosine_matrix(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))  # a zero row: cosines 0
        tensor([[1., 0.],
                [0., 0.]])
    """
    _check_vectors("X", X, 2, "cosine_similarity")
    if Y is None:
        Y = X
    else:
        _check_vectors("Y", Y, 2, "cosine_similarity")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"Y must have shape (m, D={X.shape[1]}) like X; got {shape_str(Y.shape)}")
    dtype = _check_pair("X", X, "Y", Y)
    compute = _compute_dtype(dtype)
    X_hat = _unit(X, 1, compute)  # (n, D), rows of length 1 (or 0)
    Y_hat = X_hat if Y is X else _unit(Y, 1, compute)  # (m, D)
    return (X_hat @ Y_hat.T).clamp(-1.0, 1.0).to(dtype)  # (n, m)
