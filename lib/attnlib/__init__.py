"""attnlib: small, readable attention kernels for the textbook *Attention, by hand and by library*.

Shapes follow PyTorch's legend: ``N`` batch, ``L`` query length, ``S`` key length,
``E`` model dimension, ``H`` heads, ``D = E / H`` head dimension. The batch dimension is
optional everywhere. Boolean masks use ``True`` = *may attend*.

``import attnlib`` imports torch and numpy only: keras, matplotlib and pyarrow are imported
by the functions that need them, when they are called.
"""

from attnlib import (
    convert,
    corpus,
    decoding,
    display,
    efficient,
    embeddings,
    experiment,
    glove_text,
    positions,
    similarity,
    tokenizer,
    transformer,
)
from attnlib.attention import (
    SelfAttention,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)
from attnlib.embeddings import (
    Embeddings,
    UnknownWordError,
    load_glove,
    read_glove_text,
    tokenize,
)
from attnlib.glove import GloVe
from attnlib.multihead import MultiHeadAttention, NaiveMultiHeadAttention
from attnlib.similarity import cosine_matrix, cosine_similarity
from attnlib.transformer import LanguageModel, ModelCache, TransformerBlock

__version__ = "0.1.0"

__all__ = [
    "Embeddings",
    "GloVe",
    "LanguageModel",
    "ModelCache",
    "MultiHeadAttention",
    "NaiveMultiHeadAttention",
    "SelfAttention",
    "TransformerBlock",
    "UnknownWordError",
    "attention_weights",
    "causal_mask",
    "convert",
    "corpus",
    "cosine_matrix",
    "cosine_similarity",
    "decoding",
    "display",
    "efficient",
    "embeddings",
    "experiment",
    "glove_text",
    "load_glove",
    "positions",
    "read_glove_text",
    "scaled_dot_product_attention",
    "similarity",
    "softmax",
    "tokenize",
    "tokenizer",
    "transformer",
]
