"""The declared floors are true: pyproject.toml asks for at least the versions whose features
attnlib and its packaging use.

A floor cannot be installed here (torch 2.5's CPU wheel is not on PyPI), so each feature with
the version that brought it is listed below, and a use of it in the source, or in
pyproject.toml, needs a floor at least that high. Checked by hand once (closing note of the
issue "Every reader's machine, for real"): ``pip wheel --no-build-isolation .`` fails with
setuptools 76.1.0 ("`project.license` must be valid exactly by one definition") and builds
with 77.0.3.
"""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCE = "\n".join(p.read_text() for p in sorted((ROOT / "lib" / "attnlib").glob("*.py")))

# (package, a regex of its feature in attnlib's source, the first version that has it)
FEATURES = [
    ("torch", r"enable_gqa=", "2.5"),  # F.scaled_dot_product_attention(..., enable_gqa=)
    ("torch", r"torch\.compiler\.is_compiling\(", "2.3"),
    ("torch", r"scale=", "2.1"),  # F.scaled_dot_product_attention(..., scale=)
]


def floor(name: str, requirements: list[str]) -> Version:
    for text in requirements:
        req = Requirement(text)
        if req.name == name:
            lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==")]
            assert lows, f"{name} has no lower bound in {text!r}"
            return max(lows)
    raise AssertionError(f"{name} is not declared")


def test_torch_floor_covers_every_feature_used():
    declared = floor("torch", PYPROJECT["project"]["dependencies"])
    for package, pattern, since in FEATURES:
        if re.search(pattern, SOURCE):
            assert declared >= Version(since), f"{pattern!r} needs {package}>={since}"
    assert declared >= Version("2.5")  # enable_gqa is used: the list above must find it
    assert re.search(FEATURES[0][1], SOURCE)


def test_setuptools_floor_reads_a_license_expression():
    """``license = "MIT"`` (a string, PEP 639) needs setuptools 77; a table does not."""
    declared = floor("setuptools", PYPROJECT["build-system"]["requires"])
    if isinstance(PYPROJECT["project"].get("license"), str):
        assert declared >= Version("77")


def test_requirements_in_agrees_with_pyproject():
    lines = (ROOT / "requirements.in").read_text().splitlines()
    requirements = [line.split("#")[0].strip() for line in lines]
    requirements = [r for r in requirements if r and not r.startswith("-")]
    assert floor("torch", requirements) == floor("torch", PYPROJECT["project"]["dependencies"])
