"""No import cycle among the modules of src/bwstack: the module graph, read from the source with ``ast``.

Every ``import bwstack.x``, ``from bwstack import x`` and ``from bwstack.x import y`` is an edge, at module
level or inside a function alike (a function-local import is still a dependency, only a later one); imports
under ``if TYPE_CHECKING:`` are not (they never run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.importgraph import PACKAGE, SRC, module_graph


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
