"""This stack's compose project on this host: the project (with a host-local override file), its containers
and their health as Docker reports it, and how long a start may take. Shared by ``up``
(:mod:`bwstack.ops.updown`) and the sweep; no policy of its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError, UserError
from bwstack.host.dockercompose import Project
from bwstack.stack.schema import Stack
from healthchecks import common

HOST_OVERRIDE_FILE = "compose.host.yaml"


def project_for(stack: Stack, compose_file: Path | None = None, env: dict[str, str] | None = None) -> Project:
    """The compose project of the stack; a host-local ``compose.host.yaml`` next to compose.yaml applies too
    (host adjustments such as dropping ``memlock: -1`` on engines that cannot grant it; never committed)."""
    main_file = compose_file or stack.compose_file
    host_file = main_file.parent / HOST_OVERRIDE_FILE
    return Project(
        files=(main_file, host_file) if host_file.is_file() else (main_file,),
        name=stack.settings.project,
        workdir=stack.root,
        env=env,
    )


def parse_duration(text: str) -> float:
    """Seconds in a compose duration such as ``45m``, ``30s``, ``1h30m`` or ``500ms``."""
    seconds = common.duration_seconds(text)
    if seconds is None:
        raise UserError(f"invalid duration {text!r} (examples: 30s, 45m, 1h30m)")
    return seconds


def stop_other_profiles(project: Project, keep: str) -> list[str]:
    """Remove the containers of every other profile (same GPUs, same port); return the services removed."""
    removed = []
    for row in project.containers():
        service = row.get("Service", "")
        if service and service != keep:
            project.run(
                ["rm", "--stop", "--force", service], profiles=["*"], capture=True, timeout=300, check=True
            )
            removed.append(service)
    return removed


def default_wait_seconds(stack: Stack) -> float:
    hc = stack.settings.healthcheck
    return parse_duration(hc.start_period) + (hc.retries + 1) * parse_duration(hc.interval) + 60


def container_id(project: Project, service: str) -> str | None:
    for row in project.containers():
        if row.get("Service") == service:
            return str(row.get("ID") or row.get("Id") or "") or None
    return None


def inspect(container: str) -> dict[str, Any]:
    result = subprocess.run(
        ["docker", "inspect", container], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise ExternalError(f"docker inspect {container} failed: {result.stderr.strip()[:200]}")
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data[0]


def health_reason(state: dict[str, Any]) -> str:
    """The healthcheck's last one-line verdict from a container's State."""
    health = state.get("Health") or {}
    for entry in reversed(health.get("Log") or []):
        lines = [ln for ln in str(entry.get("Output", "")).splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return ""
