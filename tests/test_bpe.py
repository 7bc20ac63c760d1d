"""attnlib.bpe: byte-level BPE by hand, checked against Hugging Face ``tokenizers``.

The byte alphabet against GPT-2's and ``tokenizers``'; a training run computed by hand; the
merges learned from the Homer books against ``BpeTrainer``'s, merge by merge; encoding against
``models.BPE`` on both poems, odd strings and any text (hypothesis); round trips; the merges
file against the one ``tokenizers`` writes; bad input.
"""

import json
import subprocess
import sys

import pytest
import torch
from attnlib.bpe import PATTERN, BPETokenizer, byte_alphabet, pretokenize, train_bpe
from attnlib.corpus import read_books
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

ODYSSEY = ROOT / "data" / "odyssey.txt"
ILIAD = ROOT / "data" / "iliad.txt"
NUM_MERGES = 3000

ODD_STRINGS = [
    pytest.param("", id="empty"),
    pytest.param(" ", id="one-space"),
    pytest.param("Ulysses\u2019 wife\u2014\u201cPenelope\u201d\u2014said: \u2018No.\u2019",
                 id="curly-quotes-em-dashes"),
    pytest.param("na\u00efve caf\u00e9 \u00c6r\u00f8 fa\u00e7ade nai\u0308ve", id="accents"),
    pytest.param("\U0001f642 \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467",
                 id="emoji"),
    pytest.param("\u1f04\u03bd\u03b4\u03c1\u03b1 \u03bc\u03bf\u03b9 \u1f14\u03bd\u03bd\u03b5\u03c0"
                 "\u03b5, \u03bc\u03bf\u1fe6\u03c3\u03b1, \u03c0\u03bf\u03bb\u03cd\u03c4\u03c1"
                 "\u03bf\u03c0\u03bf\u03bd", id="greek"),
    pytest.param("In 1900, 10,000 ships; 3.14, \u0663\u0664, \u00bd and 2nd", id="numbers"),
    pytest.param("  many   spaces    here  ", id="multiple-spaces"),
    pytest.param("\ttabs\t\tand\t \tmore\t", id="tabs"),
    pytest.param("line\nbreaks\n\n\r\nend\n", id="newlines"),
    pytest.param("no-break\u00a0space\u3000ideographic\u2028separator", id="unicode-spaces"),
    pytest.param("I'm sure you'll see they've 'S 'll", id="contractions"),
    pytest.param("\u5965\u5fb7\u8d5b \ud55c\uad6d\uc5b4", id="cjk"),
    pytest.param("\x00\x01\x1f\x7f\x85 ctrl", id="control-characters"),
]  # fmt: skip


@pytest.fixture(scope="module")
def books():
    """Both poems, book by book."""
    return {
        "odyssey": list(read_books(ODYSSEY).values()),
        "iliad": list(read_books(ILIAD).values()),
    }


@pytest.fixture(scope="module")
def training(books):
    """The training books: Odyssey I-XXI and the whole Iliad (1.3 MB)."""
    return books["odyssey"][:21] + books["iliad"]


@pytest.fixture(scope="module")
def merges(training):
    return train_bpe(training, NUM_MERGES)


@pytest.fixture(scope="module")
def tok(merges):
    return BPETokenizer(merges)


@pytest.fixture(scope="module")
def hf(tok):
    return tok.to_tokenizers()


def hf_train(texts, vocab_size, min_frequency=0):
    """The merges ``tokenizers``' BpeTrainer learns, with the ByteLevel pre-tokenizer."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator(texts, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


# ---------------------------------------------------------------- the byte alphabet


def test_byte_alphabet_is_gpt2s():
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    alphabet = byte_alphabet()
    assert alphabet == bytes_to_unicode()
    assert list(alphabet) == list(range(256))
    chars = list(alphabet.values())
    assert len(set(chars)) == 256
    assert all(len(c) == 1 and c.isprintable() and not c.isspace() for c in chars)
    assert set(chars) == set(pre_tokenizers.ByteLevel.alphabet())
    assert all(alphabet[b] == chr(b) for b in range(ord("!"), ord("~") + 1))
    assert (alphabet[0], alphabet[ord(" ")], alphabet[ord("\n")], alphabet[255]) == (
        "\u0100",
        "\u0120",
        "\u010a",
        "\u00ff",
    )
    alphabet[0] = "changed"
    assert byte_alphabet()[0] == "\u0100"  # a copy each call


# ---------------------------------------------------------------- pre-tokens


@pytest.mark.parametrize("text", ODD_STRINGS)
def test_pretokenize_equals_tokenizers_byte_level(text):
    ours = pretokenize(text)
    theirs = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str(text)
    assert ours == [piece for piece, _ in theirs]
    inverse = {c: b for b, c in byte_alphabet().items()}
    assert bytes(inverse[c] for c in "".join(ours)) == text.encode("utf-8")


def test_pretokenize_splits_words_with_their_space():
    assert pretokenize("Tell me, O Muse;  he's 20\n") == [
        "Tell", "\u0120me", ",", "\u0120O", "\u0120Muse", ";", "\u0120", "\u0120he", "'s",
        "\u012020", "\u010a",
    ]  # fmt: skip
    assert PATTERN.startswith("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+")


# ---------------------------------------------------------------- training

# " low low low lower lowest newer newer wider", by hand (Ġ is the space):
#   Ġlow x3, Ġlower, Ġlowest, Ġnewer x2, Ġwider
#   counts: Ġl 5, lo 5, ow 5, we 4, er 4, Ġn ne ew 2, the rest 1
#   ties go to the pair whose first token comes first in tokenizers' numbering (byte symbols
#   by code point: e < l < n < o < w < Ġ (U+0120); merged tokens after them, in order made)
#   1. (l, o)       5: l < o < Ġ
#   2. (Ġ, lo)      5, tied with (lo, w): Ġ (a byte symbol) comes before lo (merged)
#   3. (Ġlo, w)     5
#   4. (e, r)       4 (lower, newer x2, wider); (w, e) fell to 2: lower's w went into Ġlow
#   5. (e, w)       2, tied with (Ġ, n), (n, e), (w, er): e first
#   6. (n, ew)      2, tied with (Ġ, n) and (ew, er): n < Ġ < ew
#   7. (Ġ, new)     2, tied with (new, er)
#   8. (Ġnew, er)   2
#   then every pair occurs once: training stops, with 8 merges of the 10 asked for
HAND_TEXT = " low low low lower lowest newer newer wider"
HAND_MERGES = [
    ("l", "o"), ("\u0120", "lo"), ("\u0120lo", "w"), ("e", "r"), ("e", "w"), ("n", "ew"),
    ("\u0120", "new"), ("\u0120new", "er"),
]  # fmt: skip


def test_train_bpe_by_hand():
    assert train_bpe(HAND_TEXT, 10) == HAND_MERGES
    assert train_bpe(HAND_TEXT, 3) == HAND_MERGES[:3]
    assert train_bpe(HAND_TEXT, 0) == []
    assert hf_train([HAND_TEXT], 256 + 10, min_frequency=2) == HAND_MERGES


def test_train_bpe_with_min_frequency_one_runs_until_no_pair_is_left():
    merges = train_bpe(HAND_TEXT, 100, min_frequency=1)
    assert merges[:8] == HAND_MERGES and len(merges) > 8
    tok = BPETokenizer(merges)
    for word in HAND_TEXT.split(" ")[1:]:
        assert len(tok.encode(" " + word)) == 1  # every pre-token is one token
    assert merges == hf_train([HAND_TEXT], 256 + 100, min_frequency=0)


def test_train_bpe_never_merges_across_texts_or_pre_tokens():
    assert train_bpe(["xy", "xy"], 5) == [("x", "y")]
    assert train_bpe(["x", "y", "x", "y"], 5) == []  # x and y never side by side in one text
    assert train_bpe("a.a.a.a.", 5) == []  # letters and punctuation: separate pre-tokens
    assert train_bpe("x! x! x!", 5) == [("\u0120", "x")]  # "!" is a pre-token of its own
    assert train_bpe("", 5) == train_bpe([], 5) == train_bpe("abc", 5) == []


def test_train_bpe_breaks_ties_on_the_second_token_too():
    # ". . , . . ,": (".", ".") and (".", ",") both occur twice; "," (U+002C) < "." (U+002E)
    assert train_bpe("..,..,", 5) == [(".", ","), (".", ".,")]
    assert hf_train(["..,..,"], 256 + 5, min_frequency=2) == [(".", ","), (".", ".,")]


def test_train_bpe_is_tokenizers_bpe_trainer_on_the_books(training, merges):
    assert len(merges) == NUM_MERGES
    theirs = hf_train(training, 256 + NUM_MERGES)
    agree = next((i for i, (a, b) in enumerate(zip(merges, theirs)) if a != b), len(merges))
    assert agree == NUM_MERGES, (agree, merges[agree], theirs[agree])
    assert merges == theirs


def test_merges_on_the_books_are_all_new_tokens(merges, tok):
    assert len({a + b for a, b in merges}) == NUM_MERGES
    assert len(tok) == 256 + NUM_MERGES
    assert merges[0] == ("\u0120", "t")  # the most frequent pair of English: " t"


# ---------------------------------------------------------------- encoding


def test_encode_equals_tokenizers_on_every_book(books, tok, hf):
    for poem, texts in books.items():
        for number, text in enumerate(texts, start=1):
            ids = tok.encode(text)
            assert ids.dtype == torch.long and ids.dim() == 1
            assert ids.tolist() == hf.encode(text).ids, f"{poem} book {number}"
            assert tok.decode(ids) == text, f"{poem} book {number}"


@pytest.mark.parametrize("text", ODD_STRINGS)
def test_encode_equals_tokenizers_on_odd_strings(tok, hf, text):
    ids = tok.encode(text)
    assert ids.tolist() == hf.encode(text).ids
    assert tok.decode(ids) == text
    assert tok.decode(ids.tolist()) == text
    assert hf.decode(ids.tolist()) == text


def test_encode_empty_text(tok):
    ids = tok.encode("")
    assert ids.shape == (0,) and ids.dtype == torch.long
    assert tok.decode(ids) == tok.decode([]) == ""


@settings(max_examples=300)
@given(text=st.text())
def test_any_text_round_trips_and_agrees_with_tokenizers(tok, hf, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids.tolist() == hf.encode(text).ids


@given(text=st.text(alphabet="ab \n", max_size=30), data=st.data())
def test_small_vocabularies_agree_with_tokenizers(text, data):
    """Merges learned from a tiny text, applied to another: many overlapping runs (a a a)."""
    merges = train_bpe(text, 20, min_frequency=1)
    tok = BPETokenizer(merges)
    other = data.draw(st.text(alphabet="ab \n", max_size=30))
    assert tok.encode(other).tolist() == tok.to_tokenizers().encode(other).ids
    assert tok.decode(tok.encode(other)) == other


def test_names_are_pieces_and_no_token_is_unknown(tok, hf):
    alphabet = byte_alphabet()
    assert tok.vocab[:256] == [alphabet[b] for b in range(256)]  # every byte is a token
    assert not any(t.startswith("<") and t.endswith(">") for t in tok.vocab)
    for name in ["Euryclea", "Telemachus", "Ulysses", "Eurycleia's", "Ὀδυσσεύς"]:
        for text in (name, " " + name):
            ids = tok.encode(text)
            assert ids.tolist() == hf.encode(text).ids
            assert all(0 <= i < len(tok) for i in ids.tolist())
            assert tok.decode(ids) == text
    assert [tok.vocab[i] for i in tok.encode(" Telemachus ")] == ["\u0120Telemachus", "\u0120"]
    assert len(tok.encode("Euryclea")) > 1  # rarer, and never at a paragraph's start


def test_decode_cut_characters_become_replacement_characters(tok, hf):
    ids = tok.encode("é").tolist()
    assert ids == [195, 169]
    assert tok.decode(ids[:1]) == hf.decode(ids[:1]) == "\ufffd"


def test_the_cache_holds_each_distinct_pre_token_once(books, merges):
    """The second encoding of a book reads every pre-token's ids from the cache."""
    tok = BPETokenizer(merges)
    text = books["odyssey"][0]
    first = tok.encode(text)
    assert len(tok._cache) == len(set(pretokenize(text))) < len(pretokenize(text))
    assert torch.equal(tok.encode(text), first)


def test_import_is_light():
    script = (
        "import sys\nimport attnlib.bpe\n"
        "print(sorted({'regex', 'tokenizers'} & {m.split('.')[0] for m in sys.modules}))\n"
        "attnlib.bpe.pretokenize('a b')\n"
        "print(sorted({'regex', 'tokenizers'} & {m.split('.')[0] for m in sys.modules}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "['regex']"]


# ---------------------------------------------------------------- the merges file


def test_save_load_round_trip(tmp_path, tok):
    path = tmp_path / "merges.txt"
    tok.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == 1 + NUM_MERGES
    assert lines[1] == "\u0120 t"
    loaded = BPETokenizer.load(path)
    assert loaded.merges == tok.merges and loaded.vocab == tok.vocab
    assert [p.name for p in tmp_path.iterdir()] == ["merges.txt"]  # no temporary left
    tok.save(str(path))  # over the old file, from a str
    assert BPETokenizer.load(str(path)).merges == tok.merges


def test_save_writes_the_merges_file_tokenizers_writes(tmp_path, tok, hf):
    hf.model.save(str(tmp_path), "hf")
    ours = tmp_path / "ours.txt"
    tok.save(ours)
    assert ours.read_bytes() == (tmp_path / "hf-merges.txt").read_bytes()
    assert BPETokenizer.load(tmp_path / "hf-merges.txt").merges == tok.merges
    vocab = json.loads((tmp_path / "hf-vocab.json").read_text(encoding="utf-8"))
    assert vocab == {t: i for i, t in enumerate(tok.vocab)}


def test_save_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    import os

    path = tmp_path / "merges.txt"
    path.write_text("old", encoding="utf-8")

    def full(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="disk full"):
        BPETokenizer([("a", "b")]).save(path)
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["merges.txt"]


MALFORMED = [
    pytest.param(b"", r"line 1: expected the header '#version: 0.2'.*got an empty file",
                 id="empty-file"),
    pytest.param(b"a b\n", r"line 1: expected the header '#version: 0.2'.*got 'a b'",
                 id="no-header"),
    pytest.param(b"#version: 0.2\na b\nab\n", r"line 3: expected a merge 'a b'.*got 'ab' \(1 fie",
                 id="one-field"),
    pytest.param(b"#version: 0.2\na b c\n", r"line 2: expected a merge 'a b'.*\(3 fields\)",
                 id="three-fields"),
    pytest.param(b"#version: 0.2\na  b\n", r"line 2: expected a merge 'a b'", id="two-spaces"),
    pytest.param(b"#version: 0.2\na b\n\nb c\n", r"line 3: expected a merge 'a b'",
                 id="blank-line"),
    pytest.param(b"#version: 0.2\na b\nab cd\n",
                 r"line 3: merge \('ab', 'cd'\) must join tokens that exist before it.*'cd' "
                 r"is not one", id="unknown-token"),
    pytest.param(b"#version: 0.2\nab c\na b\n", r"line 2: merge \('ab', 'c'\) must join",
                 id="token-made-later"),
    pytest.param(b"#version: 0.2\na b\n\xff\xfe\n", r"line 3: not UTF-8 \(byte 0xff",
                 id="not-utf8"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "match"), MALFORMED)
def test_load_names_the_line_of_a_malformed_file(tmp_path, data, match):
    path = tmp_path / "merges.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as info:
        BPETokenizer.load(path)
    assert str(path) in str(info.value)


def test_load_and_save_refuse_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        BPETokenizer.load(tmp_path / "missing.txt")
    with pytest.raises(IsADirectoryError, match="path must be a merges file"):
        BPETokenizer.load(tmp_path)
    with pytest.raises(IsADirectoryError, match="path must be a merges file"):
        BPETokenizer([]).save(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike; got bytes"):
        BPETokenizer.load(b"merges.txt")


def test_load_reads_windows_line_ends_and_a_missing_last_line_break(tmp_path):
    path = tmp_path / "merges.txt"
    path.write_bytes(b"#version: 0.2 - trained elsewhere\r\na b\r\nab c")
    assert BPETokenizer.load(path).merges == [("a", "b"), ("ab", "c")]


# ---------------------------------------------------------------- the tokenizer object


def test_vocab_repr_and_len():
    tok = BPETokenizer([("\u0120", "s"), ("h", "i"), ("\u0120s", "hi"), ("s", "\u0120")])
    assert tok.vocab[256:] == ["\u0120s", "hi", "\u0120shi", "s\u0120"]
    assert len(tok) == 260 and repr(tok) == "BPETokenizer(260 tokens, 4 merges)"
    assert BPETokenizer([]).vocab == list(byte_alphabet().values())
    assert BPETokenizer(tuple([["a", "b"]])).merges == [("a", "b")]  # lists become tuples


def test_a_token_spelled_twice_is_one_token():
    """("ab", "c") and ("a", "bc") both make "abc": the second adds no token, as tokenizers."""
    merges = [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]
    tok = BPETokenizer(merges)
    assert tok.vocab[256:] == ["ab", "bc", "abc"]
    hf = tok.to_tokenizers()
    for text in ["abc", "bca", "abcbc", "xbc abc a bc"]:
        assert tok.encode(text).tolist() == hf.encode(text).ids
        assert tok.decode(tok.encode(text)) == text


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        pytest.param(b"abc", TypeError, r"text must be a str or an iterable of str; got bytes",
                     id="bytes"),
        pytest.param(3, TypeError, r"text must be a str or an iterable of str; got int",
                     id="int"),
        pytest.param(["a", 3], TypeError, r"iterable of str; got int 3 at position 1",
                     id="int-item"),
        pytest.param("a\ud800b", ValueError, r"text must be encodable as UTF-8; got the lone "
                     r"surrogate U\+D800 at position 1", id="surrogate"),
        pytest.param(["ok", "\udfff"], ValueError, r"text\[1\] must be encodable as UTF-8",
                     id="surrogate-item"),
    ],
)  # fmt: skip
def test_train_bpe_refuses_bad_text(text, error, match):
    with pytest.raises(error, match=match):
        train_bpe(text, 3)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_merges": -1}, ValueError, r"num_merges must be a non-negative int; got -1"),
        ({"num_merges": True}, TypeError, r"num_merges must be a non-negative int; got bool"),
        ({"num_merges": 2.0}, TypeError, r"num_merges must be a non-negative int; got float"),
        ({"num_merges": 2, "min_frequency": 0}, ValueError, r"min_frequency must be an int >= 1"),
        ({"num_merges": 2, "min_frequency": 1.5}, TypeError, r"min_frequency must be an int"),
    ],
)
def test_train_bpe_refuses_bad_numbers(kwargs, error, match):
    with pytest.raises(error, match=match):
        train_bpe("a b", **kwargs)


@pytest.mark.parametrize(
    ("merges", "error", "match"),
    [
        pytest.param("a b", TypeError, r"merges must be a list of pairs \(a, b\) of str tokens; "
                     r"got str", id="str"),
        pytest.param(5, TypeError, r"merges must be a list of pairs.*got int", id="int"),
        pytest.param([("a", "b"), "ab c"], TypeError, r"merges\[1\] 'ab c' must be a pair "
                     r"\(a, b\) of str tokens", id="str-item"),
        pytest.param([("a", 1)], TypeError, r"merges\[0\] \('a', 1\) must be a pair",
                     id="int-part"),
        pytest.param([("a", "b", "c")], ValueError, r"merges\[0\] \('a', 'b', 'c'\) must be a "
                     r"pair \(a, b\) of tokens; got 3 items", id="three"),
        pytest.param([("a", "b"), ("", "b")], ValueError, r"merges\[1\] \('', 'b'\) must join "
                     r"tokens that exist before it.*; an empty token", id="empty-token"),
        pytest.param([("a", "b"), ("ab", "cd")], ValueError, r"merges\[1\] \('ab', 'cd'\) must "
                     r"join tokens that exist before it.*'cd' is not one", id="unknown"),
        pytest.param([("ab", "c"), ("a", "b")], ValueError, r"merges\[0\] \('ab', 'c'\)",
                     id="made-later"),
        pytest.param([(" ", "a")], ValueError, r"merges\[0\] \(' ', 'a'\).*' ' is not one",
                     id="raw-space-not-a-byte-symbol"),
    ],
)  # fmt: skip
def test_bpe_tokenizer_refuses_bad_merges(merges, error, match):
    with pytest.raises(error, match=match):
        BPETokenizer(merges)


@pytest.mark.parametrize(
    ("ids", "error", "match"),
    [
        ([1, 300, 2], ValueError, r"ids must be in 0\.\.256; got 300 at position 1"),
        ([-1], ValueError, r"ids must be in 0\.\.256; got -1 at position 0"),
        (torch.tensor([[1, 2]]), ValueError, r"ids must be 1-D"),
        (torch.tensor([1.0]), TypeError, r"ids must hold token ids as torch.int64.*float32"),
        ([1.0], TypeError, r"ids must all be int token ids; got float"),
        ("ab", TypeError, r"ids must be a tensor or a sequence of int token ids; got str"),
    ],
)
def test_decode_refuses_bad_ids(ids, error, match):
    with pytest.raises(error, match=match):
        BPETokenizer([("a", "b")]).decode(ids)


def test_encode_and_pretokenize_refuse_bad_text():
    tok = BPETokenizer([])
    with pytest.raises(TypeError, match=r"text must be a str; got bytes"):
        tok.encode(b"ab")
    with pytest.raises(ValueError, match=r"text must be encodable as UTF-8; got the lone "):
        tok.encode("ok \ud83d")
    with pytest.raises(TypeError, match=r"text must be a str; got list"):
        pretokenize(["a"])


def test_a_pair_listed_twice_keeps_its_last_rank_as_in_tokenizers():
    tok = BPETokenizer([("a", "b"), ("b", "c"), ("a", "b")])
    assert len(tok) == 258
    assert [tok.vocab[i] for i in tok.encode("abc")] == ["a", "bc"]  # (b, c) ranks before
    assert tok.encode("abc abcab").tolist() == tok.to_tokenizers().encode("abc abcab").ids
