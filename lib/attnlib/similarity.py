"""Cosine similarity of vectors and of the rows of matrices."""

from __future__ import annotations

import torch  # noqa: F401  (the examples use it)
import torch.nn.functional as F
from torch import Tensor

from attnlib._checks import check_tensor, shape_str

__all__ = ["cosine_matrix", "cosine_similarity"]


def cosine_similarity(u: Tensor, v: Tensor) -> Tensor:
    """Cosine of the angle between two vectors.

    .. math::

        \\cos(\\mathbf{u}, \\mathbf{v}) = \\frac{\\mathbf{u} \\cdot \\mathbf{v}}
        {\\lVert \\mathbf{u} \\rVert \\, \\lVert \\mathbf{v} \\rVert}

    A zero vector has cosine 0 with everything (PyTorch's ``eps`` convention).

    Args:
        u, v: vectors of the same length.

    Returns:
        A 0-D tensor in ``[-1, 1]``.

    Shape:
        ``u``: ``(D,)``; ``v``: ``(D,)``; output: ``()``.

    Raises:
        TypeError: if an input is not a float tensor. ValueError: if an input is not 1-D or
        the lengths differ.

    Example:
        >>> cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
        tensor(0.7071)
    """
    check_tensor("u", u, (1,))
    check_tensor("v", v, (1,))
    if u.shape != v.shape:
        raise ValueError(
            f"u and v must have the same length; got u {shape_str(u.shape)} and v "
            f"{shape_str(v.shape)}"
        )
    return F.normalize(u, dim=0) @ F.normalize(v, dim=0)


def cosine_matrix(X: Tensor, Y: Tensor | None = None) -> Tensor:
    """Cosines of every row of ``X`` with every row of ``Y`` (seed 000's ``attn_cos_weights``).

    .. math::

        C_{ij} = \\cos(\\mathbf{x}_i, \\mathbf{y}_j) = \\hat{X} \\hat{Y}^\\top,
        \\qquad \\hat{\\mathbf{x}}_i = \\mathbf{x}_i / \\lVert \\mathbf{x}_i \\rVert

    Args:
        X: one vector per row.
        Y: one vector per row; defaults to ``X`` (then ``C`` is symmetric with ones on the
            diagonal).

    Returns:
        The ``(n, m)`` matrix of cosines.

    Shape:
        ``X``: ``(n, D)``; ``Y``: ``(m, D)``; output: ``(n, m)``.

    Raises:
        TypeError: if an input is not a float tensor. ValueError: if an input is not 2-D or
        the row lengths differ.

    Example:
        >>> cosine_matrix(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
        tensor([[1.0000, 0.7071],
                [0.7071, 1.0000]])
    """
    check_tensor("X", X, (2,))
    Y = X if Y is None else Y
    check_tensor("Y", Y, (2,))
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"Y must have shape (m, D={X.shape[1]}) like X; got {shape_str(Y.shape)}")
    return F.normalize(X, dim=1) @ F.normalize(Y, dim=1).T  # (n, m)
