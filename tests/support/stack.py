"""Test helpers shared across test folders (imported as ``support.stack``; ``tests/`` is on sys.path)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root: the one definition every test imports
TESTS = ROOT / "tests"


def copy_stack(dest: Path) -> Path:
    """A scratch copy of what a stack needs (profiles.yaml, images/, templates/, Dockerfile, healthchecks/)."""
    for name in (
        "profiles.yaml",
        "Dockerfile",
        ".dockerignore",
        "compose.yaml",
        "profiles.cpu.yaml",
        "compose.cpu.yaml",
    ):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    for name in ("images", "templates", "healthchecks"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "wheelhouse"))
    return dest / "profiles.yaml"
