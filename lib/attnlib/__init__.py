"""attnlib: small, readable attention kernels for the textbook *Attention, by hand and by library*.

Shapes follow PyTorch's legend: ``N`` batch, ``L`` query length, ``S`` key length,
``E`` model dimension, ``H`` heads, ``D = E / H`` head dimension. The batch dimension is
optional everywhere. Boolean masks use ``True`` = *may attend*.

``import attnlib`` imports torch and numpy only: keras, matplotlib, pyarrow, regex,
safetensors and tokenizers are imported by the functions that need them, when they are
called.

**One import path per public name.** Which names are public, and where they are imported from:

* The book's core classes and functions are imported from the top level, and only from there:
  ``attnlib.softmax``, ``from attnlib import MultiHeadAttention, load_glove``. The modules that
  define them (``attention``, ``multihead``, ``embeddings``, ``encoder``, ``glove``,
  ``glove_text``, ``similarity``, ``transformer``) are where the code lives and where the API
  reference groups it, not import paths: everything public in them is here.
* The *public submodules* are the modules named in ``attnlib.__all__``: ``bpe``,
  ``convert``, ``corpus``, ``decoding``, ``display``, ``efficient``, ``experiment``,
  ``gemma3``, ``latent``, ``layers``, ``linear_attention``, ``paged``, ``positions``,
  ``pretrained``, ``sentencepiece``, ``seq2seq`` and ``tokenizer``.
  Their names are used through the module (``attnlib.positions.alibi_bias``, ``from
  attnlib.corpus import CorpusVocabulary``) and are not repeated at the top level, except
  ``tokenize`` and ``ModelCache`` (of ``decoding``), which are imported from the top level.
* A module whose name starts with ``_`` is private.

Only this file re-exports: a module imports another module's names to use them, never to offer
them, and the modules import each other without a cycle (`make lint` runs import-linter
with the rules in ``pyproject.toml``).
"""

from attnlib import (
    bpe,
    convert,
    corpus,
    decoding,
    display,
    efficient,
    experiment,
    gemma3,
    latent,
    layers,
    linear_attention,
    paged,
    positions,
    pretrained,
    sentencepiece,
    seq2seq,
    tokenizer,
)
from attnlib.attention import (
    SelfAttention,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)
from attnlib.decoding import ModelCache
from attnlib.embeddings import Embeddings, UnknownWordError
from attnlib.encoder import Encoder, PostNormBlock, sentence_embedding
from attnlib.glove import GloVe, load_glove
from attnlib.glove_text import read_glove_text
from attnlib.multihead import ModernAttention, MultiHeadAttention, NaiveMultiHeadAttention
from attnlib.similarity import cosine_matrix, cosine_similarity
from attnlib.tokenizer import tokenize
from attnlib.transformer import GatedMLP, LanguageModel, RMSNorm, TransformerBlock

__version__ = "0.1.0"

__all__ = [
    "Embeddings",
    "Encoder",
    "GatedMLP",
    "GloVe",
    "LanguageModel",
    "ModelCache",
    "ModernAttention",
    "MultiHeadAttention",
    "NaiveMultiHeadAttention",
    "PostNormBlock",
    "RMSNorm",
    "SelfAttention",
    "TransformerBlock",
    "UnknownWordError",
    "attention_weights",
    "bpe",
    "causal_mask",
    "convert",
    "corpus",
    "cosine_matrix",
    "cosine_similarity",
    "decoding",
    "display",
    "efficient",
    "experiment",
    "gemma3",
    "latent",
    "layers",
    "linear_attention",
    "load_glove",
    "paged",
    "positions",
    "pretrained",
    "read_glove_text",
    "scaled_dot_product_attention",
    "sentence_embedding",
    "sentencepiece",
    "seq2seq",
    "softmax",
    "tokenize",
    "tokenizer",
]
