"""No module over 700 lines: every ``.py`` file under ``src/bwstack`` and ``healthchecks/`` stays small enough
to read whole. A module that grows past the limit is split at its seams (docs/design.md, rooms)."""

from __future__ import annotations

from pathlib import Path

from support.stack import ROOT

LIMIT = 700
TREES = ("src/bwstack", "healthchecks")


def line_count(path: Path) -> int:
    """Lines as ``wc -l`` counts them in a file that ends with a newline."""
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(root: Path, trees: tuple[str, ...], limit: int = LIMIT) -> dict[str, int]:
    """Every ``.py`` file under ``root``'s ``trees`` with more than ``limit`` lines: path -> line count."""
    found: dict[str, int] = {}
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            count = line_count(path)
            if count > limit:
                found[path.relative_to(root).as_posix()] = count
    return found


def test_no_module_is_over_the_limit() -> None:
    assert all((ROOT / tree).is_dir() for tree in TREES)
    over = oversized(ROOT, TREES)
    listing = ", ".join(f"{path} ({count} lines)" for path, count in sorted(over.items()))
    assert not over, f"modules over {LIMIT} lines, split them at their seams: {listing}"


def test_the_size_check_names_each_file_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "healthchecks" / "sub").mkdir(parents=True)
    (tmp_path / "healthchecks" / "at_limit.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    (tmp_path / "healthchecks" / "sub" / "over.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "healthchecks" / "notes.txt").write_text("x\n" * (LIMIT + 50), encoding="utf-8")
    assert oversized(tmp_path, ("healthchecks",)) == {"healthchecks/sub/over.py": LIMIT + 1}
