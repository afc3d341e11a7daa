"""A thin wrapper over the Docker Compose CLI: the v2 plugin (``docker compose``), else ``docker-compose``.

Compose is always called with an argv list (never a shell) and with the project name and files explicit, so
bwstack acts on exactly the services it rendered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError


@dataclass(frozen=True)
class ComposeCli:
    """How to run compose on this host, and which version it is."""

    argv: tuple[str, ...]
    version: str

    @property
    def is_v2(self) -> bool:
        return self.version.split(".")[0] not in {"1", ""}


def _version_of(argv: Sequence[str]) -> str | None:
    try:
        out = subprocess.run(
            [*argv, "version", "--short"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    match = re.search(r"v?(\d+\.\d+\.\d+)", out.stdout)
    return match.group(1) if match else None


@cache
def find_compose() -> ComposeCli:
    """The compose CLI: the v2 plugin first, then a standalone ``docker-compose`` (v2, or v1 as fallback)."""
    docker = shutil.which("docker")
    if docker:
        version = _version_of([docker, "compose"])
        if version:
            return ComposeCli((docker, "compose"), version)
    standalone = shutil.which("docker-compose")
    if standalone:
        version = _version_of([standalone])
        if version:
            return ComposeCli((standalone,), version)
    raise ExternalError(
        "Docker Compose not found: install the Compose v2 plugin (docker compose) "
        "- https://docs.docker.com/compose/install/linux/"
    )


@dataclass(frozen=True)
class Project:
    """One compose project: its files, name and working directory."""

    files: tuple[Path, ...]
    name: str
    workdir: Path
    env: Mapping[str, str] | None = None

    def base_argv(self, profiles: Sequence[str] = ()) -> list[str]:
        cli = find_compose()
        argv = [*cli.argv, "--project-name", self.name, "--project-directory", str(self.workdir)]
        for file in self.files:
            argv += ["--file", str(file)]
        for profile in profiles:
            argv += ["--profile", profile]
        return argv

    def run(
        self,
        args: Sequence[str],
        *,
        profiles: Sequence[str] = (),
        capture: bool = False,
        timeout: float | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        argv = [*self.base_argv(profiles), *args]
        try:
            result = subprocess.run(
                argv,
                cwd=self.workdir,
                env=env,
                text=True,
                capture_output=capture,
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ExternalError(f"cannot run {argv[0]}: {exc}") from None
        except subprocess.TimeoutExpired:
            raise ExternalError(f"'{' '.join(args[:2])}' did not finish within {timeout:.0f} s") from None
        if check and result.returncode != 0:
            detail = (result.stderr or "").strip().splitlines()[-1:] if capture else []
            raise ExternalError(
                f"docker compose {' '.join(args[:1])} failed (exit {result.returncode})"
                + (f": {detail[0]}" if detail else "")
            )
        return result

    def containers(self, *, all_states: bool = True) -> list[dict[str, Any]]:
        """Containers of this project (any profile), as compose's JSON rows."""
        args = ["ps", "--format", "json"] + (["--all"] if all_states else [])
        result = self.run(args, profiles=["*"], capture=True, timeout=60)
        if result.returncode != 0:
            raise ExternalError(f"docker compose ps failed: {(result.stderr or '').strip()[:300]}")
        rows: list[dict[str, Any]] = []
        text = result.stdout.strip()
        if not text:
            return rows
        if text.startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return rows
