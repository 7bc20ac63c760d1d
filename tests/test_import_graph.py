"""attnlib's modules import each other without a cycle.

The graph is read from the source with :mod:`ast`, not from ``sys.modules``: every ``import``
statement counts, at the top of a module, inside a function (a lazy import) or under
``if TYPE_CHECKING:``, so a cycle hidden in a function body is found too. A module that
imports ``attnlib`` itself (or ``from attnlib import name``) depends on the package's
``__init__``, which imports every module: that is a cycle as well.
"""

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = "attnlib"
LIB = ROOT / "lib" / PACKAGE


def module_name(path: Path, package_dir: Path) -> str:
    package = package_dir.name
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def imports_of(path: Path, package_dir: Path) -> set[str]:
    """The modules of the package that the file at ``path`` imports, anywhere in it."""
    package = package_dir.name
    modules = {module_name(p, package_dir) for p in package_dir.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    found.add(alias.name if alias.name in modules else package)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from .x import y
                base = package if node.level == 1 else None
                if base is None:
                    continue
                target = f"{base}.{node.module}" if node.module else base
            elif node.module and node.module.split(".")[0] == package:
                target = node.module
            else:
                continue
            if target == package:  # from attnlib import x: a submodule, or a name of __init__
                for alias in node.names:
                    sub = f"{package}.{alias.name}"
                    found.add(sub if sub in modules else package)
            else:
                found.add(target)
    found.discard(module_name(path, package_dir))
    return found


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    return {
        module_name(p, package_dir): imports_of(p, package_dir)
        for p in sorted(package_dir.glob("*.py"))
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as ``[a, b, ..., a]``, or None (depth-first search, colouring nodes)."""
    state: dict[str, str] = {}  # "open" while on the stack, "done" after

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt, stack)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


def test_attnlib_import_graph_has_no_cycle():
    graph = import_graph(LIB)
    assert len(graph) >= 15 and "attnlib.embeddings" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_embeddings_does_not_import_where_vectors_come_from():
    """The GloVe modules build Embeddings; embeddings knows nothing of them."""
    graph = import_graph(LIB)
    assert graph["attnlib.embeddings"] == {"attnlib._checks", "attnlib._util", "attnlib.tokenizer"}
    assert "attnlib.embeddings" in graph["attnlib.glove"]
    assert "attnlib.embeddings" in graph["attnlib.glove_text"]


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        pytest.param(
            {"a.py": "from pkg.b import x\n", "b.py": "def f():\n    from pkg.a import y\n"},
            ["pkg.a", "pkg.b", "pkg.a"],
            id="inside-a-function",
        ),
        pytest.param(
            {
                "a.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.b import B\n",
                "b.py": "import pkg.a\n",
            },
            ["pkg.a", "pkg.b", "pkg.a"],
            id="type-checking",
        ),
        pytest.param(
            {"__init__.py": "from pkg.a import x\n", "a.py": "from pkg import other\n"},
            ["pkg", "pkg.a", "pkg"],
            id="through-init",
        ),
        pytest.param(
            {"__init__.py": "from . import a\n", "a.py": "from .b import x\n", "b.py": ""},
            None,
            id="relative-no-cycle",
        ),
        pytest.param(
            {"a.py": "from . import b\n", "b.py": "from .a import x\n"},
            ["pkg.a", "pkg.b", "pkg.a"],
            id="relative",
        ),
    ],
)
def test_the_cycle_finder_finds_cycles(tmp_path, files, cycle):
    package = tmp_path / "pkg"
    package.mkdir()
    for name, source in {"__init__.py": "", **files}.items():
        (package / name).write_text(source, encoding="utf-8")
    assert find_cycle(import_graph(package)) == cycle
