"""No import cycle among the modules of src/bwstack: the module graph, read from the source with ``ast``.

Every ``import bwstack.x``, ``from bwstack import x`` and ``from bwstack.x import y`` is an edge, at module
level or inside a function alike (a function-local import is still a dependency, only a later one); imports
under ``if TYPE_CHECKING:`` are not (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.stack import ROOT

PACKAGE = "bwstack"
SRC = ROOT / "src" / PACKAGE


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` except those in the body of ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def edges_of(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The bwstack modules ``path`` imports (a package import counts as its ``__init__``)."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from bwstack import x` imports the module bwstack.x when there is one, else a name of bwstack
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for name in names:
            while name and name not in modules:  # `import bwstack.x.y` -> the deepest module that exists
                name = name.rpartition(".")[0]
            if name and name != this and name.split(".")[0] == PACKAGE:
                targets.add(name)
    return targets


def module_graph(root: Path) -> dict[str, set[str]]:
    files = sorted(root.rglob("*.py"))
    modules = {module_name(p, root) for p in files}
    return {module_name(p, root): edges_of(p, root, modules) for p in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``a -> b -> ... -> a``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        iters = [iter(sorted(graph[start]))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_no_import_cycle_among_bwstack_modules() -> None:
    cycle = find_cycle(module_graph(SRC))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    root.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        # the circle render -> k8s -> multihost -> render, once in render.render_outputs
        (
            {
                "render.py": "def f():\n    from bwstack import k8s\n",
                "k8s.py": "from bwstack import multihost\n",
                "multihost.py": "from bwstack import render\n",
            },
            ["bwstack.k8s", "bwstack.multihost", "bwstack.render", "bwstack.k8s"],
        ),
        (
            {"a.py": "from bwstack.b import x\n", "b.py": "import bwstack.a\n"},
            ["bwstack.a", "bwstack.b", "bwstack.a"],
        ),
        (
            {"a.py": "from . import b\n", "b.py": "from .a import y\n"},
            ["bwstack.a", "bwstack.b", "bwstack.a"],
        ),
        (
            {
                "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bwstack import b\n",
                "b.py": "from bwstack import a\n",
            },
            None,
        ),
        ({"a.py": "from bwstack import errors\n", "errors.py": "X = 1\n"}, None),
    ],
)
def test_find_cycle_sees_every_import_form(
    tmp_path: Path, files: dict[str, str], cycle: list[str] | None
) -> None:
    assert find_cycle(module_graph(_package(tmp_path, files))) == cycle
