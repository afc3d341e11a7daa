"""Every dotted reference to a product module in the product's own text resolves (issue 33, item 4): a
``:mod:`` / ``:func:`` / ``:class:`` / ``:meth:`` / ``:data:`` / ``:attr:`` / ``:exc:`` role, or a
double-backquoted ``bwstack.x.y`` / ``healthchecks.x.y``, names a module that imports and an attribute it
has. A room that moves (``host.operate``, ``know.listing``, ``lock``, ``nogpu``) then cannot leave its old
name behind in a docstring or a comment.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from support.stack import ROOT

PRODUCT = [*sorted((ROOT / "src" / "bwstack").rglob("*.py")), *sorted((ROOT / "healthchecks").rglob("*.py"))]

ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?((?:bwstack|healthchecks)(?:\.\w+)+)`")
TICKED = re.compile(r"``((?:bwstack|healthchecks)(?:\.\w+)+)``")


def resolves(name: str) -> bool:
    """The longest importable module prefix of ``name``, then each remaining part as an attribute."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def broken(paths: list[Path], root: Path) -> list[str]:
    """``file:line: name`` of every reference that does not resolve."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in (*ROLE.finditer(line), *TICKED.finditer(line)):
                if not resolves(match.group(1)):
                    found.append(f"{path.relative_to(root).as_posix()}:{number}: {match.group(1)}")
    return found


def test_every_reference_to_a_product_module_resolves() -> None:
    assert broken(PRODUCT, ROOT) == []


def test_a_stale_reference_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "stale.py"
    planted.write_text(
        '"""See :mod:`bwstack.host.operate`, :func:`bwstack.know.listing.print_list`,\n'
        ':class:`bwstack.sweep.Judge` and ``bwstack.nogpu``; :mod:`bwstack.sweep.judge` is fine."""\n',
        encoding="utf-8",
    )
    assert broken([planted], tmp_path) == [
        "stale.py:1: bwstack.host.operate",
        "stale.py:1: bwstack.know.listing.print_list",
        "stale.py:2: bwstack.sweep.Judge",
        "stale.py:2: bwstack.nogpu",
    ]
