"""attnlib.sentencepiece (issue 49): SentencePiece's BPE by hand, proven equal to ``transformers``'
Gemma 3 tokenizer built from the GGUF file, on every line of the *Odyssey*, on hard Unicode cases
and on random text, in both ways of reading a control token spelled in the text
(``parse_special=True``: ``tok(text)``; ``False``: ``tok(text, split_special_tokens=True)``).

The one divergence, stated in ``test_long_space_runs_differ_from_transformers``: a run of more
than 31 spaces. Here (as in SentencePiece and llama.cpp) the longest user-defined whitespace piece
comes first; ``transformers`` reaches the pieces by merges and cuts the run elsewhere.

The vocabulary and the GGUF file come from ``attnlib.gemma3`` (the package's file, checked).
"""

import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from attnlib import gemma3  # noqa: E402
from attnlib.sentencepiece import SentencePieceTokenizer  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ODYSSEY = ROOT / "data" / "odyssey.txt"
BOS, SPACES_2, SPACES_9, SPACES_16, SPACES_24, SPACES_31 = 2, 138, 145, 152, 160, 167


@pytest.fixture(scope="module")
def vocab():
    """Gemma 3 270M's vocabulary: ``tokens``, ``scores``, ``types`` and the special ids."""
    return gemma3.load_vocab()


@pytest.fixture(scope="module")
def tok(vocab):
    return SentencePieceTokenizer.from_vocab(vocab)


@pytest.fixture(scope="module")
def hf():
    """``transformers``' tokenizer built from the GGUF file (15-40 s)."""
    transformers = pytest.importorskip("transformers")
    path = gemma3.gguf_path()
    return transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def hf_ids(hf, text, parse_special=True):
    """``transformers``' ids (``<bos>`` first, as the GGUF's ``add_bos_token`` asks)."""
    return hf(text, split_special_tokens=not parse_special).input_ids


HARD = {
    "empty": "",
    "one space": " ",
    "leading spaces": "   a",
    "trailing space": "a ",
    "multiple spaces": "a  b   c    d",
    "31 spaces": " " * 31,
    "tab": "\t",
    "tabs": "\t\ta\t",
    "newline": "\n",
    "newlines": "\n\n\n\n\n",
    "40 newlines": "\n" * 40,
    "crlf": "a\r\nb\r\n",
    "cr": "\r",
    "nul": "x\x00y",
    "control chars": "\x01\x02\x07\x1b[0m\x7f",
    "heart fe0f": "❤️",
    "heart": "❤",
    "family zwj": "👨‍👩‍👧",
    "skin tone": "👍🏽 ok",
    "japanese": "日本語のテキスト",
    "chinese": "中文，标点。",
    "korean": "한국어",
    "combining accent": "e\u0301 café cafe\u0301",
    "polytonic greek": "Ὀδυσσεύς ἄνδρα μοι ἔννεπε, μοῦσα",
    "arabic": "مرحبا بالعالم",
    "hebrew points": "שָׁלוֹם",
    "bos": "<bos>",
    "bos then text": "<bos>hi",
    "chat turn": "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "specials": "<eos><pad><unk><mask>",
    "unused": "<unused0>",
    "byte piece text": "<0x41>",
    "html user-defined": "<table><tr><td>1</td></tr></table>",
    "multimodal": "[multimodal]",
    "image": "<start_of_image>",
    "almost a control": "<bo",
    "spaced control": "< bos >",
    "byte fallback": "\U0010ffff\U000e0001",
    "bom": "\ufeffBOM",
    "zero widths": "\u200b\u200c\u200d",
    "compatibility": "ﬁ ① Ａ",
    "math letters": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "code": "    def f(x):\n        return x  \n",
    "long word": "x" * 500,
    "repeats": "ab" * 300,
    "emoji run": "🙂" * 50,
    "punctuation": "Hello, world! It's 3.14159 — “quotes” and ‘apostrophes’…",
}
# texts where a control token is read as one token (parse_special=True), so decode drops it
SPELLS_CONTROL = {"bos", "bos then text", "chat turn", "specials", "unused"}


def test_vocabulary(tok, vocab):
    assert len(tok) == len(vocab["tokens"]) == 262_144
    assert repr(tok) == "SentencePieceTokenizer(262144 pieces, byte fallback)"
    assert (tok.bos_id, tok.eos_id, tok.unk_id, tok.pad_id) == (2, 1, 3, 0)
    # the GGUF spells the whitespace pieces with spaces; they are respelled with ▁
    assert vocab["tokens"][SPACES_2] == "  " and tok.vocab[SPACES_2] == "▁▁"


def test_odyssey_equals_transformers(tok, hf):
    """Every line of the *Odyssey* (one paragraph a line), both ways of reading specials."""
    lines = ODYSSEY.read_text(encoding="utf-8").split("\n")
    assert len(lines) > 2000
    start = time.perf_counter()
    ours = [tok.encode(line) for line in lines]
    seconds = time.perf_counter() - start
    theirs = hf(lines).input_ids
    mismatched = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not mismatched, f"lines {mismatched[:5]} differ (of {len(mismatched)})"
    assert sum(map(len, ours)) == pytest.approx(145_000, rel=0.05)
    assert seconds < 60, f"the Odyssey took {seconds:.1f} s (about 3 s expected)"


@pytest.mark.parametrize("parse_special", [True, False])
@pytest.mark.parametrize("name", list(HARD))
def test_hard_cases_equal_transformers(tok, hf, name, parse_special):
    text = HARD[name]
    ids = tok.encode(text, parse_special=parse_special)
    assert ids == hf_ids(hf, text, parse_special)
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True)
    assert tok.decode(ids, keep_special=True) == hf.decode(ids)


def test_long_space_runs_differ_from_transformers(tok, hf):
    """The divergence: more than 31 spaces. SentencePiece (and llama.cpp) take the longest
    user-defined piece first, 31 spaces, then 9; transformers' merges make 16 + 24. Same text."""
    text = " " * 40 + "x"
    ours, theirs = tok.encode(text), hf_ids(hf, text)
    assert ours == [BOS, SPACES_31, SPACES_9, tok.vocab.index("x")]
    assert theirs == [BOS, SPACES_16, SPACES_24, tok.vocab.index("x")]
    assert tok.decode(ours) == tok.decode(theirs) == hf.decode(theirs, skip_special_tokens=True)
    assert hf_ids(hf, " " * 31) == tok.encode(" " * 31) == [BOS, SPACES_31]  # up to 31: equal


@pytest.mark.parametrize("name", list(HARD))
def test_round_trip(tok, name):
    text = HARD[name]
    assert tok.decode(tok.encode(text, parse_special=False)) == text
    ids = tok.encode(text)
    if name in SPELLS_CONTROL:  # read as control tokens, which decode drops unless kept
        assert tok.decode(ids) != text
    else:
        assert tok.decode(ids) == text
    assert tok.decode(ids, keep_special=True) == "<bos>" + text


def test_pieces_and_special_parsing(tok):
    assert tok.pieces("<bos>hi", parse_special=False) == ["<", "bos", ">", "hi"]
    assert tok.pieces("<bos>hi") == ["<bos>", "hi"]
    assert tok.encode("<bos>hi")[:2] == [BOS, BOS]
    assert tok.pieces("  a\n\n") == ["▁▁", "a", "\n\n"]  # user-defined pieces, frozen
    assert tok.pieces("é\U0010ffff") == ["é", "<0xF4>", "<0x8F>", "<0xBF>", "<0xBF>"]
    assert tok.encode("") == [BOS] and tok.encode("", add_bos=False) == []
    assert tok.encode("Hello", add_bos=False) == tok.encode("Hello")[1:]


def test_space_symbol_decodes_as_space(tok):
    """A ▁ in the text is one symbol with a space, so it comes back as a space."""
    assert tok.encode("a\u2581b") == tok.encode("a b")
    assert tok.decode(tok.encode("a\u2581b")) == "a b"


def test_decode_takes_a_tensor_and_replaces_bad_bytes(tok):
    ids = tok.encode("café ❤️")
    assert tok.decode(torch.tensor(ids)) == "café ❤️"
    lone = tok.vocab.index("<0xC3>")  # the first byte of é, alone: not UTF-8
    assert tok.decode([lone, tok.vocab.index("a"), lone, lone]) == "\ufffda\ufffd\ufffd"


def test_long_line_is_fast(tok):
    """A heap keeps one long line O(n log n): the whole Odyssey as one line."""
    text = ODYSSEY.read_text(encoding="utf-8").replace("\n", " ")[:200_000]
    start = time.perf_counter()
    ids = tok.encode(text)
    assert time.perf_counter() - start < 30
    assert tok.decode(ids) == text


@given(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2581"), max_size=60)
)
def test_random_text(tok, hf, text):
    ids = tok.encode(text, parse_special=False)
    assert tok.decode(ids) == text
    assert ids == hf_ids(hf, text, parse_special=False)


# --- a small hand-made vocabulary: every rule on a case that can be checked by hand ---

BYTES = [f"<0x{b:02X}>" for b in range(256)]


def small(pieces, scores, types, **ids):
    return SentencePieceTokenizer(pieces, scores, types, **ids)


def test_highest_score_merges_first_and_ties_go_left():
    # "bc" (-1) beats "ab" (-2): a bc, then "abc"
    tok = small(
        ["<unk>", "a", "b", "c", "ab", "bc", "abc"], [0, 0, 0, 0, -2, -1, -3], [2] + [1] * 6
    )
    assert tok.pieces("abc") == ["abc"]
    assert tok.pieces("abcb") == ["abc", "b"]
    # a tie (both "aa"): the leftmost pair; "aaa" gives aa a, not a aa
    tok = small(["<unk>", "a", "aa"], [0, 0, -1], [2, 1, 1])
    assert tok.pieces("aaa") == ["aa", "a"]


def test_user_defined_pieces_are_frozen():
    # "<b>" is user-defined: never merged with its neighbours even though "x<b>" is a piece
    tok = small(["<unk>", "x", "<", "b", ">", "<b>", "x<b>"], [0] * 7, [2, 1, 1, 1, 1, 4, 1])
    assert tok.pieces("x<b>x") == ["x", "<b>", "x"]


def test_unused_pieces_are_resegmented():
    # "ab" is unused: made by a merge (so "abc" can follow), but never written out
    pieces = ["<unk>", "a", "b", "c", "ab", "abc"]
    tok = small(pieces, [0, 0, 0, 0, -1, -2], [2, 1, 1, 1, 5, 1])
    assert tok.pieces("abc") == ["abc"]
    assert tok.pieces("ab") == ["a", "b"]


def test_unknown_without_byte_pieces():
    tok = small(["<unk>", "a"], [0, 0], [2, 1])
    assert tok.encode("aéèa", add_bos=False) == [1, 0, 1]  # a run of unknowns is one <unk>
    assert tok.unk_id == 0 and repr(tok) == "SentencePieceTokenizer(2 pieces, no byte fallback)"


def test_byte_fallback_and_space_pieces():
    tok = small(["<unk>", "<s>", "  ", "a", *BYTES], [0] * 260, [2, 3, 4, 1, *[6] * 256], bos_id=1)
    assert tok.vocab[2] == "▁▁"
    assert tok.encode("  aé") == [1, 2, 3, 4 + 0xC3, 4 + 0xA9]
    assert tok.decode([1, 2, 3, 4 + 0xC3, 4 + 0xA9]) == "  aé"


# --- errors: each names the argument, what was expected and what came ---


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((["a", "b"], [0.0], [1, 1]), {}, ValueError, r"same length; got 2, 1 and 2"),
        (([], [], []), {}, ValueError, r"pieces must hold at least one piece"),
        (("ab", [0.0], [1]), {}, TypeError, r"pieces must be a list; got str"),
        ((["a", 1], [0, 0], [1, 1]), {}, TypeError, r"pieces\[1\] must be a str; got int 1"),
        ((["a", ""], [0, 0], [1, 1]), {}, ValueError, r"pieces\[1\] must not be empty"),
        ((["a", "a"], [0, 0], [1, 1]), {}, ValueError, r"distinct; 'a' is pieces\[0\] and "),
        ((["a"], ["x"], [1]), {}, TypeError, r"scores\[0\] must be a real number; got str"),
        ((["a"], [0], [7]), {}, ValueError, r"types\[0\] must be an integer in 1\.\.6; got 7"),
        ((["a"], [0], [1]), {"bos_id": 1}, ValueError, r"bos_id must be an integer in 0\.\.0"),
        ((["<0x00>"], [0], [6]), {}, ValueError, r"all 256 or none; missing <0x01>, <0x02>"),
        ((["<0xZZ>"], [0], [6]), {}, ValueError, r"pieces\[0\] is a byte piece .* got '<0xZZ>'"),
    ],
)
def test_constructor_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        SentencePieceTokenizer(*args, **kwargs)


def test_from_vocab_errors():
    with pytest.raises(TypeError, match=r"vocab must be a dict .*; got list"):
        SentencePieceTokenizer.from_vocab([])
    with pytest.raises(ValueError, match=r"it lacks 'scores', 'types' \(it has 'tokens'\)"):
        SentencePieceTokenizer.from_vocab({"tokens": ["a"]})


def test_encode_and_decode_errors(tok):
    with pytest.raises(TypeError, match=r"text must be a str; got bytes"):
        tok.encode(b"hi")
    with pytest.raises(ValueError, match=r"lone surrogate U\+D800 at position 1"):
        tok.encode("a\ud800")
    with pytest.raises(TypeError, match=r"add_bos must be a bool; got int 1"):
        tok.encode("a", 1)
    with pytest.raises(TypeError, match=r"parse_special must be a bool; got str 'no'"):
        tok.pieces("a", parse_special="no")
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.262143; got 262144 at position 1"):
        tok.decode([2, 262_144])
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.262143; got -1 at position 0"):
        tok.decode([-1])
    with pytest.raises(TypeError, match=r"ids must all be int token ids; got float 1\.0"):
        tok.decode([1.0])
    with pytest.raises(ValueError, match=r"ids must be 1-D, \(T,\); got shape \(1, 2\)"):
        tok.decode(torch.tensor([[2, 3]]))
    with pytest.raises(TypeError, match=r"keep_special must be a bool; got NoneType"):
        tok.decode([2], keep_special=None)


def test_missing_bos_and_unknown_errors():
    tok = small(["a"], [0], [1])
    with pytest.raises(ValueError, match=r"add_bos=True needs a bos_id; this tokenizer has none"):
        tok.encode("a")
    with pytest.raises(ValueError, match=r"text holds 'b', which is no piece, .* unknown piece"):
        tok.encode("ab", add_bos=False)
