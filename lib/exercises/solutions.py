"""One solution of each exercise of :mod:`exercises.stubs`, in plain PyTorch.

Read them after trying. ``make test`` runs the exercises' checks on these solutions, so a
check that cannot fail, or a solution that is wrong, is caught.
"""

from __future__ import annotations

import math
from collections import Counter

import torch


def nearest_neighbours(vector, vectors, k):
    unit = vectors / vectors.norm(dim=-1, keepdim=True)  # (V, E)
    cosines = unit @ (vector / vector.norm())  # (V,)
    return cosines.topk(k).indices  # (k,), the largest first


def cosine_matrix(a, b):
    a = a / a.norm(dim=-1, keepdim=True)  # (L, E)
    b = b / b.norm(dim=-1, keepdim=True)  # (S, E)
    return a @ b.T  # (L, S)


def softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()  # every exponent <= 0: no overflow
    return e / e.sum(dim=dim, keepdim=True)


def attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., L, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = softmax(scores)  # (..., L, S)
    return weights @ value, weights  # (..., L, d_v), (..., L, S)


def attention_head(x, w_q, w_k, w_v, causal=False):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T  # (N, L, D) each
    L = x.shape[-2]
    mask = torch.ones(L, L, dtype=torch.bool).tril() if causal else None  # (L, L)
    return attention(q, k, v, mask)


def split_heads(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(1, 2)  # (N, H, L, D)


def merge_heads(x):
    N, H, L, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D)  # (N, L, E)


def attention_backward(query, key, value, grad_output):
    scale = 1 / math.sqrt(query.shape[-1])
    A = softmax(query @ key.transpose(-2, -1) * scale)  # (..., L, S)
    dV = A.transpose(-2, -1) @ grad_output  # (..., S, d_v)
    dA = grad_output @ value.transpose(-2, -1)  # (..., L, S)
    dS = A * (dA - (dA * A).sum(dim=-1, keepdim=True))  # the softmax's Jacobian, row by row
    return dS @ key * scale, dS.transpose(-2, -1) @ query * scale, dV


def rope(x, base=10000.0):
    L, D = x.shape[-2:]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angles = torch.arange(L, dtype=torch.float64)[:, None] * theta  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, D/2) each
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: divided by E
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def block_mlp(x, ln_weight, ln_bias, w1, b1, w2, b2, eps=1e-5):
    y = layer_norm(x, ln_weight, ln_bias, eps) @ w1.T + b1  # (N, L, F)
    y = y * 0.5 * (1 + torch.erf(y / math.sqrt(2)))  # exact GELU
    return x + y @ w2.T + b2  # (N, L, E)


def kneser_ney(ids, prev, word, vocab_size, discount=0.75):
    bigrams = Counter(zip(ids, ids[1:]))
    distinct = set(bigrams)
    before_w = sum(1 for _, w in distinct if w == word)  # N1+(. w)
    p_w = (before_w + 1) / (len(distinct) + vocab_size)
    total = sum(c for (u, _), c in bigrams.items() if u == prev)  # c(u .)
    if total == 0:
        return p_w
    after_u = sum(1 for u, _ in distinct if u == prev)  # N1+(u .)
    c = bigrams[(prev, word)]
    return max(c - discount, 0) / total + discount * after_u / total * p_w


def bpe_merge(words):
    counts = Counter()
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += n
    best = max(counts.values())
    a, b = min(pair for pair, c in counts.items() if c == best)
    merged = Counter()
    for word, n in words.items():
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged[tuple(out)] += n
    return (a, b), dict(merged)


def wordpiece(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # the longest piece first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def induction_score(weights, T):
    t = torch.arange(T + 1, 2 * T + 1)  # the second copy
    return weights[..., t, t - T + 1].mean(dim=-1)


def cached_attention_step(cache_k, cache_v, q, k, v):
    cache_k = k if cache_k is None else torch.cat([cache_k, k], dim=-2)  # (N, H, t+1, D)
    cache_v = v if cache_v is None else torch.cat([cache_v, v], dim=-2)  # (N, H, t+1, D_v)
    output, _ = attention(q, cache_k, cache_v)  # (N, H, 1, D_v): no mask, all is the past
    return output, cache_k, cache_v


def torch_mha_forward(
    query, key, value, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads
):
    w_q, w_k, w_v = in_proj_weight.chunk(3)  # (E, E) each
    b_q, b_k, b_v = in_proj_bias.chunk(3)  # (E,) each
    q = split_heads(query @ w_q.T + b_q, num_heads)  # (N, H, L, D)
    k = split_heads(key @ w_k.T + b_k, num_heads)  # (N, H, S, D)
    v = split_heads(value @ w_v.T + b_v, num_heads)  # (N, H, S, D)
    heads, weights = attention(q, k, v)  # (N, H, L, D), (N, H, L, S)
    return merge_heads(heads) @ out_proj_weight.T + out_proj_bias, weights.mean(dim=1)


def keras_kernels(w_q, w_o, num_heads):
    E = w_q.shape[0]
    D = E // num_heads
    return w_q.T.reshape(E, num_heads, D), w_o.T.reshape(num_heads, D, E)


def additive_attention(query, key, value, w_q, w_k, v):
    hidden = (query @ w_q.T).unsqueeze(2) + (key @ w_k.T).unsqueeze(1)  # (N, L, S, A)
    weights = softmax(torch.tanh(hidden) @ v)  # (N, L, S)
    return weights @ value, weights


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.shape[-1])
    m = query.new_full((*query.shape[:-1], 1), -math.inf)  # (..., L, 1)
    l = query.new_zeros(*query.shape[:-1], 1)  # noqa: E741  (..., L, 1)
    o = query.new_zeros(*query.shape[:-1], value.shape[-1])  # (..., L, d_v)
    for start in range(0, key.shape[-2], block_size):
        k, v = key[..., start : start + block_size, :], value[..., start : start + block_size, :]
        s = query @ k.transpose(-2, -1) * scale  # (..., L, block)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = (s - m_new).exp()  # (..., L, block)
        fade = (m - m_new).exp()  # 0 at the first block (m = -inf)
        l = fade * l + p.sum(dim=-1, keepdim=True)  # noqa: E741
        o = fade * o + p @ v
        m = m_new
    return o / l


class PreallocatedCache:
    def __init__(self, max_len):
        self.max_len, self.length = max_len, 0
        self._key = self._value = None

    def update(self, key, value):
        end = self.length + key.shape[-2]
        if end > self.max_len:
            raise ValueError(
                f"the cache holds {self.length} of {self.max_len} positions; "
                f"a step of {key.shape[-2]} does not fit"
            )
        if self._key is None:
            self._key = key.new_empty(*key.shape[:-2], self.max_len, key.shape[-1])
            self._value = value.new_empty(*value.shape[:-2], self.max_len, value.shape[-1])
        self._key[..., self.length : end, :] = key  # in place
        self._value[..., self.length : end, :] = value
        self.length = end
        return self._key[..., :end, :], self._value[..., :end, :]


def delta_rule_step(state, q, k, v, beta, alpha):
    faded = alpha[..., None, None] * state  # (..., D, D_v)
    stored = (k.unsqueeze(-2) @ faded).squeeze(-2)  # (..., D_v): what the state gives for k
    new = faded + k.unsqueeze(-1) * (beta[..., None] * (v - stored)).unsqueeze(-2)
    return (q.unsqueeze(-2) @ new).squeeze(-2), new
