"""Whether this machine has what the Docker tests and benchmarks need: a reachable engine and Compose v2.

One answer for ``tests/conftest.py``'s ``docker_engine`` fixture and for ``benchmarks/_common.py`` (a benchmark
without an engine is reported as skipped, with this sentence as its reason). Imported as
``support.dockercheck`` (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import shutil
import subprocess


def docker_problem() -> str | None:
    """None when a Docker engine answers and Compose v2 is installed, else why not, in one line."""
    if shutil.which("docker") is None:
        return "docker CLI not found"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "docker info timed out"
    if info.returncode != 0:
        return "no Docker engine answers: " + " ".join(info.stderr.split())[:200]
    compose = subprocess.run(
        ["docker", "compose", "version", "--short"], capture_output=True, text=True, timeout=30, check=False
    )
    if compose.returncode != 0 or not compose.stdout.strip().lstrip("v").startswith("2"):
        return "Docker Compose v2 plugin not found"
    return None


def require_compose_cli() -> None:
    """Skip (fail in CI) unless the Docker CLI with the Compose v2 plugin is installed; no engine needed
    (``docker compose config`` reads files only)."""
    import os

    import pytest

    if (
        shutil.which("docker") is None
        or subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False, timeout=30
        ).returncode
    ):
        if os.environ.get("CI"):
            pytest.fail("the Docker CLI with the Compose v2 plugin is required in CI")
        pytest.skip("docker CLI with the compose plugin not installed")
