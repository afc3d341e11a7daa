"""bwstack's own modules are imported at the top of a module (issue 22): a function-level import of a
``bwstack.*`` or ``healthchecks.*`` module is allowed only in ``src/bwstack/cli/``, whose commands import their
rooms lazily so that ``bwstack --help`` and small commands start fast. Heavy third-party libraries (torch,
huggingface_hub, jinja2, jsonschema, docker) may still be imported where they are used, for the same reason.
"""

from __future__ import annotations

import ast
import re

from support.stack import ROOT

LAZY_ALLOWED = ("src/bwstack/cli/",)
OWN = ("bwstack", "healthchecks")


def function_level_own_imports(source: str) -> list[int]:
    """Line numbers of imports of bwstack's own modules inside a function body."""
    found: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and child.level == 0:
                names = [child.module or ""]
            elif isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            else:
                names = []
            if in_function and any(name.split(".")[0] in OWN for name in names):
                found.append(child.lineno)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(source), False)
    return found


def test_own_modules_are_imported_at_the_top() -> None:
    problems = []
    for path in [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "healthchecks").rglob("*.py"))]:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(LAZY_ALLOWED):
            continue
        problems += [f"{rel}:{line}" for line in function_level_own_imports(path.read_text(encoding="utf-8"))]
    assert problems == []


def test_a_function_level_import_is_found() -> None:
    source = "import os\n\ndef f():\n    import json\n    from bwstack import launch\n    return launch\n"
    assert function_level_own_imports(source) == [5]


def test_in_image_scripts_import_healthchecks_after_their_path_bootstrap() -> None:
    """A script the image runs as ``python3 healthchecks/x.py`` makes its folder's parent importable first
    (``if not __package__: sys.path.insert(…)``); a ``healthchecks`` import above that line fails there."""
    late = []
    for path in sorted((ROOT / "healthchecks").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        bootstrap = source.find("if not __package__")
        if bootstrap >= 0 and re.search(r"^(from|import) healthchecks\b", source[:bootstrap], flags=re.M):
            late.append(path.name)
    assert late == []
