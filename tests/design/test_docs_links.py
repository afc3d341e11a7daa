"""The README is a landing page: short, opening with the two commands, every link into docs/ resolving.

Every relative Markdown link of README.md and docs/*.md must name a file of the repository (and, with a
``#fragment``, a heading of that file), so moving manual text between pages cannot leave a dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.stack import ROOT

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _anchor(line.lstrip("#"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def dead_links(path: Path, root: Path = ROOT) -> list[str]:
    """``page: target: why`` for every relative link of ``path`` that names no file or no heading."""
    dead = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        where = path.relative_to(root)
        if not resolved.exists():
            dead.append(f"{where}: {target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
            dead.append(f"{where}: {target}: no such heading")
    return dead


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    assert dead_links(doc) == []


def test_a_dead_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope) [web](https://x.y/z)\n")
    assert dead_links(page, tmp_path) == [
        "page.md: missing.md: no such file",
        "page.md: there.md#nope: no such heading",
    ]


def test_the_readme_is_a_landing_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move manual text into docs/"
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[0:2] for line in first_block[:2]] == [["./dev", "demo"], ["./dev", "test"]]
