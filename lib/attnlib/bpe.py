"""Byte-level byte-pair encoding, by hand: GPT-2's tokenizer, trained and applied in Python.

Byte-pair encoding (Sennrich et al., 2016) learns *merges*: it starts from single symbols and
makes the most frequent pair of neighbours one new symbol, again and again. GPT-2's variant
(Radford et al., 2019) starts from the 256 bytes, so that any text can be encoded and no token
is unknown:

1. a regular expression (:data:`PATTERN`) splits the text into *pre-tokens*: a word with the
   space before it, a number, a run of punctuation, white space;
2. each pre-token's UTF-8 bytes are written as printable characters (:func:`byte_alphabet`:
   a space is ``Ġ``, a line break ``Ċ``), one symbol per byte;
3. merges join neighbouring symbols within a pre-token, never across two.

:func:`train_bpe` learns the merges from a text and :class:`BPETokenizer` applies them; both
agree with Hugging Face ``tokenizers`` (``BpeTrainer`` and ``models.BPE`` with the
``ByteLevel`` pre-tokenizer), which the tests check merge by merge and id by id. The
``regex`` package (for ``\\p{L}``, which Python's ``re`` lacks) and ``tokenizers`` are
imported when first needed.
"""

from __future__ import annotations

import functools
import heapq
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import Tensor

from attnlib._checks import as_id_list, check_int
from attnlib._util import as_path, directory_error, read_text_file, short_repr

__all__ = ["BPETokenizer", "PATTERN", "byte_alphabet", "pretokenize", "train_bpe"]

#: GPT-2's pre-tokenisation regular expression (its source; :func:`pretokenize` compiles it
#: with the ``regex`` package): an English contraction, letters, digits or other symbols
#: with at most one space before them, then white space, whose last space is left to the
#: next word when one follows.
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_MERGES_HEADER = "#version: 0.2"  # the first line of a merges file, as GPT-2's merges.txt


def _bytes_to_unicode() -> list[str]:
    """GPT-2's ``bytes_to_unicode``, as a list: the character of byte ``b`` is item ``b``."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars, shifted = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in chars:  # a control character or a space: moved past the Latin-1 range
            chars[b] = chr(256 + shifted)
            shifted += 1
    return [chars[b] for b in range(256)]


_SYMBOLS = _bytes_to_unicode()  # byte -> its printable character
_TO_SYMBOLS = {b: s for b, s in enumerate(_SYMBOLS)}  # str.translate table: latin-1 -> symbols
_TO_LATIN1 = {ord(s): b for b, s in enumerate(_SYMBOLS)}  # and back


def byte_alphabet() -> dict[int, str]:
    """GPT-2's map from each of the 256 bytes to a printable character (``bytes_to_unicode``).

    The printable ASCII bytes ``!`` .. ``~`` and the printable Latin-1 bytes ``¡`` .. ``¬``,
    ``®`` .. ``ÿ`` stand for themselves; the other 68 (control characters, the space, the
    no-break space and the soft hyphen) become ``chr(256)``, ``chr(257)``, ... in byte order,
    so a space (byte 32) is ``Ġ`` (U+0120) and a line break (byte 10) ``Ċ``. The same map as
    ``tokenizers.pre_tokenizers.ByteLevel.alphabet()``.

    Returns:
        ``{byte: character}`` for bytes ``0 .. 255``, in byte order (a new dict each call).

    Example:
        >>> alphabet = byte_alphabet()
        >>> alphabet[ord("a")], alphabet[ord(" ")], alphabet[ord("\\n")], len(alphabet)
        ('a', 'Ġ', 'Ċ', 256)
    """
    return dict(_TO_SYMBOLS)


@functools.cache
def _pattern():
    """:data:`PATTERN`, compiled with ``regex`` (imported here, on the first call)."""
    import regex

    return regex.compile(PATTERN)


def _symbols(piece: str) -> str:
    """The pre-token ``piece``'s UTF-8 bytes as byte symbols, one character per byte."""
    return piece.encode("utf-8").decode("latin-1").translate(_TO_SYMBOLS)


def _check_text(name: str, text) -> str:
    """``text`` is a ``str`` that UTF-8 can encode (no lone surrogate such as ``"\\ud800"``)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str; got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{name} must be encodable as UTF-8; got the lone surrogate "
            f"U+{ord(text[e.start]):04X} at position {e.start}"
        ) from None
    return text


def pretokenize(text: str) -> list[str]:
    """Split text into GPT-2's pre-tokens, each written in byte symbols.

    The pieces are the matches of :data:`PATTERN`, which cover the whole text; each piece's
    UTF-8 bytes are then mapped through :func:`byte_alphabet`, so ``" ship"`` becomes
    ``"Ġship"`` and ``"é"`` (two bytes) ``"Ã©"``. Joined, the pieces hold every byte of the
    text in order.

    Args:
        text: the text.

    Returns:
        The pre-tokens (empty for an empty text).

    Raises:
        TypeError: if ``text`` is not a ``str``.
        ValueError: if ``text`` holds a lone surrogate (``"\\ud800"``), which UTF-8 cannot
            encode.

    Example:
        >>> pretokenize("Tell me, O Muse, of that ingenious hero's 2 ships\\n")
        ['Tell', 'Ġme', ',', 'ĠO', 'ĠMuse', ',', 'Ġof', 'Ġthat', 'Ġingenious', 'Ġhero', "'s", \
'Ġ2', 'Ġships', 'Ċ']
    """
    _check_text("text", text)
    return [_symbols(piece) for piece in _pattern().findall(text)]


def _as_texts(text) -> list[str]:
    """``text`` (a ``str`` or an iterable of ``str``) as a list of ``str``."""
    expected = "text must be a str or an iterable of str"
    if isinstance(text, (bytes, bytearray)):
        raise TypeError(f"{expected}; got bytes (decode it first: text.decode('utf-8'))")
    if isinstance(text, str):
        return [_check_text("text", text)]
    if not isinstance(text, Iterable):
        raise TypeError(f"{expected}; got {type(text).__name__}")
    texts = list(text)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{expected}; got {type(t).__name__} {short_repr(t)} at position {i}")
        _check_text(f"text[{i}]", t)
    return texts


def _merge(word: tuple[str, ...], a: str, b: str) -> tuple[str, ...]:
    """``word`` with every ``a b`` replaced by ``ab``, read from the left (``a a a`` with
    ``a a`` gives ``aa a``)."""
    out, i, n = [], 0, len(word)
    while i < n:
        if i < n - 1 and word[i] == a and word[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(
    text: str | Iterable[str], num_merges: int, *, min_frequency: int = 2
) -> list[tuple[str, str]]:
    """Learn byte-level BPE merges: repeatedly join the most frequent pair of neighbours.

    The text is cut into pre-tokens (:func:`pretokenize`; the strings of an iterable are cut
    separately) and the distinct pre-tokens are counted. Each starts as its byte symbols. A
    pair's count is the number of times its two symbols stand side by side in a pre-token,
    summed over the pre-tokens weighted by their counts; a pair never spans two pre-tokens.
    Each step takes the pair ``(a, b)`` with the highest count, records it, and replaces
    every ``a b`` by ``ab`` (left to right, so ``a a a`` gives ``aa a``).

    Ties between equal counts are broken as Hugging Face ``tokenizers``' ``BpeTrainer``
    breaks them: the pair whose tokens come first in *its* numbering wins, comparing the
    first token, then the second. That numbering puts the 256 byte symbols in the order of
    their code points (``!`` first, ``Ń`` last), then each merged token in the order it was
    made. So ``BpeTrainer`` (``ByteLevel`` pre-tokenizer, ``initial_alphabet`` the byte
    alphabet, ``vocab_size = 256 + num_merges``) learns the same merges from the same texts;
    the tests check the first 3,000 learned from the Homer books (all 15,939, which leave
    no pair, agree). A merged token is new unless two merges spell the same string
    (``ab c`` and ``a bc``): then the second adds no token, as in ``tokenizers``.

    Only the pre-tokens that hold the chosen pair are rewritten, and only their pairs'
    counts change (an index from each pair to the pre-tokens holding it finds them; a heap
    of counts finds the best pair), so a few thousand merges on a book take seconds.

    Training stops early, with fewer than ``num_merges`` merges, when the best pair occurs
    fewer than ``min_frequency`` times, or when no pair is left (every pre-token is a
    single token); it never raises for that. ``BpeTrainer`` behaves the same with the same
    ``min_frequency`` (its default, 0, merges pairs seen once).

    Args:
        text: the training text, a ``str`` or an iterable of ``str`` (such as the books).
        num_merges: how many merges to learn at most, an ``int >= 0``.
        min_frequency: the fewest occurrences a pair needs to be merged, an ``int >= 1``;
            the default 2 never merges a pair seen once.

    Returns:
        The merges in the order they were learned, each a pair ``(a, b)`` of tokens
        written in byte symbols (``("Ġ", "t")`` joins a space and a ``t``).

    Raises:
        TypeError: if ``text`` is not a ``str`` or an iterable of ``str`` (naming the first
            item that is not), or ``num_merges`` or ``min_frequency`` is not an ``int`` (a
            ``bool`` is not one).
        ValueError: if ``num_merges`` is negative, ``min_frequency`` below 1, or a text
            holds a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode.

    Example:
        >>> train_bpe("low low low lower lowest", 3)
        [('l', 'o'), ('lo', 'w'), ('Ġ', 'low')]
    """
    texts = _as_texts(text)
    num_merges = check_int("num_merges", num_merges, low=0, what="a non-negative int")
    min_frequency = check_int("min_frequency", min_frequency, low=1, what="an int >= 1")
    pieces = Counter()
    for t in texts:
        pieces.update(_pattern().findall(t))
    words = [tuple(_symbols(p)) for p in pieces]  # each distinct pre-token, as symbols
    freqs = list(pieces.values())
    # tokenizers' numbering, which breaks ties: bytes by code point, then merged tokens
    order = {s: i for i, s in enumerate(sorted(_SYMBOLS))}
    counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> words with it
    for i, word in enumerate(words):
        for pair in zip(word, word[1:]):
            counts[pair] += freqs[i]
            where[pair].add(i)
    # the best pair is the smallest (-count, order[a], order[b]); an entry whose count is
    # no longer the pair's count is stale and skipped (a fresh one was pushed on the change)
    heap = [(-c, order[a], order[b], (a, b)) for (a, b), c in counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges and heap:
        count, _, _, pair = heapq.heappop(heap)
        if -count != counts.get(pair):
            continue
        if -count < min_frequency:
            break
        a, b = pair
        merges.append(pair)
        order.setdefault(a + b, len(order))
        before: dict[tuple[str, str], int] = {}  # the counts this merge changes, as they were
        for i in where.pop(pair):
            old, f = words[i], freqs[i]
            new = words[i] = _merge(old, a, b)
            for p in zip(old, old[1:]):
                before.setdefault(p, counts[p])
                counts[p] -= f
            for p in zip(new, new[1:]):
                before.setdefault(p, counts[p])
                counts[p] += f
            old_pairs, new_pairs = set(zip(old, old[1:])), set(zip(new, new[1:]))
            for p in old_pairs - new_pairs - {pair}:
                where[p].discard(i)
            for p in new_pairs - old_pairs:
                where[p].add(i)
        for p, c in before.items():
            now = counts[p]
            if now <= 0:
                del counts[p]
                where.pop(p, None)
            elif now != c:
                heapq.heappush(heap, (-now, order[p[0]], order[p[1]], p))
    return merges


def _check_merges(merges, path: Path | None = None) -> list[tuple[str, str]]:
    """``merges`` as a list of ``(a, b)`` tuples of ``str``, each part a byte symbol or the
    result of an earlier merge; an error names the merge by its index, or, for merges read
    from the file ``path``, by its line."""

    def name(i: int, merge=None) -> str:
        shown = "" if merge is None else f" {short_repr(merge)}"
        return f"merges[{i}]{shown}" if path is None else f"{path}, line {i + 2}: merge{shown}"

    if isinstance(merges, (str, bytes, bytearray)) or not isinstance(merges, Iterable):
        raise TypeError(
            f"merges must be a list of pairs (a, b) of str tokens; got {type(merges).__name__}"
        )
    known = set(_SYMBOLS)
    out = []
    for i, merge in enumerate(merges):
        if not isinstance(merge, (tuple, list)) or any(not isinstance(t, str) for t in merge):
            raise TypeError(f"{name(i, merge)} must be a pair (a, b) of str tokens")
        if len(merge) != 2:
            raise ValueError(
                f"{name(i, merge)} must be a pair (a, b) of tokens; got {len(merge)} items"
            )
        a, b = merge
        unknown = next((t for t in (a, b) if t not in known), None)
        if unknown is not None:
            why = "an empty token" if unknown == "" else f"{unknown!r} is not one"
            raise ValueError(
                f"{name(i, merge)} must join tokens that exist before it (byte symbols or the "
                f"results of earlier merges); {why}"
            )
        known.add(a + b)
        out.append((a, b))
    return out


class BPETokenizer:
    """GPT-2's byte-level BPE tokenizer for a list of merges: text to token ids and back.

    The vocabulary is the 256 byte symbols in byte order (id ``b`` is byte ``b``), then the
    token of each merge in merge order. :meth:`encode` cuts the text into pre-tokens
    (:func:`pretokenize`) and, within each, applies the merge of lowest rank (the earliest
    learned) present among its neighbouring pairs, everywhere it occurs, until no pair of
    the pre-token is a merge: GPT-2's ``bpe()``. Every byte is a token, so there is no
    unknown token and :meth:`decode` gives the text back. The ids equal those of
    :meth:`to_tokenizers`.

    Two merges may spell one token (``ab c`` and ``a bc``): the second adds none, so
    ``len(vocab) = 256 + len(merges)`` unless that happens (it does not in the first 3,000
    merges of the Homer books). A pair listed twice keeps the rank of its last place, as in
    ``tokenizers`` (:func:`train_bpe` can list a pair again only after such a token).

    Args:
        merges: the merges, in rank order: a list of pairs ``(a, b)`` of tokens in byte
            symbols, as :func:`train_bpe` returns; each part must be a byte symbol or the
            result of an earlier merge.

    Attributes:
        vocab: the tokens, ``vocab[id]`` (a list of ``str`` in byte symbols).
        merges: the merges, a list of ``(a, b)`` tuples.

    Raises:
        TypeError: if ``merges`` is not an iterable of pairs, or a pair holds something
            other than ``str`` (naming the merge and its index).
        ValueError: naming the first bad merge and its index, if it has not two items or
            joins a token that is empty or not made before it.

    Example:
        >>> tok = BPETokenizer([("Ġ", "s"), ("h", "i"), ("Ġs", "hi"), ("Ġshi", "p")])
        >>> tok
        BPETokenizer(260 tokens, 4 merges)
        >>> ids = tok.encode("a ship")
        >>> ids, [tok.vocab[i] for i in ids]
        (tensor([ 97, 259]), ['a', 'Ġship'])
        >>> tok.decode(ids)
        'a ship'
    """

    def __init__(self, merges):
        self.merges = _check_merges(merges)
        self.vocab: list[str] = list(_SYMBOLS)
        self._ids = {s: i for i, s in enumerate(self.vocab)}
        for a, b in self.merges:
            if a + b not in self._ids:
                self._ids[a + b] = len(self.vocab)
                self.vocab.append(a + b)
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}  # pre-token -> its ids

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"BPETokenizer({len(self)} tokens, {len(self.merges)} merges)"

    def _bpe(self, piece: str) -> list[int]:
        """The ids of one pre-token (GPT-2's ``bpe()``)."""
        word, ranks, unranked = tuple(_symbols(piece)), self._ranks, len(self.merges)
        while len(word) > 1:
            best = min(zip(word, word[1:]), key=lambda p: ranks.get(p, unranked))
            if best not in ranks:
                break
            word = _merge(word, *best)
        return [self._ids[t] for t in word]

    def encode(self, text: str) -> Tensor:
        """The token ids of ``text``.

        Each distinct pre-token is encoded once and its ids kept (a book repeats its
        words), so the whole *Odyssey* (600 kB) takes a fraction of a second.

        Args:
            text: the text (any ``str``: every byte has a token).

        Returns:
            The ids, a ``(T,)`` LongTensor (``T = 0`` for an empty text).

        Raises:
            TypeError: if ``text`` is not a ``str``.
            ValueError: if ``text`` holds a lone surrogate (``"\\ud800"``), which UTF-8
                cannot encode.

        Example:
            >>> tok = BPETokenizer([("Ġ", "s"), ("h", "i"), ("Ġs", "hi")])
            >>> tok.encode(" ships!")
            tensor([258, 112, 115,  33])
        """
        _check_text("text", text)
        if len(self._cache) > 200_000:  # a bound on the memory a long, varied text takes
            self._cache.clear()
        ids: list[int] = []
        for piece in _pattern().findall(text):
            found = self._cache.get(piece)
            if found is None:
                found = self._cache[piece] = self._bpe(piece)
            ids.extend(found)
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids: Tensor | Iterable[int]) -> str:
        """The text of token ids: their byte symbols joined, read back as bytes, UTF-8 decoded.

        Ids that :meth:`encode` made give its text back exactly. Other sequences may cut a
        character's bytes apart: each invalid byte sequence becomes U+FFFD ``�``
        (``errors="replace"``, as GPT-2 decodes).

        Args:
            ids: token ids, a 1-D int64 or int32 tensor or a sequence of ``int``.

        Returns:
            The text.

        Raises:
            TypeError: if ``ids`` is not a tensor or sequence of integers (a float, ``bool``,
                int8 or uint8 tensor or item is refused, not cast; a ``str`` too).
            ValueError: if ``ids`` is a tensor that is not 1-D, or an id is outside
                ``0 .. len(vocab) - 1`` (naming the first such id and its position).

        Example:
            >>> tok = BPETokenizer([("Ġ", "s")])
            >>> tok.decode([72, 105, 256, 33]), tok.decode(torch.tensor([195, 169]))
            ('Hi s!', 'é')
        """
        ids = as_id_list("ids", ids)
        size = len(self.vocab)
        for pos, i in enumerate(ids):
            if not 0 <= i < size:
                raise ValueError(f"ids must be in 0..{size - 1}; got {i} at position {pos}")
        symbols = "".join([self.vocab[i] for i in ids])
        return symbols.translate(_TO_LATIN1).encode("latin-1").decode("utf-8", errors="replace")

    def to_tokenizers(self):
        """The same tokenizer in Hugging Face ``tokenizers`` (imported here).

        A ``models.BPE`` with this vocabulary (``{token: id}``) and these merges, the
        ``ByteLevel`` pre-tokenizer (``add_prefix_space=False``, ``use_regex=True``: the
        split of :data:`PATTERN`) and the ``ByteLevel`` decoder; no normalizer, no special
        token. Its ``encode(text).ids`` equal :meth:`encode`'s.

        Returns:
            A ``tokenizers.Tokenizer``.

        Raises:
            ImportError: if ``tokenizers`` is not installed.

        Example:
            >>> tok = BPETokenizer([("Ġ", "s"), ("h", "i"), ("Ġs", "hi")])
            >>> tok.to_tokenizers().encode(" ships!").ids
            [258, 112, 115, 33]
        """
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        vocab = {token: i for i, token in enumerate(self.vocab)}
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=list(self.merges)))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer

    def save(self, path: str | os.PathLike) -> None:
        """Write the merges to a file, as GPT-2's ``merges.txt``, atomically.

        The first line is ``#version: 0.2``; then one merge a line, its two tokens separated
        by a space (no token holds a space: a space is the byte symbol ``Ġ``). The text goes
        to a temporary file beside ``path``, which is then renamed over it, so a reader sees
        the old file or the new one, never half of one.

        Args:
            path: the file to write (its folder must exist).

        Returns:
            ``None``.

        Raises:
            TypeError: if ``path`` is not a ``str`` or ``os.PathLike``.
            IsADirectoryError: if ``path`` is a directory.
            OSError: if the file cannot be written (the old file, if any, is left as it was).

        Example:
            >>> import tempfile
            >>> path = Path(tempfile.mkdtemp()) / "merges.txt"
            >>> BPETokenizer([("Ġ", "s"), ("h", "i")]).save(path)
            >>> path.read_text()
            '#version: 0.2\\nĠ s\\nh i\\n'
        """
        path = as_path(path)
        if path.is_dir():
            raise directory_error(path, "a merges file to write")
        text = "".join(f"{a} {b}\n" for a, b in self.merges)
        _write_atomic(path, (_MERGES_HEADER + "\n" + text).encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPETokenizer:
        """A tokenizer from a merges file, as :meth:`save` writes and GPT-2's ``merges.txt``.

        Args:
            path: the file: a first line that starts with ``#version`` (``#version: 0.2``),
                then one merge ``a b`` a line (tokens in byte symbols).

        Returns:
            A :class:`BPETokenizer`.

        Raises:
            TypeError: if ``path`` is not a ``str`` or ``os.PathLike``.
            FileNotFoundError: if ``path`` does not exist.
            IsADirectoryError: if ``path`` is a directory.
            ValueError: naming the file and the line, if the file is not UTF-8, lacks the
                header, has a line that is not two tokens separated by one space, or a merge
                that :class:`BPETokenizer` refuses (a token not made before it).

        Example:
            >>> import tempfile
            >>> path = Path(tempfile.mkdtemp()) / "merges.txt"
            >>> _ = path.write_text("#version: 0.2\\nĠ s\\nh i\\nĠs hi\\n", encoding="utf-8")
            >>> BPETokenizer.load(path).merges
            [('Ġ', 's'), ('h', 'i'), ('Ġs', 'hi')]
        """
        path, text = read_text_file(
            path,
            "a merges file ('#version: 0.2', then 'a b' a line)",
            "a merges file is UTF-8 text",
        )
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the line break that ends the last line
        if not lines or not lines[0].startswith("#version"):
            got = repr(lines[0]) if lines else "an empty file"
            raise ValueError(
                f"{path}, line 1: expected the header {_MERGES_HEADER!r} of a merges file; "
                f"got {got}"
            )
        merges = []
        for number, line in enumerate(lines[1:], start=2):
            fields = line.split(" ")
            if len(fields) != 2 or "" in fields:
                raise ValueError(
                    f"{path}, line {number}: expected a merge 'a b', two tokens separated by "
                    f"one space; got {short_repr(line)} ({len(line.split())} fields)"
                )
            merges.append((fields[0], fields[1]))
        return cls(_check_merges(merges, path))


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, and rename it
    over ``path``; on any error remove the temporary file and leave ``path`` as it was."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(name, 0o644)  # mkstemp makes the file private; open() would not
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
