"""Words from text: the one splitting rule (:func:`tokenize`) and seed 001's toy vocabulary,
made deterministic (:class:`SentenceVocabulary`)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["BOS", "EOS", "SentenceVocabulary", "tokenize"]

BOS = 0  #: index of the beginning-of-sequence token
EOS = 1  #: index of the end-of-sequence token


def tokenize(sentence: str) -> list[str]:
    """Split a sentence into lower-case words at white space, as the seeds do.

    ``tokenize(s) == s.lower().split()``: GloVe 6B is lower-cased, and its punctuation is
    split off as separate tokens, so write ``"ship ."`` rather than ``"ship."``. Any white
    space separates words (tabs, line breaks, and Unicode spaces such as U+00A0 and U+3000);
    punctuation stays attached (``"fine,"`` is one word).
    :class:`~attnlib.tokenizer.SentenceVocabulary` and :meth:`attnlib.Embeddings.matrix` split
    with this function.

    Args:
        sentence: the text.

    Returns:
        The list of words.

    Raises:
        TypeError: if ``sentence`` is not a ``str``.
        ValueError: if ``sentence`` has no word.

    Example:
        >>> tokenize("I must go back to my ship and to my crew")
        ['i', 'must', 'go', 'back', 'to', 'my', 'ship', 'and', 'to', 'my', 'crew']
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str; got {type(sentence).__name__}")
    words = sentence.lower().split()
    if not words:
        raise ValueError(f"sentence must contain at least one word; got {sentence!r}")
    return words


class SentenceVocabulary:
    """Word <-> index tables built from a text, with ``BOS = 0`` and ``EOS = 1``, that encode
    one sentence at a time as a batch of one, ``(1, n)``: a *closed* vocabulary, in which a
    word it does not hold is an error (``KeyError``), not a guess.

    (:class:`attnlib.corpus.CorpusVocabulary` is the open one a language model reads a book
    with: ``<unk>`` is 0, a stream of tokens is encoded as ``(T,)``, and a word outside the
    vocabulary becomes ``<unk>``.)

    Seed 001 numbered the words in ``set`` order, which changes from one Python process to
    the next (string hashing is randomised); here the words are **sorted**, so the indices
    are the same on every run. Words are split by :func:`tokenize` (lower case, split at white
    space): on the seed's one-line text this is its ``split(" ")``, but a tab or a line break
    also separates words (``split(" ")`` would make ``"you\\ni"`` a word).

    Args:
        text: a string, or an iterable of strings, whose words make the vocabulary.

    Attributes:
        index2word: ``dict[int, str]``, ``{0: "BOS", 1: "EOS", 2: first word, ...}``.
        word2index: the inverse ``dict[str, int]``.

    Raises:
        TypeError: if ``text`` is not a string or an iterable of strings (naming the first item that
            is not).
        ValueError: if ``text`` has no word.

    Example:
        >>> vocab = SentenceVocabulary("How are you doing ?")
        >>> vocab.index2word
        {0: 'BOS', 1: 'EOS', 2: '?', 3: 'are', 4: 'doing', 5: 'how', 6: 'you'}
        >>> ids = vocab.encode("How are you ?")
        >>> ids
        tensor([[5, 3, 6, 2]])
        >>> vocab.decode(ids)
        'How are you ?'
    """

    def __init__(self, text: str | Iterable[str]):
        expected = "text must be a str or an iterable of str"
        if isinstance(text, (bytes, bytearray)):
            raise TypeError(f"{expected}; got bytes (decode it first: text.decode('utf-8'))")
        if isinstance(text, str):
            texts = [text]
        elif isinstance(text, Iterable):
            texts = list(text)
        else:
            raise TypeError(f"{expected}; got {type(text).__name__}")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"{expected}; got {type(t).__name__} {t!r:.40} at position {i}")
        try:  # a space between texts: the words of each, as tokenize gives them
            words = sorted(set(tokenize(" ".join(texts))))
        except ValueError:
            raise ValueError(f"text must contain at least one word; got {text!r}") from None
        self.index2word: dict[int, str] = {BOS: "BOS", EOS: "EOS"}
        for word in words:
            self.index2word[len(self.index2word)] = word
        self.word2index: dict[str, int] = {w: i for i, w in self.index2word.items()}

    def __len__(self) -> int:
        return len(self.index2word)

    def __repr__(self) -> str:
        return f"SentenceVocabulary({len(self)} tokens)"

    def encode(self, sentence: str) -> Tensor:
        """Indices of the words of ``sentence`` as a ``(1, n)`` LongTensor (a batch of one).

        Words are split by :func:`tokenize`, as in the vocabulary.

        Raises:
            TypeError: if ``sentence`` is not a ``str``.
            ValueError: if ``sentence`` has no word.
            KeyError: if a word of ``sentence`` is not in the vocabulary, naming every such word.
        """
        words = tokenize(sentence)
        missing = [w for w in words if w not in self.word2index]
        if missing:
            raise KeyError(f"words not in the vocabulary: {missing}")
        return torch.tensor([self.word2index[w] for w in words], dtype=torch.long).view(1, -1)

    def decode(self, ids: Tensor) -> str:
        """The sentence of a ``(1, n)`` or ``(n,)`` tensor of indices, capitalised as seed 001.

        Raises:
            TypeError: if ``ids`` is not a tensor of integers (a float or bool tensor is refused,
                not rounded).
            ValueError: if ``ids`` has another shape than ``(1, n)`` or ``(n,)``.
            KeyError: if ``ids`` holds an index that is not in the vocabulary, naming the unknown
                indices.
        """
        if not isinstance(ids, Tensor):
            raise TypeError(
                f"ids must be a torch.Tensor of shape (1, n) or (n,); got {type(ids).__name__}"
            )
        if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
            raise TypeError(f"ids must be an integer tensor (token indices); got dtype {ids.dtype}")
        if ids.dim() not in (1, 2) or (ids.dim() == 2 and ids.shape[0] != 1):
            raise ValueError(
                f"ids must be a tensor of shape (1, n) or (n,); got {tuple(ids.shape)}"
            )
        indices = ids.reshape(-1).tolist()  # (n,)
        missing = [i for i in indices if i not in self.index2word]
        if missing:
            raise KeyError(f"indices not in the vocabulary (0..{len(self) - 1}): {missing}")
        return " ".join(self.index2word[i] for i in indices).capitalize()
