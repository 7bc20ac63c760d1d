"""Linear attention and DeltaNet: causal attention whose memory is a state of fixed size.

Softmax attention keeps every key and value of the text (a cache that grows with it). Replace
``exp(q . k)`` by a product of features ``phi(q) . phi(k)`` (Katharopoulos et al., 2020) and
the sum over the keys regroups into one matrix, the *state*
``S_t = sum_{i <= t} phi(k_i)^T v_i`` of shape ``(D, D_v)``, whatever ``t`` is: a token costs
the same at position 10 and at position 10 000. DeltaNet (Schlag et al., 2021; Yang et al.,
2024) writes into the state with the *delta rule* instead of adding to it: the value the state
gives for key ``k_t`` is moved towards ``v_t`` by a fraction ``beta_t``, so that a key written
twice is overwritten, not summed. Gated DeltaNet (Yang et al., 2025; Qwen3-Next's linear
layers) also lets the state decay by ``alpha_t`` at each token.

Each is computed three ways, equal up to rounding:

- **recurrent** (:func:`linear_attention_recurrent`, :func:`delta_rule_recurrent`): one token at
  a time, the state updated at each. The definition, and how such a model decodes.
- **parallel** (:func:`linear_attention`, :func:`delta_rule`): every token at once through a
  causally masked ``(L, L)`` matrix, as softmax attention is computed: ``O(L^2)``.
- **chunked** (:func:`linear_attention_chunked`, :func:`delta_rule_chunked`): chunks of ``C``
  tokens, the parallel form inside a chunk and the state carried from chunk to chunk, as such
  models are trained (flash-linear-attention): ``O(L C)`` work in matrix products.

Shapes: ``query`` and ``key`` ``(..., L, D)``, ``value`` ``(..., L, D_v)``, with the same batch
dimensions (usually ``(N, H)``); the attention is causal (token ``t`` sees ``i <= t``). States
are stored as ``(..., D, D_v)``, keys by values, so that ``o_t = q_t S_t`` with row vectors:
the transpose of the ``D_v x D`` state ``S_t`` of Yang et al., whose ``o_t = S_t q_t``
(flash-linear-attention keeps the same ``(K, V)`` layout as here). Every function returns the
output and the final state, and takes a ``state`` to start from (the state of the tokens
before): the forms can hand a sequence on to one another.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import (
    cache_fits,
    check_input,
    check_int,
    check_real,
    check_same_kind,
    check_tensor,
    shape_str,
    unbatch,
    values_unreadable,
)
from attnlib.decoding import Cache

__all__ = [
    "LinearAttention",
    "StateCache",
    "delta_rule",
    "delta_rule_chunked",
    "delta_rule_recurrent",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_chunked",
    "linear_attention_recurrent",
]

FeatureMap = str | Callable[[Tensor], Tensor]
LinearState = tuple[Tensor, Tensor]


def elu_feature_map(x: Tensor) -> Tensor:
    """The feature map of Katharopoulos et al. (2020): ``phi(x) = elu(x) + 1``, positive.

    .. math::

        \\phi(x) = \\begin{cases} x + 1 & x > 0 \\\\ e^x & x \\le 0 \\end{cases}

    Positive features make every ``phi(q) . phi(k)`` positive, so the normalised output is a
    weighted mean of the values, as softmax attention's is.

    Args:
        x: queries or keys, any shape, floating point.

    Returns:
        ``phi(x)``, same shape and dtype.

    Shape:
        ``x``: ``(*)``; output: ``(*)``.

    Raises:
        TypeError: if ``x`` is not a tensor (from ``F.elu``).

    Example:
        >>> elu_feature_map(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0.3679, 1.0000, 3.0000])
    """
    return F.elu(x) + 1


def _feature_map(feature_map) -> Callable[[Tensor], Tensor]:
    """The function of ``feature_map=``: ``"elu"``, ``"identity"`` or a callable."""
    if callable(feature_map):
        return feature_map
    if feature_map == "elu":
        return elu_feature_map
    if feature_map == "identity":
        return lambda x: x
    error = ValueError if isinstance(feature_map, str) else TypeError
    raise error(
        f"feature_map must be 'elu', 'identity' or a callable (a tensor's features); got "
        f"{feature_map!r}"
    )


def _check_qkv(query, key, value) -> None:
    """``query``, ``key`` ``(..., L, D)`` and ``value`` ``(..., L, D_v)`` of one sequence."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, t, (2, None))
    check_same_kind(query=query, key=key, value=value)
    if key.shape != query.shape:
        raise ValueError(
            f"key must have the shape of query {shape_str(query.shape)}, (..., L, D): causal "
            f"attention of a sequence to itself; got {shape_str(key.shape)}"
        )
    if value.shape[:-1] != query.shape[:-1]:
        want = ", ".join(str(s) for s in query.shape[:-1])
        raise ValueError(
            f"value must have shape (..., L, D_v) = ({want}, D_v), one row per token of query "
            f"{shape_str(query.shape)}; got {shape_str(value.shape)}"
        )


def _check_per_token(name: str, x, query: Tensor) -> None:
    """``x`` is a float tensor ``(..., L)``: one number per token (and head) of ``query``."""
    check_tensor(name, x, (1, None))
    check_same_kind(query=query, **{name: x})
    if x.shape != query.shape[:-1]:
        raise ValueError(
            f"{name} must have shape (..., L) = {shape_str(query.shape[:-1])}, one number per "
            f"token of query {shape_str(query.shape)}; got {shape_str(x.shape)}"
        )


def _check_state(name: str, state, shape: tuple[int, ...], query: Tensor) -> None:
    """``state`` is a float tensor of ``shape``, of the dtype and device of ``query``."""
    check_tensor(name, state, (1, None))
    check_same_kind(query=query, **{name: state})
    if state.shape != shape:
        raise ValueError(
            f"{name} must have shape {shape_str(shape)} (the batch dimensions of query, then D "
            f"and D_v); got {shape_str(state.shape)}"
        )


def _check_chunk_size(chunk_size) -> int:
    return check_int("chunk_size", chunk_size, low=1)


# ---- linear attention ------------------------------------------------------------------------


def _linear_prepare(query, key, value, feature_map, normalize, eps, state):
    """Check the arguments of the linear-attention forms; return ``phi(q)``, ``phi(k)``, the
    state ``(S, z)`` to start from (zeros by default) and ``eps``."""
    _check_qkv(query, key, value)
    phi = _feature_map(feature_map)
    if not isinstance(normalize, bool):
        raise TypeError(f"normalize must be a bool; got {type(normalize).__name__}")
    eps = check_real("eps", eps, "a number >= 0", lambda e: e >= 0)
    fq, fk = phi(query), phi(key)
    if not isinstance(fq, Tensor) or fq.shape[:-1] != query.shape[:-1] or fk.shape != fq.shape:
        got = shape_str(fq.shape) if isinstance(fq, Tensor) else type(fq).__name__
        raise ValueError(
            f"feature_map must map (..., L, D) to (..., L, D') (features of each row); got "
            f"{got} from query {shape_str(query.shape)}"
        )
    batch, Df, Dv = query.shape[:-2], fq.shape[-1], value.shape[-1]
    if state is None:
        return fq, fk, (fq.new_zeros(*batch, Df, Dv), fq.new_zeros(*batch, Df)), eps
    if not isinstance(state, tuple) or len(state) != 2:
        raise TypeError(
            f"state must be a tuple (S, z) as a linear_attention form returns it; got "
            f"{type(state).__name__}"
        )
    _check_state("state[0]", state[0], (*batch, Df, Dv), query)
    _check_state("state[1]", state[1], (*batch, Df), query)
    return fq, fk, state, eps


def _linear_chunk(fq, fk, v, S, z, normalize, eps):
    """Causal linear attention of one chunk (or a whole sequence) in the parallel form, from
    the state ``(S, z)`` of the tokens before it; returns the output and the new state."""
    A = (fq @ fk.transpose(-2, -1)).tril()  # (..., C, C): phi(q_t) . phi(k_i) for i <= t
    num = fq @ S + A @ v  # (..., C, D_v): the tokens before the chunk, then those in it
    out = num
    if normalize:
        den = (fq * z.unsqueeze(-2)).sum(-1, keepdim=True) + A.sum(-1, keepdim=True)  # (..., C, 1)
        out = num / (den + eps)
    S = S + fk.transpose(-2, -1) @ v  # (..., D', D_v)
    z = z + fk.sum(-2)  # (..., D')
    return out, S, z


def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    feature_map: FeatureMap = "elu",
    normalize: bool = True,
    eps: float = 1e-6,
    state: LinearState | None = None,
) -> tuple[Tensor, LinearState]:
    """Causal linear attention (Katharopoulos et al., 2020), parallel form: one ``(L, L)``
    matrix of feature products, masked causally.

    .. math::

        o_t = \\frac{\\sum_{i \\le t} (\\phi(q_t) \\cdot \\phi(k_i))\\, v_i}
                   {\\sum_{i \\le t} \\phi(q_t) \\cdot \\phi(k_i) + \\varepsilon}
            = \\frac{\\phi(q_t) S_t}{\\phi(q_t) \\cdot z_t + \\varepsilon},
        \\qquad S_t = \\sum_{i \\le t} \\phi(k_i)^\\top v_i,\\;
        z_t = \\sum_{i \\le t} \\phi(k_i)

    Softmax attention with ``exp(q . k / sqrt(D))`` replaced by ``phi(q) . phi(k)``; the
    middle form computes the matrix ``A = tril(phi(Q) phi(K)^T)`` and ``A V / rowsum(A)``, as
    attention does (``O(L^2)``); the right-hand form is :func:`linear_attention_recurrent`'s.
    There is no ``1 / sqrt(D)``: the features carry the scale.

    Args:
        query, key: ``Q``, ``K``, one row per token.
        value: ``V``, one row per token; its size ``D_v`` may differ from ``D``.
        feature_map: ``phi``: ``"elu"`` (the paper's ``elu(x) + 1``, :func:`elu_feature_map`),
            ``"identity"`` (``phi(x) = x``; use it with ``normalize=False``, as the
            denominator may then be near 0 or negative), or a callable mapping
            ``(..., L, D)`` to ``(..., L, D')``.
        normalize: divide by ``phi(q_t) . z_t + eps`` (the paper); ``False`` gives the
            numerator alone (unnormalised linear attention, as RetNet and DeltaNet use).
        eps: added to the denominator (the paper's code: ``1e-6``).
        state: ``(S, z)`` of the tokens before, as a form returns it; default zeros.

    Returns:
        ``(output, (S, z))``: the output, and the state after the last token.

    Shape:
        ``query``, ``key``: ``(..., L, D)``; ``value``: ``(..., L, D_v)``; output:
        ``(..., L, D_v)``; ``S``: ``(..., D', D_v)``; ``z``: ``(..., D')`` (``D' = D`` for the
        named feature maps).

    Raises:
        TypeError: if ``query``, ``key`` or ``value`` is not a float tensor, they differ in
            dtype, ``feature_map`` is neither a string nor callable, ``normalize`` is not a
            ``bool``, ``eps`` not a number or ``state`` not a tuple of two tensors.
        ValueError: if ``key`` has not the shape of ``query``, ``value`` has not one row per
            token, they lie on different devices, ``feature_map`` is another string or
            changes the rows, ``eps`` is negative or ``state`` has the wrong shape.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 2, 4, 5, 6).unbind(0)  # (N, H, L, D) = (2, 4, 5, 6) each
        >>> out, (S, z) = linear_attention(q, k, v)
        >>> out.shape, S.shape, z.shape
        (torch.Size([2, 4, 5, 6]), torch.Size([2, 4, 6, 6]), torch.Size([2, 4, 6]))
        >>> slow, _ = linear_attention_recurrent(q, k, v)
        >>> torch.allclose(out, slow, atol=1e-6)
        True
    """
    fq, fk, (S, z), eps = _linear_prepare(query, key, value, feature_map, normalize, eps, state)
    out, S, z = _linear_chunk(fq, fk, value, S, z, normalize, eps)
    return out, (S, z)


def linear_attention_recurrent(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    feature_map: FeatureMap = "elu",
    normalize: bool = True,
    eps: float = 1e-6,
    state: LinearState | None = None,
) -> tuple[Tensor, LinearState]:
    """Causal linear attention, recurrent form: one token at a time, a state of fixed size.

    .. math::

        S_t = S_{t-1} + \\phi(k_t)^\\top v_t, \\qquad z_t = z_{t-1} + \\phi(k_t), \\qquad
        o_t = \\frac{\\phi(q_t) S_t}{\\phi(q_t) \\cdot z_t + \\varepsilon}

    The same numbers as :func:`linear_attention` (up to rounding), computed as a recurrent
    network would: the memory is ``S`` ``(D', D_v)`` and ``z`` ``(D',)``, however long the
    text. This is how a linear-attention model decodes.

    Args:
        query, key, value, feature_map, normalize, eps, state: as :func:`linear_attention`.

    Returns:
        ``(output, (S, z))``: the output, and the state after the last token.

    Shape:
        As :func:`linear_attention`.

    Raises:
        TypeError: as :func:`linear_attention`.
        ValueError: as :func:`linear_attention`.

    Example:
        >>> q = k = torch.ones(1, 3, 1)  # phi(1) = 2: every key weighs the same
        >>> v = torch.tensor([[[3.0], [0.0], [6.0]]])
        >>> out, (S, z) = linear_attention_recurrent(q, k, v, eps=0.0)
        >>> out.flatten().tolist(), S.item(), z.item()  # running means; S = 2 * (3 + 0 + 6)
        ([3.0, 1.5, 3.0], 18.0, 6.0)
    """
    fq, fk, (S, z), eps = _linear_prepare(query, key, value, feature_map, normalize, eps, state)
    outs = []
    for t in range(query.shape[-2]):
        S = S + fk[..., t, :, None] * value[..., t, None, :]  # (..., D', D_v): phi(k_t)^T v_t
        z = z + fk[..., t, :]  # (..., D')
        q_t = fq[..., t, :]  # (..., D')
        o = (q_t.unsqueeze(-2) @ S).squeeze(-2)  # (..., D_v)
        if normalize:
            o = o / ((q_t * z).sum(-1, keepdim=True) + eps)
        outs.append(o)
    out = torch.stack(outs, dim=-2) if outs else value.new_zeros(value.shape)  # (..., L, D_v)
    return out, (S, z)


def linear_attention_chunked(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    chunk_size: int = 64,
    feature_map: FeatureMap = "elu",
    normalize: bool = True,
    eps: float = 1e-6,
    state: LinearState | None = None,
) -> tuple[Tensor, LinearState]:
    """Causal linear attention, chunked form: the parallel form inside chunks of ``C`` tokens,
    the state from one chunk to the next.

    For the chunk of tokens ``c`` (rows ``Q_c``, ``K_c``, ``V_c``) and the state ``S, z`` of
    every token before it:

    .. math::

        O_c = \\frac{\\phi(Q_c) S + \\operatorname{tril}(\\phi(Q_c) \\phi(K_c)^\\top) V_c}
                   {\\phi(Q_c) z + \\operatorname{rowsum}
                    (\\operatorname{tril}(\\phi(Q_c) \\phi(K_c)^\\top)) + \\varepsilon},
        \\qquad S \\leftarrow S + \\phi(K_c)^\\top V_c, \\quad
        z \\leftarrow z + \\textstyle\\sum_i \\phi(k_i)

    Only ``(C, C)`` matrices are formed: ``O(L C)`` work in matrix products rather than the
    parallel form's ``O(L^2)`` or the recurrent form's ``L`` small steps. ``C = 1`` is the
    recurrent form; ``C >= L`` is the parallel form. ``L`` need not be a multiple of ``C``.

    Args:
        query, key, value, feature_map, normalize, eps, state: as :func:`linear_attention`.
        chunk_size: ``C``, tokens per chunk, ``>= 1``.

    Returns:
        ``(output, (S, z))``: the output, and the state after the last token.

    Shape:
        As :func:`linear_attention`.

    Raises:
        TypeError: as :func:`linear_attention`, or if ``chunk_size`` is not an ``int``.
        ValueError: as :func:`linear_attention`, or if ``chunk_size`` is below 1.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 2, 10, 4).unbind(0)
        >>> out, _ = linear_attention_chunked(q, k, v, chunk_size=3)  # chunks 3, 3, 3, 1
        >>> torch.allclose(out, linear_attention(q, k, v)[0], atol=1e-6)
        True
    """
    C = _check_chunk_size(chunk_size)
    fq, fk, (S, z), eps = _linear_prepare(query, key, value, feature_map, normalize, eps, state)
    outs = []
    for start in range(0, query.shape[-2], C):
        chunk = slice(start, start + C)
        o, S, z = _linear_chunk(
            fq[..., chunk, :], fk[..., chunk, :], value[..., chunk, :], S, z, normalize, eps
        )  # (..., C, D_v)
        outs.append(o)
    out = torch.cat(outs, dim=-2) if outs else value.new_zeros(value.shape)  # (..., L, D_v)
    return out, (S, z)


# ---- DeltaNet: the delta rule ----------------------------------------------------------------


def _check_decay(decay, log_decay, query: Tensor) -> None:
    """At most one of ``decay`` (``alpha_t`` in ``[0, 1]``) and ``log_decay`` (``log alpha_t
    <= 0``, ``-inf`` allowed), one number per token of ``query``. The ranges are a test of the
    values (NaN fails it): skipped where they cannot be read (``values_unreadable``)."""
    if decay is not None and log_decay is not None:
        raise ValueError(
            "decay and log_decay must not both be given: decay= takes alpha_t in [0, 1], "
            "log_decay= takes log(alpha_t) <= 0; got both"
        )
    for name, x in (("decay", decay), ("log_decay", log_decay)):
        if x is None:
            continue
        _check_per_token(name, x, query)
        if values_unreadable(x):  # the test below reads the values
            continue
        ok = (x >= 0) & (x <= 1) if name == "decay" else x <= 0  # (..., L); False for NaN
        if not ok.all():
            what = (
                "probabilities alpha_t in [0, 1] (1 keeps the state, 0 resets it)"
                if name == "decay"
                else "log-decays log(alpha_t) <= 0 (0 keeps the state, -inf resets it)"
            )
            raise ValueError(f"{name} must hold {what}; got {x[~ok].flatten()[:5].tolist()}")


def _delta_prepare(query, key, value, beta, decay, log_decay, state):
    """Check the arguments of the delta-rule forms; return the L2-normalised keys, the
    log-decays ``log alpha_t`` (``None`` without a decay, ``-inf`` where ``alpha_t = 0``) and
    the state to start from (zeros by default)."""
    _check_qkv(query, key, value)
    _check_per_token("beta", beta, query)
    _check_decay(decay, log_decay, query)
    shape = (*query.shape[:-2], query.shape[-1], value.shape[-1])  # (..., D, D_v)
    if state is None:
        state = query.new_zeros(shape)
    else:
        _check_state("state", state, shape, query)
    if decay is not None:
        log_decay = torch.log(decay)  # (..., L), <= 0; -inf where alpha_t = 0
    return F.normalize(key, dim=-1), log_decay, state


def _working(*tensors: Tensor | None) -> list[Tensor | None]:
    """The tensors in the dtype the parallel and chunked forms compute in: float32 for float16
    and bfloat16 (``torch.linalg.solve_triangular`` has no half-precision CPU kernel, and the
    triangular solve wants the precision; flash-linear-attention computes in float32 too), else
    their own dtype, with no copy. ``None`` stays ``None``."""
    dtype = tensors[0].dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    return [None if t is None else t.to(work) for t in tensors]


def _cumulative(log_decay: Tensor | None, like: Tensor) -> Tensor:
    """``g_t = log(alpha_1 ... alpha_t)`` ``(..., C)`` within a chunk (``-inf`` from a decay of
    0 on); zeros without decay."""
    if log_decay is None:
        return like.new_zeros(like.shape[:-1])
    return log_decay.cumsum(-1)


def _decay_matrix(log_decay: Tensor | None, like: Tensor) -> Tensor:
    """``Gamma_ti = alpha_{i+1} ... alpha_t`` for ``i <= t`` and 0 above the diagonal, for the
    ``C`` tokens of ``like`` ``(..., C, D)``: ``(..., C, C)``; ``(C, C)`` ones on and below the
    diagonal without decay.

    Each exponent is summed over its own segment, ``sum_{i < j <= t} log alpha_j`` (Mamba 2's
    ``segsum``), not taken as a difference ``g_t - g_i`` of cumulative sums: a decay of 0 (log
    ``-inf``) gives ``Gamma_ti = 0`` across it and exact products after it, where ``-inf -
    (-inf)`` would be NaN, and no large cumulative sums cancel. The upper triangle is set to
    ``-inf`` before the ``exp``: every exponent is ``<= 0`` and nothing overflows."""
    C = like.shape[-2]
    causal = torch.ones(C, C, dtype=torch.bool, device=like.device).tril()  # (C, C): i <= t
    if log_decay is None:
        return causal.to(like.dtype)  # (C, C)
    later = causal.tril(-1)  # (C, C): j > i
    terms = log_decay.unsqueeze(-1).expand(*log_decay.shape, C)  # (..., C, C): [j, i] = log a_j
    terms = terms.masked_fill(~later, 0.0)  # (..., C, C): only the j > i count
    segment = terms.cumsum(-2)  # (..., C, C): [t, i] = sum_{i < j <= t} log alpha_j
    return torch.exp(segment.masked_fill(~causal, -math.inf))  # (..., C, C)


def delta_rule_recurrent(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    *,
    decay: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """DeltaNet's delta rule (Schlag et al., 2021), recurrent form: the definition, one token
    at a time.

    With the state ``S`` stored keys by values, ``(D, D_v)``, and row vectors:

    .. math::

        S_t = \\alpha_t (I - \\beta_t k_t^\\top k_t) S_{t-1} + \\beta_t k_t^\\top v_t
            = \\alpha_t S_{t-1} + \\beta_t k_t^\\top (v_t - k_t\\, \\alpha_t S_{t-1}),
        \\qquad o_t = q_t S_t

    ``k_t S`` is the value the state gives for the key ``k_t``; the rule moves it towards
    ``v_t`` by the fraction ``beta_t`` (``beta_t = 1``: ``k_t`` now gives exactly ``v_t``).
    Linear attention adds ``k_t^T v_t`` whatever is stored; the delta rule writes only the
    difference. In Yang et al.'s (2024) column convention, ``S_t^T = S_{t-1}^T (I - beta_t
    k_t k_t^T) + beta_t v_t k_t^T`` and ``o_t = S_t^T q_t``: the same numbers.

    The keys are L2-normalised here (``|k_t| = 1``: ``I - beta_t k_t^T k_t`` then shrinks the
    state along ``k_t`` and leaves the rest alone); the queries are used as given (DeltaNet also
    normalises them; do it before the call). ``alpha_t`` (``decay``) is Gated DeltaNet's
    (Yang et al., 2025): the whole state fades by ``alpha_t`` before the write; without it
    ``alpha_t = 1``; ``alpha_t = 0`` empties the state, and nothing after it depends on the
    tokens before. It may come in log space instead (``log_decay``, flash-linear-attention's
    ``g``): ``F.logsigmoid(x)`` stays finite where ``sigmoid(x)`` rounds to 0 (below about
    -88 in float32, -17 in float16). The parallel and chunked forms sum logs, so every decay
    in ``[0, 1]``, 0 included, gives finite numbers in each form.

    Args:
        query, key: ``(..., L, D)``; value: ``(..., L, D_v)``.
        beta: ``beta_t``, the writing strength of each token (and head), in ``(0, 1)`` (a
            sigmoid of a projection of the token; not checked: checks read no values).
        decay: ``alpha_t`` in ``[0, 1]``, per token (and head), or ``None`` (no decay).
            Its gradient is not finite where it is exactly 0 in the parallel and chunked forms
            (the chain rule passes through ``log 0``): train through ``log_decay``.
        log_decay: ``log alpha_t <= 0`` in place of ``decay`` (``-inf``: ``alpha_t = 0``), as
            :class:`LinearAttention` passes it (``F.logsigmoid``).
        state: ``S_0``, the state of the tokens before, ``(..., D, D_v)``; default zeros.

    Returns:
        ``(output, state)``: the output and ``S_L``, the state after the last token.

    Shape:
        ``query``, ``key``: ``(..., L, D)``; ``value``: ``(..., L, D_v)``; ``beta``,
        ``decay``, ``log_decay``: ``(..., L)``; ``state``: ``(..., D, D_v)``; output:
        ``(..., L, D_v)``.

    Raises:
        TypeError: if ``query``, ``key``, ``value``, ``beta``, ``decay``, ``log_decay`` or
            ``state`` is not a float tensor, or they differ in dtype.
        ValueError: if ``key`` has not the shape of ``query``, ``value`` has not one row per
            token, ``beta``, ``decay`` or ``log_decay`` not one number per token, ``state`` has
            the wrong shape, they lie on different devices, ``decay`` and ``log_decay`` are
            both given, ``decay`` holds a number outside ``[0, 1]`` or ``log_decay`` one above
            0 (or NaN; values are not read under ``torch.compile``).

    Example:
        >>> q = torch.ones(1, 2, 1)
        >>> k = torch.tensor([[[2.0], [3.0]]])  # normalised: both keys are 1
        >>> v = torch.tensor([[[4.0], [-2.0]]])
        >>> out, S = delta_rule_recurrent(q, k, v, torch.tensor([[0.5, 0.25]]))
        >>> out.flatten().tolist(), S.item()  # S = 0.5 * 4 = 2, then 2 + 0.25 * (-2 - 2) = 1
        ([2.0, 1.0], 1.0)
        >>> reset = torch.tensor([[1.0, 0.0]])  # alpha_2 = 0: S = 0, then 0.25 * (-2 - 0)
        >>> delta_rule_recurrent(q, k, v, torch.tensor([[0.5, 0.25]]), decay=reset)[1].item()
        -0.5
    """
    k, log_decay, S = _delta_prepare(query, key, value, beta, decay, log_decay, state)
    alpha = decay if decay is not None or log_decay is None else torch.exp(log_decay)  # (..., L)
    outs = []
    for t in range(query.shape[-2]):
        if alpha is not None:
            S = alpha[..., t, None, None] * S  # (..., D, D_v): alpha_t S_{t-1}
        k_t = k[..., t, :]  # (..., D)
        stored = (k_t.unsqueeze(-2) @ S).squeeze(-2)  # (..., D_v): the value S gives for k_t
        delta = beta[..., t, None] * (value[..., t, :] - stored)  # (..., D_v)
        S = S + k_t.unsqueeze(-1) * delta.unsqueeze(-2)  # (..., D, D_v): k_t^T delta
        outs.append((query[..., t, None, :] @ S).squeeze(-2))  # (..., D_v): q_t S_t
    out = torch.stack(outs, dim=-2) if outs else value.new_zeros(value.shape)  # (..., L, D_v)
    return out, S


def delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    *,
    decay: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """DeltaNet's delta rule, parallel form (Yang et al., 2024): one unit lower triangular
    system for the whole sequence.

    Unrolled, :func:`delta_rule_recurrent` writes ``S_t = gamma_t S_0 + sum_{i <= t}
    (gamma_t / gamma_i) k_i^T u_i`` with ``gamma_t = alpha_1 ... alpha_t`` and *pseudo-values*
    ``u_t = beta_t (v_t - k_t alpha_t S_{t-1})``, each depending on the earlier ones. Stacked
    as rows of ``U``, they solve

    .. math::

        \\begin{aligned}
        (I + \\operatorname{tril}(\\operatorname{diag}(\\beta) (K K^\\top \\odot \\Gamma), -1))
            \\, U &= \\operatorname{diag}(\\beta) (V - \\operatorname{diag}(\\gamma) K S_0), \\\\
        O &= \\operatorname{diag}(\\gamma) Q S_0 + (Q K^\\top \\odot \\Gamma) U, \\qquad
        S_L = \\gamma_L S_0 + K^\\top \\operatorname{diag}(\\gamma_L / \\gamma) U
        \\end{aligned}

    with ``Gamma_ti = gamma_t / gamma_i = alpha_{i+1} ... alpha_t`` for ``i <= t`` and 0 above
    the diagonal (all ones below it without ``decay``), computed as ``exp`` of sums of
    ``log alpha_j`` (a decay of 0 is a ``-inf`` in the sum, and its products are 0). The
    matrix on the left is unit lower triangular: one ``torch.linalg.solve_triangular`` replaces
    the ``L`` sequential steps; its inverse is the ``T`` of the WY (UT) representation
    (:func:`delta_rule_chunked`). ``O(L^2)`` memory, as attention. float16 and bfloat16 inputs
    are computed in float32 and returned in their dtype.

    Args:
        query, key, value, beta, decay, log_decay, state: as :func:`delta_rule_recurrent` (the
            keys are L2-normalised here too).

    Returns:
        ``(output, state)``: the output and ``S_L``, the state after the last token.

    Shape:
        As :func:`delta_rule_recurrent`.

    Raises:
        TypeError: as :func:`delta_rule_recurrent`.
        ValueError: as :func:`delta_rule_recurrent`.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 2, 4, 7, 5).unbind(0)  # (N, H, L, D) = (2, 4, 7, 5)
        >>> beta = torch.rand(2, 4, 7)
        >>> out, S = delta_rule(q, k, v, beta)
        >>> out.shape, S.shape
        (torch.Size([2, 4, 7, 5]), torch.Size([2, 4, 5, 5]))
        >>> torch.allclose(out, delta_rule_recurrent(q, k, v, beta)[0], atol=1e-5)
        True
    """
    dtype = query.dtype
    k, log_decay, S = _delta_prepare(query, key, value, beta, decay, log_decay, state)
    query, k, value, beta, log_decay, S = _working(query, k, value, beta, log_decay, S)
    g = _cumulative(log_decay, query)  # (..., L): log gamma_t
    Gamma = _decay_matrix(log_decay, query)  # (..., L, L), lower triangular
    gamma = torch.exp(g).unsqueeze(-1)  # (..., L, 1)
    A = (beta.unsqueeze(-1) * (k @ k.transpose(-2, -1)) * Gamma).tril(-1)  # (..., L, L)
    A = A + torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)  # unit lower triangular
    rhs = beta.unsqueeze(-1) * (value - gamma * (k @ S))  # (..., L, D_v)
    U = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)  # (..., L, D_v)
    out = gamma * (query @ S) + ((query @ k.transpose(-2, -1)) * Gamma) @ U  # (..., L, D_v)
    return out.to(dtype), _carry(S, k, U, g, Gamma).to(dtype)


def _carry(S: Tensor, k: Tensor, U: Tensor, g: Tensor, Gamma: Tensor) -> Tensor:
    """The state after a chunk: ``gamma_C S + K^T diag(gamma_C / gamma) U``, where
    ``gamma_C / gamma_i = Gamma_Ci`` is the decay matrix's last row."""
    if g.shape[-1] == 0:  # an empty chunk leaves the state as it was
        return S
    last = g[..., -1:]  # (..., 1): log gamma_C
    fade = Gamma[..., -1, :].unsqueeze(-1)  # (..., C, 1): gamma_C / gamma_i, <= 1
    return torch.exp(last).unsqueeze(-1) * S + k.transpose(-2, -1) @ (fade * U)  # (..., D, D_v)


def delta_rule_chunked(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    *,
    chunk_size: int = 64,
    decay: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """DeltaNet's delta rule, chunked form: the WY (UT) representation inside chunks of ``C``
    tokens, the state between chunks (Yang et al., 2024).

    For a chunk with rows ``Q, K, V`` (keys normalised), ``beta``, the decays ``Gamma`` and
    ``gamma`` counted from the chunk's start (as :func:`delta_rule`), and the state ``S`` of
    every token before it:

    .. math::

        \\begin{aligned}
        T &= (I + \\operatorname{tril}(\\operatorname{diag}(\\beta)
            (K K^\\top \\odot \\Gamma), -1))^{-1}, \\qquad
        W = T \\operatorname{diag}(\\beta \\gamma) K, \\qquad
        U = T \\operatorname{diag}(\\beta) V, \\\\
        O &= \\operatorname{diag}(\\gamma) Q S + (Q K^\\top \\odot \\Gamma)(U - W S), \\qquad
        S \\leftarrow \\gamma_C S + K^\\top \\operatorname{diag}(\\gamma_C / \\gamma)(U - W S)
        \\end{aligned}

    ``T`` (``C x C``), ``W`` and ``U`` depend on the chunk alone, not on the state: a trainer
    computes them for every chunk at once, and only the cheap ``U - W S`` and the state pass
    from chunk to chunk. ``W`` and ``U`` are the WY representation of the chunk's product of
    ``alpha_t (I - beta_t k_t^T k_t)`` and of its writes. ``C = 1`` is the recurrent form;
    ``C >= L`` is the parallel form, solved by inverting ``T`` instead. ``L`` need not be a
    multiple of ``C``. float16 and bfloat16 inputs are computed in float32 and returned in
    their dtype.

    Args:
        query, key, value, beta, decay, log_decay, state: as :func:`delta_rule_recurrent`.
        chunk_size: ``C``, tokens per chunk, ``>= 1``.

    Returns:
        ``(output, state)``: the output and ``S_L``, the state after the last token.

    Shape:
        As :func:`delta_rule_recurrent`.

    Raises:
        TypeError: as :func:`delta_rule_recurrent`, or if ``chunk_size`` is not an ``int``.
        ValueError: as :func:`delta_rule_recurrent`, or if ``chunk_size`` is below 1.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 10, 4).unbind(0)
        >>> beta, decay = torch.rand(10), torch.rand(10) * 0.5 + 0.5
        >>> out, S = delta_rule_chunked(q, k, v, beta, decay=decay, chunk_size=4)
        >>> slow, S_slow = delta_rule_recurrent(q, k, v, beta, decay=decay)
        >>> torch.allclose(out, slow, atol=1e-5), torch.allclose(S, S_slow, atol=1e-5)
        (True, True)
        >>> log_alpha = F.logsigmoid(torch.full((10,), -200.0))  # sigmoid(-200) is 0 in float32
        >>> out, S = delta_rule_chunked(q, k, v, beta, log_decay=log_alpha, chunk_size=4)
        >>> last = F.normalize(k[-1], dim=0)  # each token forgets the others: S = beta k^T v
        >>> torch.allclose(S, beta[-1] * last[:, None] * v[-1]), bool(out.isfinite().all())
        (True, True)
    """
    C = _check_chunk_size(chunk_size)
    dtype = query.dtype
    k, log_decay, S = _delta_prepare(query, key, value, beta, decay, log_decay, state)
    query, k, value, beta, log_decay, S = _working(query, k, value, beta, log_decay, S)
    outs = []
    for start in range(0, query.shape[-2], C):
        chunk = slice(start, start + C)
        q_c, k_c, v_c = query[..., chunk, :], k[..., chunk, :], value[..., chunk, :]
        b_c = beta[..., chunk]  # (..., C)
        a_c = None if log_decay is None else log_decay[..., chunk]  # (..., C): log alpha_t
        g = _cumulative(a_c, q_c)  # (..., C)
        Gamma = _decay_matrix(a_c, q_c)  # (..., C, C)
        gamma = torch.exp(g).unsqueeze(-1)  # (..., C, 1)
        n = q_c.shape[-2]
        eye = torch.eye(n, dtype=q_c.dtype, device=q_c.device)
        A = eye + (b_c.unsqueeze(-1) * (k_c @ k_c.transpose(-2, -1)) * Gamma).tril(-1)
        T = torch.linalg.solve_triangular(A, eye.expand_as(A), upper=False, unitriangular=True)
        W = T @ (b_c.unsqueeze(-1) * gamma * k_c)  # (..., C, D)
        U = T @ (b_c.unsqueeze(-1) * v_c)  # (..., C, D_v)
        U = U - W @ S  # (..., C, D_v): the pseudo-values given the state carried in
        outs.append(gamma * (q_c @ S) + ((q_c @ k_c.transpose(-2, -1)) * Gamma) @ U)
        S = _carry(S, k_c, U, g, Gamma)  # (..., D, D_v)
    out = torch.cat(outs, dim=-2) if outs else value.new_zeros(value.shape)  # (..., L, D_v)
    return out.to(dtype), S.to(dtype)


# ---- a layer ---------------------------------------------------------------------------------


class LinearAttention(nn.Module):
    """A causal attention layer whose memory is a state of fixed size: linear attention or
    DeltaNet, with projections and heads as :class:`attnlib.MultiHeadAttention`.

    .. math::

        \\begin{aligned}
        Q, K, V &= \\operatorname{Conv}(X W_Q), \\operatorname{Conv}(X W_K),
            \\operatorname{Conv}(X W_V), \\qquad \\beta = \\sigma(X W_\\beta), \\;
            \\alpha = \\sigma(X W_\\alpha), \\\\
        \\operatorname{head}_h &= \\operatorname{LinearAttention}(Q_h, K_h, V_h)
            \\;\\text{or}\\; \\operatorname{DeltaRule}(Q_h / \\lVert Q_h \\rVert,
            K_h / \\lVert K_h \\rVert, V_h, \\beta_h, \\alpha_h), \\\\
        \\text{output} &= \\operatorname{Concat}_h(\\operatorname{head}_h) W_O
        \\end{aligned}

    where ``Conv`` is a short causal depthwise convolution over the last ``conv_size`` tokens
    (each feature its own filter), as DeltaNet, Mamba and Qwen3-Next's linear layers have:
    without it a layer with no positions cannot see which token came just before, and a key
    could not be bound to the value after it. Training runs the chunked forms
    (:func:`linear_attention_chunked`, :func:`delta_rule_chunked`); each head keeps a
    ``D x D`` state (and, for linear attention, a normaliser ``z`` of ``D``) whatever the
    length of the text.

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E`` (``D = E / H``).
        rule: ``"linear"`` (Katharopoulos et al., 2020: features ``elu + 1``, normalised),
            ``"delta"`` (DeltaNet, Schlag et al., 2021; Yang et al., 2024: queries and keys
            L2-normalised, a write strength ``beta_t`` per head and token) or
            ``"gated_delta"`` (Gated DeltaNet, Yang et al., 2025, Qwen3-Next's linear layers:
            also a decay ``alpha_t`` of the state per head and token, ``alpha = 1`` without;
            here a sigmoid of the token, where Gated DeltaNet parametrises it as Mamba 2 does).
        conv_size: the convolution's width (4 in DeltaNet and Qwen3-Next); 0 for none.
        chunk_size: ``C``, the chunk of the chunked forms.
        bias: biases in the linear maps.

    Attributes:
        q_proj: ``nn.Linear(E, E)``.
        k_proj: ``nn.Linear(E, E)``.
        v_proj: ``nn.Linear(E, E)``.
        out_proj: ``nn.Linear(E, E)``.
        beta_proj: ``nn.Linear(E, H)`` with a delta rule, else ``None``.
        decay_proj: ``nn.Linear(E, H, bias=True)`` with ``rule="gated_delta"``, else ``None``;
            its bias starts at 3 (``alpha`` about 0.95: a state that keeps what it holds).
        conv: ``nn.Conv1d(3E, 3E, conv_size, groups=3E)`` with ``conv_size > 0``, else ``None``.

    Shape:
        - ``x``: ``(L, E)`` or ``(N, L, E)``; output: the same shape.

    Raises:
        ValueError: if a size is not a positive integer (``conv_size``: not a non-negative
            one), ``E`` is not divisible by ``H``, ``rule`` is not ``"linear"``, ``"delta"`` or
            ``"gated_delta"``, or ``x`` has the wrong shape.
        TypeError: if ``x`` is not a float tensor of the layer's dtype.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = LinearAttention(12, 3, rule="delta")
        >>> x = torch.randn(2, 7, 12)
        >>> layer(x).shape, layer.state_size
        (torch.Size([2, 7, 12]), 156)
        >>> torch.allclose(layer(x)[:, :4], layer(x[:, :4]), atol=1e-6)  # causal
        True
    """

    takes_mask = False  # causal by construction: each token reads the state of those before

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        rule: str = "linear",
        conv_size: int = 4,
        chunk_size: int = 64,
        bias: bool = False,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        num_heads = check_int("num_heads", num_heads, low=1)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim must be divisible by num_heads; got embed_dim={embed_dim}, "
                f"num_heads={num_heads}"
            )
        if rule not in ("linear", "delta", "gated_delta"):
            raise ValueError(f"rule must be 'linear', 'delta' or 'gated_delta'; got {rule!r}")
        if conv_size != 0:
            conv_size = check_int("conv_size", conv_size, low=1)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.rule, self.conv_size = rule, conv_size
        self.chunk_size = _check_chunk_size(chunk_size)
        E = embed_dim
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(E, E, bias=bias) for _ in range(4)
        )
        self.beta_proj = nn.Linear(E, num_heads, bias=bias) if rule != "linear" else None
        self.decay_proj = None
        if rule == "gated_delta":
            self.decay_proj = nn.Linear(E, num_heads)
            nn.init.constant_(self.decay_proj.bias, 3.0)
        self.conv = None
        if conv_size:
            self.conv = nn.Conv1d(3 * E, 3 * E, conv_size, groups=3 * E, padding=conv_size - 1)

    def _after_init(self) -> None:
        """Called by :class:`attnlib.LanguageModel` after GPT-2's initialisation zeroed every
        bias: the decay's bias back at 3 (``alpha`` near 0.95)."""
        if self.decay_proj is not None:
            nn.init.constant_(self.decay_proj.bias, 3.0)

    @property
    def state_size(self) -> int:
        """The numbers one sequence keeps per layer when decoding, whatever its length.

        A ``D x D`` state per head (``+ D`` for linear attention's normaliser) and the last
        ``conv_size - 1`` inputs of the convolution."""
        H, D = self.num_heads, self.head_dim
        per_head = D * D + (D if self.rule == "linear" else 0)
        return H * per_head + max(self.conv_size - 1, 0) * 3 * self.embed_dim

    def forward(self, x: Tensor, *, cache: StateCache | None = None) -> Tensor:
        """The layer on ``x`` ``(L, E)`` or ``(N, L, E)``, causal.

        With ``cache=`` (a :class:`StateCache`), ``x`` holds only the new tokens: they start
        from the state and the convolution's inputs the cache keeps, and the cache then keeps
        those after them, so that a text fed in pieces gives the output of one pass.
        """
        weight = self.out_proj.weight
        x, _, batched = check_input(x, None, weight=weight, width=self.embed_dim, heads=1)
        self.check_cache(cache, x)
        return unbatch(batched, self._forward(x, cache))  # (L, E) or (N, L, E)

    def new_cache(self, *, window: int | None = None) -> StateCache:
        """An empty :class:`StateCache` for this layer, which serves this layer alone.

        Raises:
            ValueError: if ``window`` is given: the state is the layer's memory, it keeps no
                positions to slide a window over.
        """
        if window is not None:
            raise ValueError(
                f"window must be None for a linear-attention layer (its state is its memory); "
                f"got window={window!r}"
            )
        cache = StateCache()
        cache.claim(self)
        return cache

    def check_cache(self, cache: StateCache | None, x: Tensor, *, name: str = "cache") -> None:
        """Raise unless ``cache`` is ``None`` or a :class:`StateCache` that can take a step of
        ``x`` ``(N, L, E)`` in this layer: a state (if any) of its heads and head size, the
        convolution's inputs of its ``conv_size``, ``x``'s batch, dtype and device, and no other
        layer's (:meth:`attnlib.decoding.Cache.claim`)."""
        if cache is None:
            return
        if not isinstance(cache, StateCache):
            raise TypeError(
                f"{name} must be an attnlib.linear_attention.StateCache for a LinearAttention "
                f"layer (it keeps a state, not keys and values); got {type(cache).__name__}"
            )
        hint = "a cache belongs to one layer and one batch; start a new StateCache()"
        N, H, D = x.shape[0], self.num_heads, self.head_dim
        cache_fits(name, cache, N, H, D, x.dtype, x.device, hint)
        kept = 0 if cache.conv is None else cache.conv.shape[1]
        if cache.conv is not None and kept != self.conv_size - 1:
            raise ValueError(
                f"{name} holds the last {kept} inputs of a convolution of conv_size={kept + 1}; "
                f"this layer has conv_size={self.conv_size} and keeps {max(self.conv_size - 1, 0)}"
                f": {hint}"
            )
        cache.claim(self, name=name)

    def _self_attention(self, x, mask, need_weights, cache):
        """The interface a block calls (see :class:`attnlib.MultiHeadAttention`): causal by
        construction, so ``mask`` (the model's causal mask, or ``None``) is not read, and no
        weights."""
        return self._forward(x, cache), None

    def _forward(self, x: Tensor, cache: StateCache | None = None) -> Tensor:
        """The layer without the checks, on ``x`` ``(N, L, E)``."""
        N, L, E = x.shape
        if L == 0:  # no token (F.conv1d refuses an empty sequence): an empty output
            return x.new_zeros(N, 0, E)
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)  # (N, L, 3E)
        if self.conv is not None and cache is None:  # padded on both sides: keep the first L
            qkv = self.conv(qkv.transpose(1, 2))[..., :L].transpose(1, 2)  # (N, L, 3E)
        elif self.conv is not None:  # the kept inputs before the new ones, no padding
            kept = (
                cache.conv
                if cache.conv is not None
                else qkv.new_zeros(N, self.conv_size - 1, 3 * E)
            )
            inputs = torch.cat([kept, qkv], dim=1)  # (N, conv_size - 1 + L, 3E)
            cache.conv = inputs[:, L:].clone()  # (N, conv_size - 1, 3E): the last inputs
            qkv = F.conv1d(
                inputs.transpose(1, 2), self.conv.weight, self.conv.bias, groups=3 * E
            ).transpose(1, 2)  # (N, L, 3E)
        H, D = self.num_heads, self.head_dim
        q, k, v = qkv.view(N, L, 3, H, D).permute(2, 0, 3, 1, 4)  # 3 x (N, H, L, D)
        state = None if cache is None else cache.state
        if self.rule == "linear":
            out, state = linear_attention_chunked(q, k, v, chunk_size=self.chunk_size, state=state)
        else:
            beta = torch.sigmoid(self.beta_proj(x)).transpose(1, 2)  # (N, H, L)
            log_decay = None  # log alpha = logsigmoid: finite where sigmoid rounds to 0
            if self.decay_proj is not None:
                log_decay = F.logsigmoid(self.decay_proj(x)).transpose(1, 2)  # (N, H, L)
            q = F.normalize(q, dim=-1)  # the keys are normalised by the delta rule
            out, state = delta_rule_chunked(
                q, k, v, beta, log_decay=log_decay, chunk_size=self.chunk_size, state=state
            )
        if cache is not None:
            cache.state = state
            cache.length += L
        out = out.transpose(1, 2).reshape(N, L, E)  # (N, H, L, D) -> (N, L, H*D)
        return self.out_proj(out)  # (N, L, E)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, rule={self.rule!r}, "
            f"conv_size={self.conv_size}, chunk_size={self.chunk_size}"
        )


class StateCache(Cache):
    """What a :class:`LinearAttention` layer keeps between decoding steps: its state and the
    last ``conv_size - 1`` inputs of its convolution, a fixed size whatever the length.

    A softmax layer's cache grows by a key and a value per token; this one is overwritten in
    place of growing. :meth:`attnlib.LanguageModel.new_cache` gives one to each linear layer.
    It has the :class:`attnlib.decoding.Cache` attributes a model checks (``length``,
    ``window``, ``nbytes``); its ``key`` is the state ``S`` ``(N, H, D, D)``, so that the
    model's checks of batch, heads, dtype and device apply to it. The layer updates it, not
    :meth:`update`.

    Attributes:
        state: ``S`` ``(N, H, D, D)`` for a delta rule; ``(S, z)`` with the normaliser
            ``z`` ``(N, H, D)`` for linear attention; ``None`` before the first step.
        conv: the convolution's last inputs ``(N, conv_size - 1, 3E)``, or ``None``.

    Raises:
        TypeError: from :meth:`update` (the layer writes the state, not keys and values); from
            the layer, if its state has another dtype than the step.
        ValueError: from the layer, if its state has other heads, head size, batch size or
            device than the step.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = LinearAttention(12, 3, rule="delta").eval()
        >>> x = torch.randn(1, 9, 12)
        >>> cache = StateCache()
        >>> steps = torch.cat([layer(x[:, i : i + 1], cache=cache) for i in range(9)], dim=1)
        >>> torch.allclose(steps, layer(x), atol=1e-6), cache.length, cache.nbytes
        (True, 9, 624)
    """

    keeps_keys = False  # a softmax layer refuses it

    def __init__(self):
        super().__init__()
        self.state: Tensor | LinearState | None = None
        self.conv: Tensor | None = None

    @property
    def key(self) -> Tensor | None:
        """The state ``S`` ``(N, H, D, D)`` (what the model's cache checks read), or ``None``."""
        return self.state[0] if isinstance(self.state, tuple) else self.state

    @property
    def value(self) -> Tensor | None:
        """``None``: the layer keeps no values."""
        return None

    @property
    def nbytes(self) -> int:
        """Bytes of the state and the convolution's inputs."""
        parts = self.state if isinstance(self.state, tuple) else (self.state,)
        return sum(t.numel() * t.element_size() for t in (*parts, self.conv) if t is not None)

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Refused: a :class:`LinearAttention` layer updates its cache itself."""
        raise TypeError(
            "a StateCache holds a linear-attention layer's state, not keys and values: it "
            "belongs to a LinearAttention layer (a softmax layer takes a KVCache)"
        )

    def _options(self) -> str:
        return f"nbytes={self.nbytes}"
