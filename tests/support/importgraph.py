"""The import graph of bwstack's own modules, read from the source with ``ast`` (for the cycle and design tests).

Every ``import bwstack.x``, ``from bwstack import x`` and ``from bwstack.x import y`` is an edge, at module
level or inside a function alike (a function-local import is still a dependency, only a later one); imports
under ``if TYPE_CHECKING:`` are not (they never run). ``extra`` roots (``healthchecks``) add their modules as
targets, so an edge into them is seen too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.stack import ROOT

PACKAGE = "bwstack"
SRC = ROOT / "src" / PACKAGE
HEALTHCHECKS = ROOT / "healthchecks"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``; those in the body of ``if TYPE_CHECKING:`` only with
    ``type_checking``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if not type_checking and isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def edges_of(path: Path, root: Path, modules: set[str], type_checking: bool = False) -> set[str]:
    """The modules of ``modules`` that ``path`` imports (a package import counts as its ``__init__``; so does
    importing a module of a package the importer is not in)."""
    roots = {name.split(".")[0] for name in modules}
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    targets: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in _imports(tree, type_checking):
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
            if name and name != this and name.split(".")[0] in roots:
                targets.add(name)
                # importing bwstack.a.b runs bwstack.a's __init__ first: an edge too, unless the importer lives
                # in that package (its own package is already importing)
                parent = name.rpartition(".")[0]
                while "." in parent and parent in modules:  # the roots import nothing
                    if not this.startswith(parent + ".") and parent != this:
                        targets.add(parent)
                    parent = parent.rpartition(".")[0]
    return targets


def module_graph(
    root: Path, extra: tuple[Path, ...] = (), *, type_checking: bool = False
) -> dict[str, set[str]]:
    """Module of ``root`` -> the modules of ``root`` and of ``extra`` it imports (with ``type_checking``, the
    imports under ``if TYPE_CHECKING:`` too: the floors hold for them as well)."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(p, r) for r in (root, *extra) for p in sorted(r.rglob("*.py"))}
    return {module_name(p, root): edges_of(p, root, modules, type_checking) for p in files}
