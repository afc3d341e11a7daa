"""Test helpers shared across test folders (imported as ``support.stack``; ``tests/`` is on sys.path)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository root: the one definition every test imports
TESTS = ROOT / "tests"


def copy_stack(dest: Path) -> Path:
    """A scratch copy of what a stack needs (profiles.yaml, images/, templates/, Dockerfile, healthchecks/, the
    committed calibration baselines.json)."""
    for name in (
        "profiles.yaml",
        "baselines.json",
        "Dockerfile",
        ".dockerignore",
        "compose.yaml",
        "profiles.cpu.yaml",
        "compose.cpu.yaml",
    ):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    for name in ("images", "templates", "healthchecks"):
        ignore = shutil.ignore_patterns("__pycache__", "wheelhouse", "override-wheels")
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest / "profiles.yaml"


def edit_yaml(path: Path, edit: Callable[[Any], None]) -> Path:
    """Apply ``edit`` to the YAML document at ``path`` (round trip: comments, order and quoting kept), so a test
    changes a setting by its keys instead of by the shipped file's exact text."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    data = yaml.load(path.read_text(encoding="utf-8"))
    edit(data)
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def run_cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m bwstack.cli ARGS`` in ``cwd`` with this interpreter (so this checkout's code runs)."""
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
