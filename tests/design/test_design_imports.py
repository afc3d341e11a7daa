"""docs/design.md's rooms table matches the code: every module of src/bwstack is in a room, and each room's
"may import" cell names exactly the bwstack rooms its modules import (read with ``ast``, as the cycle test).

A cell lists room names relative to ``bwstack`` (``model``, ``sweep`` for the whole package, ``rules.book``)
or a ``healthchecks.<module>``; ``everything`` allows all; anything else (``stdlib``, ``jinja2``, a dash) names
no bwstack module. Imports inside one room (a package's modules among themselves) need no cell, nor do imports of
the leaf rooms that design.md lists once on a line starting ``Leaf rooms`` (``errors``, ``files`` …), nor of
``bwstack`` itself (its ``__init__`` imports nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from support.importgraph import HEALTHCHECKS, PACKAGE, SRC, module_graph
from support.stack import ROOT

DESIGN = ROOT / "docs" / "design.md"


@dataclass
class Room:
    line: int
    cell: str
    modules: set[str] = field(default_factory=set)
    allowed: set[str] = field(default_factory=set)
    everything: bool = False


def _modules_at(path: str, modules: set[str]) -> set[str]:
    """The bwstack modules a path of the first column names (a folder: its whole package)."""
    rel = path.removeprefix(f"src/{PACKAGE}/").removesuffix("/").removesuffix(".py")
    if rel.endswith("__init__"):  # the package's own module, not its rooms
        return {".".join([PACKAGE, *rel.split("/")[:-1]])} & modules
    name = ".".join([PACKAGE, *rel.split("/")])
    return {m for m in modules if m == name or m.startswith(name + ".")}


def parse_rooms(text: str, modules: set[str]) -> list[Room]:
    """The rows of the "## Rooms" table whose first cell names files of src/bwstack."""
    rooms: list[Room] = []
    in_rooms = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            in_rooms = line.strip() == "## Rooms"
            continue
        if not in_rooms or not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        paths = re.findall(r"`([^`]+)`", cells[0])
        if not paths or not paths[0].startswith(f"src/{PACKAGE}/"):
            continue
        room = Room(line=number, cell=cells[-1])
        folder = ""
        for path in paths:
            if "/" in path.rstrip("/"):
                folder = path.rstrip("/").rpartition("/")[0] + "/"
            else:
                path = folder + path
            room.modules |= _modules_at(path, modules)
        for token in (t.strip(" `") for t in cells[-1].split(",")):
            if token == "everything":
                room.everything = True
            elif token.startswith("healthchecks."):
                room.allowed.add(token)
            elif _modules_at(token.replace(".", "/"), modules):
                room.allowed.add(f"{PACKAGE}.{token}")
        rooms.append(room)
    return rooms


def _covers(allowed: set[str], module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def leaf_rooms(text: str) -> set[str]:
    """The rooms every room may import, from design.md's line ``Leaf rooms …: `errors`, `files` …``."""
    line = next((x for x in text.splitlines() if x.startswith("Leaf rooms")), "")
    return {f"{PACKAGE}.{name}" for name in re.findall(r"`([^`]+)`", line)}


def design_problems(text: str, graph: dict[str, set[str]]) -> list[str]:
    modules = set(graph)
    rooms = parse_rooms(text, modules)
    leaves = leaf_rooms(text) | {PACKAGE}
    problems: list[str] = []
    placed = set().union(*(r.modules for r in rooms)) if rooms else set()
    problems += [f"{m}: in no room of docs/design.md" for m in sorted(modules - placed)]
    for room in rooms:
        if not room.modules:
            problems.append(f"design.md:{room.line}: names no module that exists")
        used = {t for m in room.modules for t in graph[m] if t not in room.modules and t not in leaves}
        if room.everything:
            continue
        for target in sorted(used):
            if not _covers(room.allowed, target):
                problems.append(f"design.md:{room.line}: imports {target}, not in its cell {room.cell!r}")
        for allowed in sorted(room.allowed):
            if not any(_covers({allowed}, t) for t in used):
                problems.append(
                    f"design.md:{room.line}: cell names {allowed}, which its modules do not import"
                )
    return problems


def test_design_rooms_match_the_imports() -> None:
    problems = design_problems(DESIGN.read_text(encoding="utf-8"), module_graph(SRC, (HEALTHCHECKS,)))
    assert not problems, "docs/design.md out of date:\n" + "\n".join(problems)


GRAPH = {
    "bwstack": set(),
    "bwstack.a": {"bwstack.b.x", "healthchecks.signatures", "bwstack", "bwstack.errors"},
    "bwstack.errors": set(),
    "bwstack.b": set(),
    "bwstack.b.x": {"bwstack.b"},
    "bwstack.c": {"bwstack.a"},
}
HEAD = "## Rooms\n\nLeaf rooms, any room may import them: `errors`.\n\n| path | what | may import |\n| --- | --- | --- |\n"


@pytest.mark.parametrize(
    ("rows", "problems"),
    [
        (
            "| `src/bwstack/a.py` | a | b, healthchecks.signatures |\n| `src/bwstack/b/` | b | - |\n"
            "| `src/bwstack/c.py` | c | everything |\n",
            [],
        ),
        (
            "| `src/bwstack/a.py` | a | b |\n| `src/bwstack/b/` | b | - |\n| `src/bwstack/c.py` | c | a |\n",
            ["design.md:7: imports healthchecks.signatures, not in its cell 'b'"],
        ),
        (
            "| `src/bwstack/a.py`, `c.py` | a | b, healthchecks.signatures, jinja2 |\n"
            "| `src/bwstack/b/` | b | a |\n",
            ["design.md:8: cell names bwstack.a, which its modules do not import"],
        ),
        (
            "| `src/bwstack/a.py` | a | b.x, healthchecks.signatures |\n| `src/bwstack/c.py` | c | a |\n",
            ["bwstack.b: in no room of docs/design.md", "bwstack.b.x: in no room of docs/design.md"],
        ),
    ],
)
def test_design_problems_are_found(rows: str, problems: list[str]) -> None:
    base = "| `src/bwstack/__init__.py`, `errors.py` | the package, errors | - |\n"
    assert design_problems(HEAD + rows + base, GRAPH) == problems
