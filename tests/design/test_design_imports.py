"""docs/design.md's rooms table matches the code, and the house has floors: every module of src/bwstack is in
a room, every room has a floor, and a room imports only rooms on lower floors (read with ``ast``, as the
cycle test; imports inside functions and under ``if TYPE_CHECKING:`` count too).

The table's first cell names files (a folder: its whole package; a bare name continues the folder before it),
the last cell is the floor (an integer; a dash for files that are not Python modules of ``src/bwstack``).
``healthchecks/`` is a room of its own. Imports inside one room (a package's modules among themselves) are the
room's own business (the cycle test covers them), and so is ``bwstack`` itself (its ``__init__`` imports
nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from support.importgraph import HEALTHCHECKS, PACKAGE, SRC, module_graph
from support.stack import ROOT

DESIGN = ROOT / "docs" / "design.md"
IN_IMAGE = "healthchecks"


@dataclass
class Room:
    line: int
    floor: int
    modules: set[str] = field(default_factory=set)


def _modules_at(path: str, modules: set[str]) -> set[str]:
    """The modules a path of the first column names (a folder: its whole package)."""
    if path.rstrip("/") == IN_IMAGE:
        return {m for m in modules if m == IN_IMAGE or m.startswith(IN_IMAGE + ".")}
    rel = path.removeprefix(f"src/{PACKAGE}/").removesuffix("/").removesuffix(".py")
    if rel.endswith("__init__"):  # the package's own module, not its rooms
        return {".".join([PACKAGE, *rel.split("/")[:-1]])} & modules
    name = ".".join([PACKAGE, *rel.split("/")])
    return {m for m in modules if m == name or m.startswith(name + ".")}


def parse_rooms(text: str, modules: set[str]) -> tuple[list[Room], list[str]]:
    """The rows of the "## Rooms" table whose first cell names Python files, and the problems of the table."""
    rooms: list[Room] = []
    problems: list[str] = []
    in_rooms = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            in_rooms = line.strip() == "## Rooms"
            continue
        if not in_rooms or not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        paths = re.findall(r"`([^`]+)`", cells[0])
        if not paths or not (paths[0].startswith(f"src/{PACKAGE}/") or paths[0].rstrip("/") == IN_IMAGE):
            continue
        if not cells[-1].isdigit():
            problems.append(f"design.md:{number}: floor {cells[-1]!r} is not a whole number")
            continue
        room = Room(line=number, floor=int(cells[-1]))
        folder = ""
        for path in paths:
            if "/" in path.rstrip("/"):
                folder = path.rstrip("/").rpartition("/")[0] + "/"
            elif path.rstrip("/") != IN_IMAGE:
                path = folder + path
            room.modules |= _modules_at(path, modules)
        if not room.modules:
            problems.append(f"design.md:{number}: names no module that exists")
        rooms.append(room)
    return rooms, problems


def floor_problems(text: str, graph: dict[str, set[str]]) -> list[str]:
    """Modules in no room (or in two), and every import that does not point to a lower floor."""
    modules = set(graph) | {t for targets in graph.values() for t in targets}
    rooms, problems = parse_rooms(text, modules)
    room_of: dict[str, Room] = {}
    for room in rooms:
        for module in sorted(room.modules):
            if module in room_of:
                problems.append(f"{module}: in two rooms (design.md:{room_of[module].line} and :{room.line})")
            room_of[module] = room
    problems += [f"{m}: in no room of docs/design.md" for m in sorted(modules - set(room_of) - {PACKAGE})]
    for module in sorted(graph):
        source = room_of.get(module)
        if source is None:
            continue
        for target in sorted(graph[module]):
            dest = room_of.get(target)
            if dest is None or dest is source:
                continue
            if dest.floor >= source.floor:
                problems.append(
                    f"{module} (floor {source.floor}, design.md:{source.line}) imports {target} "
                    f"(floor {dest.floor}, design.md:{dest.line}): a room imports only lower floors"
                )
    return problems


def test_every_import_points_down_a_floor() -> None:
    graph = module_graph(SRC, (HEALTHCHECKS,), type_checking=True)
    problems = floor_problems(DESIGN.read_text(encoding="utf-8"), graph)
    assert not problems, "docs/design.md's floors do not hold:\n" + "\n".join(problems)


GRAPH = {
    "bwstack": set(),
    "bwstack.a": {"bwstack.b.x", "healthchecks.signatures", "bwstack"},
    "bwstack.b": set(),
    "bwstack.b.x": {"bwstack.b"},
    "bwstack.c": {"bwstack.a"},
    "healthchecks.signatures": set(),
}
HEAD = "## Rooms\n\n| path | what | floor |\n| --- | --- | --- |\n| `healthchecks/` | in-image | 0 |\n"


@pytest.mark.parametrize(
    ("rows", "problems"),
    [
        (
            "| `src/bwstack/a.py` | a | 2 |\n| `src/bwstack/b/` | b | 1 |\n| `src/bwstack/c.py` | c | 3 |\n",
            [],
        ),
        (  # an upward arrow, and an arrow along one floor
            "| `src/bwstack/a.py` | a | 1 |\n| `src/bwstack/b/` | b | 1 |\n| `src/bwstack/c.py` | c | 0 |\n",
            [
                "bwstack.a (floor 1, design.md:6) imports bwstack.b.x (floor 1, design.md:7): "
                "a room imports only lower floors",
                "bwstack.c (floor 0, design.md:8) imports bwstack.a (floor 1, design.md:6): "
                "a room imports only lower floors",
            ],
        ),
        (  # a folder's package imports its own rooms freely; a missing room is named
            "| `src/bwstack/a.py`, `c.py` | a, c | 2 |\n",
            ["bwstack.b: in no room of docs/design.md", "bwstack.b.x: in no room of docs/design.md"],
        ),
        (
            "| `src/bwstack/a.py` | a | two |\n| `src/bwstack/b/` | b | 1 |\n| `src/bwstack/c.py` | c | 3 |\n"
            "| `src/bwstack/zz.py` | none | 4 |\n",
            [
                "design.md:6: floor 'two' is not a whole number",
                "design.md:9: names no module that exists",
                "bwstack.a: in no room of docs/design.md",
            ],
        ),
    ],
)
def test_floor_problems_are_found(rows: str, problems: list[str]) -> None:
    assert floor_problems(HEAD + rows, GRAPH) == problems
