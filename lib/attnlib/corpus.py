"""Words of a book, as numbers a language model reads, and the count models it must beat.

The book's language model reads Samuel Butler's prose *Odyssey* (``data/odyssey.txt``,
cleaned by ``scripts/prepare_texts.py``). This module turns such a text into tokens
(:func:`word_tokens`, split the way GloVe 6B was), numbers them (:class:`CorpusVocabulary`, one
index per word, ``<unk>`` for the rest), and scores held-out text with smoothed n-gram counts
(:class:`NGramModel`), the baseline any neural language model must beat.

Perplexity is the exponential of the mean negative log-likelihood per token:

.. math::

    \\operatorname{PPL} = \\exp\\Big(-\\frac{1}{T}\\sum_{t=1}^{T} \\log p(w_t \\mid w_{<t})\\Big)

A model that spreads its belief evenly over ``k`` words has perplexity ``k``.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from attnlib._checks import as_id_list, as_words, check_ids_tensor, check_int, check_real, shape_str
from attnlib._util import read_text_file, short_repr

__all__ = [
    "CorpusVocabulary",
    "NGramModel",
    "batches",
    "perplexity",
    "read_books",
    "token_log_probs",
    "word_tokens",
]

UNK = "<unk>"  #: the token of every word outside the vocabulary (index 0)

# curly quotes and their straight forms (str.replace: 7 times faster than str.translate here)
_QUOTES = (("\u2018", "'"), ("\u2019", "'"), ("\u201c", '"'), ("\u201d", '"'))


def _mark_ranges(lo: int, hi: int) -> str:
    """The combining marks (Unicode category M*) among code points ``lo .. hi - 1``, as the
    ranges of a regular expression's character class."""
    parts, start = [], None
    for cp in range(lo, hi + 1):
        mark = cp < hi and unicodedata.category(chr(cp)).startswith("M")
        if mark and start is None:
            start = cp
        elif not mark and start is not None:
            parts.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(parts)


@functools.cache
def _token_patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """The tokens of lower-cased text, ``(plain, marked, has_mark)``: ``marked`` splits any
    text, ``plain`` (faster) text without combining marks, which ``has_mark`` finds.

    "don't" -> "do" "n't", "father's" -> "father" "'s" (as GloVe's tokenizer); words and
    numbers whole, every other character a token of its own. A word is a run of Unicode letters
    and digits (``[^\\W_]``: "naïve", "ærø", "1900", "3rd") with the combining marks among them
    ("nai\\u0308ve", Devanagari's vowel signs), which ``\\w`` leaves out. On ASCII text this is
    ``[a-z]+(?=n't\\b)|n't\\b|'s\\b|[a-z0-9]+|[^\\sa-z0-9]``, the split the book's Odyssey model
    was trained on. Built on the first call: the scan of Unicode's marks takes about 20 ms
    (planes 0, 1 and 14 hold every one of them). The marks beyond U+FFFF make a slow class
    (Python's ``re`` tries its ranges one by one), hence ``plain`` for the usual text."""
    bmp = "[" + _mark_ranges(0, 0x10000) + "]"
    astral = "[" + _mark_ranges(0x10000, 0x20000) + _mark_ranges(0xE0000, 0xE1000) + "]"
    mark = rf"(?:{bmp}|(?=[\U00010000-\U0010ffff]){astral})"
    letter, alnum = r"[^\W\d_]", r"[^\W_]"
    plain = re.compile(rf"{letter}+(?=n't\b)|n't\b|'s\b|{alnum}+|[^\w\s]|_")
    marked = re.compile(
        rf"{letter}+(?:{mark}+{letter}*)*(?=n't\b)|n't\b|'s\b|{alnum}+(?:{mark}+{alnum}*)*"
        r"|[^\w\s]|_"
    )
    return plain, marked, re.compile(mark)


_BOOK = re.compile(r"^BOOK ([IVXLC]+)$", re.MULTILINE)


def word_tokens(text: str) -> list[str]:
    """Split text into lower-case tokens the way GloVe 6B's vocabulary has them.

    Words and numbers are tokens, every punctuation mark is one (``"ship,"`` gives ``"ship"``
    and ``","``), curly quotes become straight ones, and ``n't`` and ``'s`` are split off as
    Stanford's tokenizer (which GloVe was trained on) does. Unlike :func:`attnlib.tokenize`,
    which splits at white space only, this reads running text.

    A word is a run of Unicode letters and digits with their combining marks (``"naïve"``,
    ``"ærø"``, ``"3rd"``, ``"1900"`` are one token each); any other character that is not white
    space is a token of its own: an apostrophe that does not start ``'s`` or end ``n't``
    (``"o'clock"`` gives ``"o"``, ``"'"``, ``"clock"``), a hyphen, an underscore, a symbol.

    Args:
        text: the text.

    Returns:
        The list of tokens (empty for a text without any).

    Raises:
        TypeError: if ``text`` is not a ``str``.

    Example:
        >>> word_tokens("Now, however, I must go back to my ship and to my crew, who won’t wait.")
        ['now', ',', 'however', ',', 'i', 'must', 'go', 'back', 'to', 'my', 'ship', 'and', \
'to', 'my', 'crew', ',', 'who', 'wo', "n't", 'wait', '.']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    text = text.lower()
    for curly, straight in _QUOTES:
        text = text.replace(curly, straight)
    plain, marked, has_mark = _token_patterns()
    return (marked if has_mark.search(text) else plain).findall(text)


def read_books(path: str | Path) -> dict[str, str]:
    """The books of a text written by ``scripts/prepare_texts.py``, by their Roman numeral.

    Each book starts with a line ``BOOK I``, ``BOOK II``, ...; its paragraphs follow, one per
    line.

    Args:
        path: a cleaned text, such as ``data/odyssey.txt``.

    Returns:
        ``{"I": text of book I, "II": ..., ...}`` in the file's order.

    Raises:
        TypeError: if ``path`` is not a ``str`` or ``os.PathLike``.
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: naming the file, if it is not UTF-8, has no ``BOOK`` line, or has two
            headings of the same book (the second would silently replace the first).

    Example:
        >>> books = read_books("data/odyssey.txt")  # from the book's folder
        >>> len(books), books["I"][:31]
        (24, 'Tell me, O Muse, of that ingeni')
    """
    path, text = read_text_file(
        path,
        "a text with 'BOOK I', 'BOOK II', ... headings",
        "read_books reads the UTF-8 text that scripts/prepare_texts.py writes",
    )
    heads = list(_BOOK.finditer(text))
    if not heads:
        raise ValueError(f"{path} must contain book headings such as 'BOOK I' on their own line")
    seen: dict[str, int] = {}  # numeral: offset of its heading
    for h in heads:
        if h.group(1) in seen:
            first, line = (text.count("\n", 0, i) + 1 for i in (seen[h.group(1)], h.start()))
            raise ValueError(
                f"{path}, line {line}: a second heading 'BOOK {h.group(1)}' (the first is on "
                f"line {first}); each book must have one heading"
            )
        seen[h.group(1)] = h.start()
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {h.group(1): text[h.end() : end].strip() for h, end in zip(heads, ends)}


def _check_id_range(name: str, ids: list[int], vocab_size: int) -> None:
    """Every id of ``ids`` is in ``0 .. vocab_size - 1``; else a ValueError with their range."""
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        raise ValueError(f"{name} must be in 0..{vocab_size - 1}; got {min(ids)}..{max(ids)}")


class CorpusVocabulary:
    """Word <-> index tables for a language model reading a corpus: ``<unk>`` is 0, then the
    words. An *open* vocabulary: a stream of tokens is encoded as ``(T,)`` and every token it
    does not hold becomes ``<unk>``, silently (a book always has words the vocabulary lacks).

    (:class:`attnlib.tokenizer.SentenceVocabulary` is the closed one of the seeds: ``BOS`` and
    ``EOS``, one sentence as ``(1, n)``, an unknown word an error.)

    Args:
        words: the words, in index order from 1 (without ``<unk>``); no repeats.

    Attributes:
        words: ``["<unk>", word 1, ...]``, the word of each index.
        index: ``{word: index}``.

    Raises:
        TypeError: if ``words`` is one ``str`` (its letters would be the words) or holds an item
            that is not a ``str``.
        ValueError: if ``words`` repeats a word or contains ``<unk>``.

    Example:
        >>> vocab = CorpusVocabulary(["the", "ship", ","])
        >>> vocab.encode(["the", "black", "ship"])
        tensor([1, 0, 2])
        >>> vocab.decode(torch.tensor([1, 2, 3]))
        'the ship,'
    """

    def __init__(self, words: Sequence[str]):
        words = as_words("words", words)
        if UNK in words:
            raise ValueError(f"words must not contain {UNK!r}: it is index 0 already")
        self.words = [UNK, *words]
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            seen = Counter(self.words)
            raise ValueError(f"words must not repeat; got {[w for w, c in seen.items() if c > 1]}")

    @classmethod
    def from_tokens(
        cls,
        tokens: Iterable[str],
        *,
        max_size: int | None = None,
        min_count: int = 1,
        known: Iterable[str] | None = None,
    ) -> CorpusVocabulary:
        """The most frequent tokens, most frequent first (ties in alphabetical order).

        Args:
            tokens: the training text's tokens, e.g. :func:`word_tokens` of it.
            max_size: keep at most this many words (plus ``<unk>``), ``>= 0``.
            min_count: keep words seen at least this often, ``>= 1``.
            known: keep only words in this collection (e.g. the GloVe vocabulary), so that
                every word has a pretrained vector.

        Returns:
            The :class:`CorpusVocabulary`.

        Raises:
            TypeError: if ``tokens`` is one ``str`` or holds an item that is not a ``str``,
                ``max_size`` is not an ``int`` or ``None``, ``min_count`` is not an ``int``
                (a ``bool`` is neither), or ``known`` is a ``str`` or not a collection.
            ValueError: if ``max_size < 0`` or ``min_count < 1``.

        Example:
            >>> CorpusVocabulary.from_tokens(word_tokens("the ship, the crew"), max_size=2).words
            ['<unk>', 'the', ',']
        """
        tokens = as_words("tokens", tokens)
        if max_size is not None:
            max_size = check_int("max_size", max_size, low=0, what="an integer >= 0 or None")
        min_count = check_int("min_count", min_count, low=1)
        if isinstance(known, (str, bytes, bytearray)):
            raise TypeError(
                f"known must be a collection of words (a set, a dict, Embeddings), not one "
                f"{type(known).__name__}: 'w in known' would test substrings; got "
                f"{short_repr(known)}"
            )
        if known is not None and not hasattr(known, "__contains__"):
            try:
                known = set(known)  # a one-shot iterable: read it once
            except TypeError:
                raise TypeError(
                    "known must be a collection of words (a set, a dict, Embeddings) or None; "
                    f"got {type(known).__name__}"
                ) from None
        counts = Counter(tokens)
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_count and (known is None or w in known)),
            key=lambda w: (-counts[w], w),
        )
        return cls(ranked[:max_size] if max_size is not None else ranked)

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        return f"CorpusVocabulary({len(self)} words with {UNK})"

    def encode(self, tokens: Iterable[str]) -> Tensor:
        """Indices of the tokens, ``(T,)`` long; unknown tokens give 0 (``<unk>``).

        Text is split first, by the function the vocabulary was built with:
        ``vocab.encode(word_tokens(text))``. A ``str`` is refused rather than split here:
        ``attnlib.tokenize`` and :func:`word_tokens` split the same text differently
        (``"ship,"`` is one word or two), and only the caller knows which one made the
        vocabulary.

        Args:
            tokens: the tokens, a sequence of ``str``.

        Returns:
            ``(T,)`` int64 indices.

        Raises:
            TypeError: if ``tokens`` is one ``str``, or holds an item that is not a ``str``.

        Example:
            >>> vocab = CorpusVocabulary(["the", "ship", ","])
            >>> vocab.encode(word_tokens("The ship, the crew"))
            tensor([1, 2, 3, 1, 0])
        """
        if isinstance(tokens, str):
            raise TypeError(
                "tokens must be a sequence of str tokens, not one str (its characters would be "
                f"the tokens); got {short_repr(tokens)}: split it first, "
                "vocab.encode(word_tokens(text))"
            )
        tokens = as_words("tokens", tokens)
        return torch.tensor([self.index.get(t, 0) for t in tokens], dtype=torch.long)

    def decode(self, ids: Tensor | Iterable[int]) -> str:
        """The words of ``ids`` joined by spaces, with no space before punctuation.

        Args:
            ids: token indices, an int64 or int32 tensor of any shape (read in order) or a
                sequence of ``int``.

        Returns:
            The text.

        Raises:
            TypeError: if ``ids`` is not a tensor or sequence of integers: a float (refused,
                not truncated), ``bool``, int8 or uint8 tensor or item, or a ``str``.
            ValueError: if an id is outside ``0 .. len(vocab) - 1``.

        Example:
            >>> CorpusVocabulary(["the", "ship", ","]).decode(torch.tensor([1, 2, 3]))
            'the ship,'
        """
        ids = as_id_list("ids", ids, flatten=True)
        bad = [i for i in ids if not 0 <= i < len(self.words)]
        if bad:
            raise ValueError(f"ids must be in 0..{len(self.words) - 1}; got {bad[:5]}")
        text = " ".join(self.words[i] for i in ids)
        return re.sub(r" ([,.;:!?)]|n't|'s)", r"\1", text)


class NGramModel:
    """An interpolated Kneser–Ney n-gram model of token ids (Chen and Goodman, 1998).

    The probability of a word after the context ``u`` (the last ``n - 1`` tokens) mixes the
    discounted count of ``u w`` with the shorter context's probability:

    .. math::

        p(w \\mid u) = \\frac{\\max(c(u w) - \\delta, 0)}{c(u)} + \\frac{\\delta\\, N_{1+}(u
        \\,\\bullet)}{c(u)}\\, p(w \\mid u'), \\qquad p(w) = \\frac{N_{1+}(\\bullet\\, w) +
        1}{N_{1+}(\\bullet\\,\\bullet) + V}

    where ``u'`` drops the oldest word of ``u``, ``N_{1+}(u •)`` counts the distinct words
    seen after ``u``, and the lower orders count *how many contexts* a word follows rather
    than how often it occurs (Kneser–Ney's continuation counts), with one added so that every
    word of the vocabulary has a probability. ``n = 1`` is the add-one unigram model
    ``(c(w) + 1) / (T + V)``.

    Args:
        ids: the training tokens, a 1-D int64 or int32 tensor or a sequence of ints in
            ``0 .. V-1`` (empty: every order backs off to the uniform ``1 / V``).
        n: the order (1 unigram, 2 bigram, 3 trigram, ...).
        vocab_size: ``V``.
        discount: ``delta`` in ``(0, 1)``.

    Raises:
        TypeError: if ``ids`` is not a tensor or sequence of integers (a float, ``bool``, int8 or
            uint8 tensor or item is refused, not cast), ``n`` or ``vocab_size`` is not an
            ``int``, or ``discount`` is not a real number (a ``bool`` is none of these).
        ValueError: if ``ids`` is a tensor that is not 1-D, ``n`` or ``vocab_size`` is below 1,
            ``discount`` is not in ``(0, 1)`` (NaN included), or an id is outside ``0 .. V-1``.

    Example:
        >>> lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
        >>> round(lm.prob(2, (1,)), 3), round(lm.prob(3, (1,)), 3)
        (0.56, 0.226)
    """

    def __init__(self, ids, n: int, vocab_size: int, discount: float = 0.75):
        ids = as_id_list("ids", ids)
        n = check_int("n", n, low=1)
        vocab_size = check_int("vocab_size", vocab_size, low=1)
        discount = check_real("discount", discount, "a real number in (0, 1)", lambda d: 0 < d < 1)
        _check_id_range("ids", ids, vocab_size)
        self.n, self.vocab_size, self.discount = n, vocab_size, float(discount)
        self.tokens = len(ids)
        # counts[k][(context, w)] for contexts of length k; the highest order counts
        # occurrences, the lower ones continuation counts (distinct left neighbours)
        grams = [Counter() for _ in range(n)]
        for k in range(n):
            grams[k].update(tuple(ids[i - k : i + 1]) for i in range(k, len(ids)))
        self.counts = [Counter() for _ in range(n)]
        self.counts[n - 1] = grams[n - 1]
        for k in range(n - 1):
            self.counts[k] = Counter(g[1:] for g in grams[k + 1])  # N1+(. g)
        if n == 1:
            self.counts[0] = grams[0]
        self.context_total = [Counter() for _ in range(n)]  # sum over w of counts[k][u w]
        self.context_types = [Counter() for _ in range(n)]  # N1+(u .)
        for k in range(n):
            for gram, c in self.counts[k].items():
                self.context_total[k][gram[:-1]] += c
                self.context_types[k][gram[:-1]] += 1

    def with_discount(self, discount: float) -> NGramModel:
        """The same counts with another discount ``delta``, without counting again.

        Tuning ``delta`` on held-out text needs one model per value; the counts do not depend
        on it, so they are shared (read-only) with this model.

        Args:
            discount: ``delta`` in ``(0, 1)``.

        Returns:
            A new :class:`NGramModel` of the same order, vocabulary and counts.

        Raises:
            TypeError: if ``discount`` is not a real number (a ``bool`` is not one).
            ValueError: if ``discount`` is not in ``(0, 1)`` (NaN included).

        Example:
            >>> lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
            >>> round(lm.with_discount(0.5).prob(3, (1,)), 3), lm.discount
            (0.262, 0.75)
        """
        discount = check_real("discount", discount, "a real number in (0, 1)", lambda d: 0 < d < 1)
        other = copy.copy(self)
        other.discount = float(discount)
        return other

    def prob(self, word: int, context: Sequence[int] = ()) -> float:
        """``p(word | context)``; only the last ``n - 1`` tokens of ``context`` are read.

        Args:
            word: an id in ``0 .. V-1``: an ``int`` or a 0-D int64 or int32 tensor.
            context: the ids before it, a sequence of such ids or a 1-D int64 or int32 tensor.

        Returns:
            The probability, a ``float`` in ``(0, 1]``.

        Raises:
            TypeError: if ``word`` is not an integer or ``context`` not a tensor or sequence of
                integers (a float or ``bool`` is refused, not truncated; a ``str`` too).
            ValueError: if ``context`` is a tensor that is not 1-D, or an id is outside
                ``0 .. V-1``.

        Example:
            >>> lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
            >>> round(lm.prob(2, [1]), 3)
            0.56
        """
        word = check_int("word", word, what="an int token id")
        context = as_id_list("context", context)
        if not 0 <= word < self.vocab_size or any(not 0 <= c < self.vocab_size for c in context):
            raise ValueError(
                f"word and context must be in 0..{self.vocab_size - 1}; got {word}, "
                f"{tuple(context)}"
            )
        return self._prob(word, tuple(context))

    def _prob(self, word: int, context: tuple[int, ...]) -> float:
        """``p(word | context)`` for checked ids."""
        context = context[-(self.n - 1) :] if self.n > 1 else ()
        unigrams = self.counts[0]
        p = (unigrams[(word,)] + 1) / (self.context_total[0][()] + self.vocab_size)
        for k in range(1, len(context) + 1):
            u = context[len(context) - k :]
            total = self.context_total[k][u]
            if total == 0:
                continue  # unseen context: keep the lower order's probability
            c = self.counts[k][(*u, word)]
            p = (
                max(c - self.discount, 0) / total
                + self.discount * self.context_types[k][u] / total * p
            )
        return p


def batches(ids: Tensor, context: int, batch_size: int, generator: torch.Generator):
    """One random training batch: ``batch_size`` windows of ``context + 1`` tokens.

    Args:
        ids: the training tokens, ``(T,)`` int64 or int32 with ``T > context``.
        context: the window length ``L``.
        batch_size: ``N``.
        generator: a CPU ``torch.Generator`` that draws the window starts (seed it to make
            training repeatable); ``None`` draws from torch's global generator.

    Returns:
        ``(inputs, targets)``, both ``(batch_size, context)`` long tensors (int64 whatever the
        dtype of ``ids``, as ``F.cross_entropy`` needs its targets): ``targets`` is ``inputs``
        shifted by one token, so position ``t`` learns to predict the token after it.

    Raises:
        TypeError: if ``ids`` is not an int64 or int32 tensor (a list, a float, ``bool``, int8
            or uint8 tensor is refused), ``context`` or ``batch_size`` is not an ``int`` (a
            ``bool`` is not one), or ``generator`` is not a ``torch.Generator`` or ``None``.
        ValueError: if ``ids`` is not 1-D with more than ``context`` tokens, ``context`` or
            ``batch_size`` is below 1, or ``generator`` is not on the CPU.

    Example:
        >>> x, y = batches(torch.arange(10), 4, 2, torch.Generator().manual_seed(0))
        >>> x, y
        (tensor([[2, 3, 4, 5],
                [3, 4, 5, 6]]), tensor([[3, 4, 5, 6],
                [4, 5, 6, 7]]))
    """
    check_ids_tensor("ids", ids)
    context = check_int("context", context, low=1)
    batch_size = check_int("batch_size", batch_size, low=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None; got {type(generator).__name__} "
            f"{generator!r:.40} (make one with torch.Generator().manual_seed(seed))"
        )
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(
            f"generator must be on the CPU (the window starts are drawn there); got one on "
            f"{generator.device}"
        )
    if ids.dim() != 1 or ids.numel() <= context:
        raise ValueError(
            f"ids must be 1-D with more than context={context} tokens; got shape "
            f"{shape_str(ids.shape)}"
        )
    starts = torch.randint(0, ids.numel() - context, (batch_size,), generator=generator)
    rows = starts.unsqueeze(1) + torch.arange(context + 1)  # (N, L + 1)
    window = ids[rows.to(ids.device)].long()  # (N, L + 1)
    return window[:, :-1], window[:, 1:]


@torch.no_grad()
def token_log_probs(model, ids: Tensor, context: int, stride: int | None = None) -> Tensor:
    """The log-probability a language model gives each token of ``ids``, read in windows.

    Windows of ``context`` tokens start every ``stride`` tokens (default ``context // 2``, at
    least 1); each token is scored once, in the first window that scores it after the overlap,
    so that (except at the very start) every token is predicted from at least
    ``context - stride`` tokens before it. The model runs in eval mode and is put back in its
    mode afterwards. Token 0 has no context and is not scored.

    .. math::

        \\ell_t = \\log p(w_t \\mid w_{s(t)}, \\dots, w_{t-1}), \\qquad t = 1, \\dots, T - 1,

    where ``s(t)`` is the start of the window that scores ``t``. The sum of ``-ell`` is the
    text's cross-entropy in nats: divided by the number of tokens it gives the log-perplexity
    (:func:`perplexity`), divided by ``ln 2`` and the text's bytes, its bits per byte.

    Args:
        model: a ``torch.nn.Module`` called as ``model(ids (1, L))`` -> ``(logits (1, L, V),
            ...)``, as :class:`attnlib.LanguageModel`.
        ids: ``(T,)`` token ids, int64 or int32, ``T >= 2``.
        context: the window length, at most the model's ``max_len``.
        stride: how far apart windows start, ``1 .. context``.

    Returns:
        ``(T - 1,)`` float64 natural-log probabilities of tokens ``1 .. T-1``, on the CPU.

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module`` or does not return a tuple whose
            first item is the logits, ``ids`` is not an int64 or int32 tensor (a list, a float,
            ``bool``, int8 or uint8 tensor is refused, not cast), or ``context`` or ``stride``
            is not an ``int`` (a ``bool`` is not one).
        ValueError: if ``ids`` is not 1-D with at least two tokens, ``context`` is below 1,
            ``stride`` is not in ``1 .. context``, or the logits are not ``(1, L, V)``; the
            model's own errors (an id beyond its vocabulary, ``context`` beyond its
            ``max_len``) come from the model.

    Example:
        >>> from attnlib import LanguageModel
        >>> _ = torch.manual_seed(0)
        >>> lm = LanguageModel(50, 12, 3, 1, max_len=16)
        >>> ids = torch.randint(0, 50, (40,))
        >>> log_p = token_log_probs(lm, ids, context=16, stride=8)
        >>> log_p.shape, round(-log_p.mean().item(), 2)  # untrained: about log V = 3.91
        (torch.Size([39]), 3.93)
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            "model must be a torch.nn.Module called as model(ids (1, L)) -> (logits (1, L, V), "
            f"...), as attnlib.LanguageModel; got {type(model).__name__}"
        )
    check_ids_tensor("ids", ids)
    context = check_int("context", context, low=1)
    if stride is None:
        stride = max(1, context // 2)
    stride = check_int("stride", stride, low=1, high=context, what=f"in 1..context={context}")
    if ids.dim() != 1 or ids.numel() < 2:
        raise ValueError(
            f"ids must be 1-D with at least 2 tokens; got shape {shape_str(ids.shape)}"
        )
    ids = ids.long()
    was_training = model.training
    model.eval()
    try:
        pieces, scored = [], 0  # tokens 1..scored are scored
        T = ids.numel()
        start = 0
        while scored < T - 1:
            end = min(start + context + 1, T)
            window = ids[start:end]  # (L + 1,)
            logits = _logits(model(window[:-1].unsqueeze(0)), end - 1 - start)[0]  # (L, V)
            log_p = torch.log_softmax(logits.double(), dim=-1)  # (L, V)
            picked = log_p.gather(1, window[1:, None]).squeeze(1)  # (L,)
            new = end - 1 - scored  # the last `new` targets are not scored yet
            pieces.append(picked[-new:].cpu())
            scored = end - 1
            start += stride
        return torch.cat(pieces)  # (T - 1,)
    finally:
        model.train(was_training)


def perplexity(model, ids, context: int | None = None, stride: int | None = None) -> float:
    """Perplexity of a language model on the tokens ``ids``: a neural one read in windows of
    ``context`` tokens, or an :class:`NGramModel`, which reads its own ``n - 1`` tokens.

    .. math::

        \\operatorname{PPL} = \\exp\\Big(-\\frac{1}{|S|} \\sum_{t \\in S} \\ell_t\\Big)

    where ``ell_t`` is the log-probability of token ``t``. A neural model (a
    ``torch.nn.Module``) scores tokens ``S = 1 .. T-1`` as :func:`token_log_probs` does:
    windows of ``context`` tokens start every ``stride`` tokens (default ``context // 2``, at
    least 1), and each token is scored once, from at least ``context - stride`` tokens before
    it (except at the very start). An :class:`NGramModel` scores every token, ``S = 0 ..
    T-1``, each from the ``n - 1`` tokens before it (the first from none); it takes neither
    ``context`` nor ``stride``.

    Args:
        model: a :class:`NGramModel`, or a ``torch.nn.Module`` called as ``model(ids (1, L))``
            -> ``(logits (1, L, V), ...)``, as :class:`attnlib.LanguageModel`.
        ids: the tokens: for a neural model as :func:`token_log_probs`, ``(T,)`` int64 or int32
            with ``T >= 2``; for an :class:`NGramModel` a 1-D int64 or int32 tensor or a
            sequence of ints in ``0 .. V-1``, at least one.
        context, stride: for a neural model, as :func:`token_log_probs` (``context`` is
            required); ``None`` for an :class:`NGramModel`.

    Returns:
        The perplexity, a float ``>= 1``.

    Raises:
        TypeError: if ``model`` is neither; for a neural model as :func:`token_log_probs`, or
            if ``context`` is not given; for an :class:`NGramModel` if ``ids`` is not a tensor
            or sequence of integers (a float, ``bool``, int8 or uint8 tensor or item is
            refused, not cast).
        ValueError: for a neural model as :func:`token_log_probs`; for an :class:`NGramModel`
            if ``context`` or ``stride`` is given, or ``ids`` is empty, a tensor that is not
            1-D, or holds an id outside ``0 .. V-1``.

    Example:
        >>> lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
        >>> round(perplexity(lm, [1, 2, 1, 3]), 3)
        2.479
        >>> from attnlib import LanguageModel
        >>> _ = torch.manual_seed(0)
        >>> lm = LanguageModel(50, 12, 3, 1, max_len=16)
        >>> ids = torch.randint(0, 50, (40,))
        >>> round(perplexity(lm, ids, context=16), 1)  # untrained: about V = 50
        50.9
    """
    if isinstance(model, NGramModel):
        return _ngram_perplexity(model, ids, context, stride)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            "model must be a torch.nn.Module called as model(ids (1, L)) -> (logits (1, L, V), "
            f"...), as attnlib.LanguageModel, or an NGramModel; got {type(model).__name__}"
        )
    if context is None:
        raise TypeError(
            "context must be given for a neural model: the window length, a positive integer "
            "at most the model's max_len; got None"
        )
    return math.exp(-token_log_probs(model, ids, context, stride).mean().item())


def _ngram_perplexity(model: NGramModel, ids, context, stride) -> float:
    """:func:`perplexity` of an :class:`NGramModel`: every token, from the ``n - 1`` before."""
    if context is not None or stride is not None:
        raise ValueError(
            "context and stride must be None for an NGramModel (it reads the last n - 1 = "
            f"{model.n - 1} tokens itself); got context={context!r}, stride={stride!r}"
        )
    ids = as_id_list("ids", ids)
    if not ids:
        raise ValueError("ids must hold at least one token to score; got none")
    _check_id_range("ids", ids, model.vocab_size)
    nll = -sum(
        math.log(model._prob(w, tuple(ids[max(0, t - model.n + 1) : t]))) for t, w in enumerate(ids)
    )
    return math.exp(nll / len(ids))


def _logits(output, length: int) -> Tensor:
    """The logits ``(1, L, V)`` of a model's output ``(logits, ...)``, or an error saying what
    came instead."""
    logits = output[0] if isinstance(output, (tuple, list)) and output else None
    if not isinstance(logits, Tensor):
        got = (
            type(output).__name__
            if logits is None
            else f"{type(output).__name__} of {type(logits).__name__}"
        )
        raise TypeError(
            "model must return a tuple (logits (1, L, V), ...), as attnlib.LanguageModel does; "
            f"got {got}"
        )
    if logits.dim() != 3 or logits.shape[:2] != (1, length) or not logits.is_floating_point():
        raise ValueError(
            f"model must return logits of shape (1, L={length}, V), floating point; got "
            f"{shape_str(logits.shape)} {logits.dtype}"
        )
    return logits
