"""The test tree's own layout rules (issue 13, item 5), checked with ``ast`` over every module under tests/:

- the repository root is defined once, ``support.stack.ROOT`` (and ``TESTS`` beside it): no other module assigns a
  ``ROOT``/``REPO``-like name or climbs out of its folder with ``Path(__file__)...parents[...]`` (a ``sys.path``
  bootstrap of a script run directly is the one exception);
- a fixture lives once: no module redefines a fixture that a conftest.py defines, and no fixture name is defined
  in two modules (a fixture several modules need goes into the conftest.py above them).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping

from support.stack import TESTS

HOME = "support/stack.py"
ROOT_NAME = re.compile(r"^(ROOT|REPO|REPO_ROOT|REPOSITORY|PROJECT_ROOT|[A-Z_]*_ROOT)$")


def _is_fixture(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            return True
    return False


def _climbs_from_file(node: ast.AST) -> bool:
    """``Path(__file__)…parents[…]`` or ``….parent.parent``: a path derived from this file, outside its folder."""
    text = ast.unparse(node)
    return "__file__" in text and (".parents[" in text or ".parent.parent" in text)


def _bootstraps(tree: ast.Module) -> set[int]:
    """ids of the nodes inside ``sys.path.insert(...)``/``sys.path.append(...)`` calls."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.path.insert", "sys.path.append"):
            inside.update(id(child) for child in ast.walk(node))
    return inside


def root_problems(path: str, source: str) -> Iterator[str]:
    if path == HOME:
        return
    tree = ast.parse(source)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        for target in targets:
            if (
                isinstance(target, ast.Name)
                and ROOT_NAME.match(target.id)
                and not (isinstance(value, ast.Constant) and isinstance(value.value, str))
            ):
                yield f"{path}:{node.lineno}: assigns {target.id}; import ROOT from support.stack"
    bootstrap = _bootstraps(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript | ast.Attribute)
            and id(node) not in bootstrap
            and _climbs_from_file(node)
            and not _climbs_from_file(node.value)
        ):
            yield f"{path}:{node.lineno}: {ast.unparse(node)}; use ROOT or TESTS from support.stack"


def fixture_problems(sources: Mapping[str, str]) -> Iterator[str]:
    in_conftest: dict[str, list[str]] = defaultdict(list)
    in_modules: dict[str, list[str]] = defaultdict(list)
    for path, source in sorted(sources.items()):
        for node in ast.parse(source).body:
            if _is_fixture(node):
                where = f"{path}:{node.lineno}"
                name = node.name  # type: ignore[attr-defined]
                (in_conftest if path.endswith("conftest.py") else in_modules)[name].append(where)
    for name, places in sorted(in_conftest.items()):
        if len(places) > 1:
            yield f"fixture {name!r} is defined in {len(places)} conftest.py files: {', '.join(places)}"
    for name, places in sorted(in_modules.items()):
        if name in in_conftest:
            yield f"fixture {name!r} of {in_conftest[name][0]} is redefined at {', '.join(places)}"
        elif len(places) > 1:
            yield f"fixture {name!r} is defined in {len(places)} modules: {', '.join(places)}; move it to a conftest.py"


def _test_sources() -> dict[str, str]:
    return {
        path.relative_to(TESTS).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(TESTS.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def test_the_repository_root_is_defined_once() -> None:
    sources = _test_sources()
    assert HOME in sources and "ROOT = " in sources[HOME]
    problems = [problem for path, source in sources.items() for problem in root_problems(path, source)]
    assert problems == [], "\n".join(problems)


def test_each_fixture_is_defined_once() -> None:
    problems = list(fixture_problems(_test_sources()))
    assert problems == [], "\n".join(problems)


def test_the_checks_see_the_old_layout() -> None:
    """What the tree looked like before: each of these is reported, so the two tests above can fail."""
    old = 'ROOT = Path(__file__).resolve().parents[2]\nPROFILES = ROOT / "profiles.yaml"\n'
    assert list(root_problems("unit/test_pins.py", old)) == [
        "unit/test_pins.py:1: assigns ROOT; import ROOT from support.stack",
        "unit/test_pins.py:1: Path(__file__).resolve().parents[2]; use ROOT or TESTS from support.stack",
    ]
    inline = 'def f():\n    return Path(__file__).resolve().parents[1] / "fixtures"\n'
    assert len(list(root_problems("unit/test_x.py", inline))) == 1
    bootstrap = "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))\n"
    assert list(root_problems("standin/record_real.py", bootstrap)) == []
    assert list(root_problems("fetch/test_fetch.py", 'REPO = "bwtest/tiny-glm"\n')) == []

    fixture = "@pytest.fixture({})\ndef {}(stack_copy):\n    return stack_copy\n"
    sources = {
        "conftest.py": fixture.format("", "stack"),
        "unit/test_render.py": fixture.format("", "stack"),
        "unit/test_k8s.py": fixture.format('scope="module"', "stack_file"),
        "unit/test_multihost.py": fixture.format('scope="module"', "stack_file"),
        "integration/conftest.py": fixture.format("", "standin_refs"),
        "testinfra/conftest.py": fixture.format("", "standin_refs"),
    }
    assert list(fixture_problems(sources)) == [
        "fixture 'standin_refs' is defined in 2 conftest.py files: integration/conftest.py:2, testinfra/conftest.py:2",
        "fixture 'stack' of conftest.py:2 is redefined at unit/test_render.py:2",
        "fixture 'stack_file' is defined in 2 modules: unit/test_k8s.py:2, unit/test_multihost.py:2; "
        "move it to a conftest.py",
    ]
