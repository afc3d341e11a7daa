"""``bwstack variant new`` writes a variant the project's own first-contact policy accepts once committed.

A scratch copy of the repository (its tracked files as they are on disk) becomes a git repository; ``variant new``
writes ``images/v0.5.17-cu130/`` from the real 0.5.17 wheel, the variant is committed there, and the project's
first-contact policy tests (tests/stack/test_first_contact.py) run in that copy, over every variant it holds.
The same tests fail on the variant with its flashinfer-cubin pin taken out (what ``variant new`` wrote before).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.stack import ROOT

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

POLICY_TESTS = "tests/stack/test_first_contact.py"
NAME = "v0.5.17-cu130"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=bwstack-test", "-c", "user.email=test@bwstack.invalid", *args],
        cwd=repo, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def _scratch_repo(dest: Path) -> Path:
    """The repository's tracked files, as on disk, committed into a fresh git repository at ``dest``."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "scratch copy")
    return dest


def _policy(repo: Path, *select: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", POLICY_TESTS, *select],
        cwd=repo, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_a_variant_new_writes_passes_the_first_contact_policy(tmp_path: Path) -> None:
    repo = _scratch_repo(tmp_path / "repo")
    made = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "variant", "new", NAME, "--sglang", "0.5.17", "--from", "v0.5.23-cu130"],
        cwd=repo, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # the 0.5.17 wheel pins flashinfer_python[cu13]==0.6.15.post1 and no flashinfer-cubin (its METADATA)
    assert "python.flashinfer-cubin: 0.7.2 -> 0.6.15.post1" in made.stdout
    _git(repo, "add", f"images/{NAME}")
    _git(repo, "commit", "-q", "-m", f"variant new {NAME}")
    assert f"images/{NAME}/pins.toml" in _git(repo, "ls-files", f"images/{NAME}")

    done = _policy(repo)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\d+ passed", done.stdout) and "failed" not in done.stdout

    # the control: without the cubin pin (and its reason) the same policy test fails on this variant
    pins_path = repo / "images" / NAME / "pins.toml"
    text = pins_path.read_text(encoding="utf-8")
    stripped = "\n".join(line for line in text.splitlines() if not line.startswith("flashinfer-cubin ="))
    assert stripped != text
    pins_path.write_text(stripped + "\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "drop the cubin pin")
    broken = _policy(repo, "-k", "flashinfer_cubin")
    assert broken.returncode == 1, broken.stdout[-3000:]
    assert NAME in broken.stdout
