"""The one integer check and the one number check of ``attnlib._checks``, and the sites that
use them: every integer argument accepts what ``check_int`` accepts (a Python or NumPy
integer, a 0-D int64 or int32 tensor) and refuses the rest (``bool`` first) with the same
message, ``"<name> must be <what>; got <type> <value>"``; likewise every real number.
"""

from __future__ import annotations

import math

import attnlib
import numpy as np
import pytest
import torch
from attnlib import LanguageModel, MultiHeadAttention, causal_mask
from attnlib._checks import check_int, check_real
from attnlib.decoding import SinkCache
from attnlib.display import print_weights
from attnlib.efficient import tiled_attention
from attnlib.paged import BlockPool
from attnlib.positions import sinusoidal_encoding
from hypothesis import given
from hypothesis import strategies as st

INTEGERS = [3, np.int64(3), np.int8(3), np.uint16(3), torch.tensor(3), torch.tensor(3).int()]
NOT_INTEGERS = [
    (True, "bool True"),
    (np.bool_(True), r"bool np\.True_"),
    (3.0, "float 3.0"),
    ("3", "str '3'"),
    (None, "NoneType None"),
    (torch.tensor([3]), r"Tensor tensor\(\[3\]\)"),
    (torch.tensor(3.0), r"Tensor tensor\(3\.\)"),
    (torch.tensor(3, dtype=torch.uint8), r"Tensor tensor\(3, dtype=torch\.uint8\)"),
]


@pytest.mark.parametrize("n", INTEGERS, ids=repr)
def test_check_int_takes_python_numpy_and_0d_index_integers(n):
    value = check_int("n", n, low=1)
    assert value == 3 and type(value) is int


@pytest.mark.parametrize(("n", "got"), NOT_INTEGERS, ids=repr)
def test_check_int_refuses_the_rest_naming_what_came(n, got):
    with pytest.raises(TypeError, match=rf"^n must be a positive integer; got {got}$"):
        check_int("n", n, low=1)


@pytest.mark.parametrize(
    ("kwargs", "n", "message"),
    [
        ({"low": 1}, 0, "a positive integer; got 0"),
        ({"low": 0}, -1, "an integer >= 0; got -1"),
        ({"low": 2, "high": 5}, 6, "an integer in 2..5; got 6"),
        ({"low": 2, "high": 5}, np.int64(1), "an integer in 2..5; got 1"),
        ({"high": 5, "what": "at most 5"}, 7, "at most 5; got 7"),
    ],
)
def test_check_int_range_and_its_words(kwargs, n, message):
    with pytest.raises(ValueError, match=rf"^n must be {message}$"):
        check_int("n", n, **kwargs)


def test_check_int_without_bounds_takes_any_integer():
    assert check_int("n", -(10**30)) == -(10**30)
    with pytest.raises(TypeError, match=r"^n must be an integer; got float 1\.5$"):
        check_int("n", 1.5)


@given(st.integers(-(2**63), 2**63 - 1))
def test_check_int_is_the_identity_on_integers(i):
    assert check_int("n", i) == check_int("n", np.int64(i)) == check_int("n", torch.tensor(i)) == i


@pytest.mark.parametrize(
    "x", [2.5, 2, np.float32(2.5), np.float64(2.5), np.int64(2), torch.tensor(2.5)], ids=repr
)
def test_check_real_takes_real_numbers_as_float(x):
    value = check_real("x", x)
    assert value == float(x) and type(value) is float


@pytest.mark.parametrize(
    ("x", "got"),
    [
        (True, "bool True"),
        (np.bool_(False), r"bool np\.False_"),
        ("2", "str '2'"),
        (1j, r"complex 1j"),
        (torch.tensor([2.5]), r"Tensor tensor\(\[2\.5000\]\)"),
        (None, "NoneType None"),
    ],
    ids=repr,
)
def test_check_real_refuses_the_rest(x, got):
    with pytest.raises(TypeError, match=rf"^x must be a real number; got {got}$"):
        check_real("x", x)


def test_check_real_values():
    above_one = ("a number > 1", lambda b: b > 1)
    assert check_real("base", 2, *above_one) == 2.0
    with pytest.raises(ValueError, match=r"^base must be a number > 1; got 1$"):
        check_real("base", 1, *above_one)
    with pytest.raises(ValueError, match=r"^base must be a number > 1; got nan$"):
        check_real("base", math.nan, *above_one)  # NaN fails every comparison
    with pytest.raises(ValueError, match=r"^base must be finite; got inf$"):
        check_real("base", math.inf, *above_one)
    with pytest.raises(ValueError, match=r"^x must be finite; got -inf$"):
        check_real("x", np.float32(-math.inf))


# Integer arguments across the package: each call takes the value as its one argument.
E, H = 12, 4
INTEGER_SITES = {
    "MultiHeadAttention(num_heads)": ("num_heads", lambda n: MultiHeadAttention(E, n)),
    "causal_mask(L)": ("L", lambda n: causal_mask(n)),
    "sinusoidal_encoding(length)": ("length", lambda n: sinusoidal_encoding(n, 8)),
    "tiled_attention(block_size)": (
        "block_size",
        lambda n: tiled_attention(*torch.randn(3, 5, 4).unbind(0), block_size=n),
    ),
    "SinkCache(sinks)": ("sinks", lambda n: SinkCache(8, sinks=n)),
    "BlockPool(num_blocks)": ("num_blocks", lambda n: BlockPool(n, 4)),
    "BlockPool.retain(block)": ("block", lambda n: _pool_with_blocks(4).retain(n)),
    "print_weights(digits)": (
        "digits",
        lambda n: print_weights(torch.eye(2), ["a", "b"], digits=n),
    ),
    "LanguageModel.generate(top_k)": (
        "top_k",
        lambda n: _tiny_lm().generate(torch.tensor([[1, 2]]), 2, top_k=n),
    ),
    "LanguageModel.generate(max_new_tokens)": (
        "max_new_tokens",
        lambda n: _tiny_lm().generate(torch.tensor([[1, 2]]), n, temperature=0),
    ),
}


def _pool_with_blocks(n: int) -> BlockPool:
    pool = BlockPool(n, 2)
    for _ in range(n):
        pool.allocate()
    return pool


def _tiny_lm() -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(20, E, H, 1, max_len=8).eval()


@pytest.mark.parametrize("site", INTEGER_SITES)
def test_every_integer_argument_takes_a_numpy_integer(site, capsys):
    _, call = INTEGER_SITES[site]
    call(np.int64(3))  # before: some sites refused NumPy integers, others took them


@pytest.mark.parametrize("site", INTEGER_SITES)
def test_every_integer_argument_refuses_a_bool_naming_it(site):
    name, call = INTEGER_SITES[site]
    with pytest.raises(TypeError, match=rf"^{name} must be .*; got bool True$"):
        call(True)
    with pytest.raises(TypeError, match=rf"^{name} must be .*; got float 3\.0$"):
        call(3.0)


def test_the_real_number_sites_share_the_message():
    lm = _tiny_lm()
    with pytest.raises(TypeError, match=r"^temperature must be .*; got bool True$"):
        lm.generate(torch.tensor([[1, 2]]), 2, temperature=True)
    with pytest.raises(ValueError, match=r"^temperature must be a finite number >= 0 .*; got inf"):
        lm.generate(torch.tensor([[1, 2]]), 2, temperature=math.inf)
    assert lm.generate(torch.tensor([[1, 2]]), 2, temperature=np.float32(0)).shape == (1, 4)
    q = torch.randn(2, 3, 4)
    with pytest.raises(TypeError, match=r"^scale must be a real number or None; got str '1'$"):
        attnlib.scaled_dot_product_attention(q, q, q, scale="1")
    torch.testing.assert_close(
        attnlib.scaled_dot_product_attention(q, q, q, scale=np.float64(0.5)),
        attnlib.scaled_dot_product_attention(q, q, q, scale=0.5),
    )
