"""Command output in README.md and docs/ comes from real runs (docs/outputs.py), and stale output fails here.

- every fenced block that shows a command (``$ …``) or bwstack's output (``bwstack: …``) is generated or marked
  ``not generated (WHY)`` (it needs a GPU host or Docker); nothing in between can be typed by hand;
- the README's profile table is rendered from profiles.yaml and current;
- the blocks whose commands read release wheels from the package index are regenerated and compared (``wheels``);
- a changed output makes the check fail (a page with one altered line).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.stack import ROOT

SCRIPT = ROOT / "docs" / "outputs.py"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[\w-]*$")


def _outputs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=1800,
                          check=False, cwd=ROOT)  # fmt: skip


def _command_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, the line before the block) of every fenced block that opens with a command (``$ …``) or
    with bwstack's own output (``bwstack: …``)."""
    lines = text.splitlines()
    out = []
    inside = False
    for number, line in enumerate(lines):
        if FENCE.match(line):
            if not inside and number + 1 < len(lines) and lines[number + 1].startswith(("$ ", "bwstack: ")):
                out.append((number + 1, lines[number - 1] if number else ""))
            inside = not inside
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_shown_command_is_generated_or_marked(page: Path) -> None:
    for line, before in _command_blocks(page.read_text(encoding="utf-8")):
        assert re.fullmatch(r"<!-- output: ([\w.-]+|not generated \([^)]+\)) -->", before), (
            f"{page.name}:{line}: a command's output typed by hand; add a recipe to docs/outputs.py and mark the "
            "block <!-- output: ID -->, or <!-- output: not generated (WHY) --> where it needs a GPU host or Docker"
        )


def test_the_readme_table_and_the_offline_outputs_are_current() -> None:
    done = _outputs("--check", "--no-wheels")
    assert done.returncode == 0, done.stdout + done.stderr
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<!-- profile-table:" in readme and "| `dsa-fi-sparse-fp8` | v0.5.23-cu130 |" in readme


def test_stale_output_fails_the_check(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    page.write_text(text.replace("| `dense-fi-bf16` | v0.5.23-cu130 |", "| `dense-fi-bf16` | v0.5.9-cu130 |"))
    done = _outputs("--check", "--no-wheels", str(page))
    assert done.returncode == 1
    assert "README.md: output is stale; run 'python docs/outputs.py'" in done.stderr
    assert "+| `dense-fi-bf16` | v0.5.23-cu130 |" in done.stdout


@pytest.mark.wheels
@pytest.mark.slow
def test_the_upgrade_page_is_what_the_commands_print() -> None:
    done = _outputs("--check", "docs/upgrade.md")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
