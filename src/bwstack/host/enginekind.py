"""What kind of Docker engine serves this host, as far as the secret files care: SELinux labels, rootless
mode, user-namespace remapping.

Compose mounts a secret file as a bind mount, so the serving user (uid 10001 in the container) reads the host
file through two gates that differ by host:

- **SELinux enforcing** with an engine that labels containers (``selinux`` in ``docker info``'s security
  options): the container runs as ``container_t`` and reads only files labelled ``container_file_t``. A file
  in a home folder is ``user_home_t``: unreadable. ``bwstack up`` relabels each secret file
  (``chcon -t container_file_t FILE``, what Compose's ``:z`` does for a volume; Compose file secrets take no
  ``:z``).
- **Rootless Docker** (``rootless``) or **userns-remap** (``userns``): uid 10001 in the container is another
  uid on the host: ``subuid start + 10001 - 1`` of the user running the rootless daemon (uid 0 in the
  container is that user), ``subuid start + 10001`` of the remap user (``dockremap`` by default) under
  userns-remap. An ACL for uid 10001 grants nothing there; ``bwstack up`` grants the mapped uid instead.

Security option names as the engine prints them (``name=seccomp,profile=builtin``, ``name=selinux``,
``name=rootless``, ``name=userns``, ``name=cgroupns``: moby ``daemon/info.go``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from healthchecks import imagelayout

SUBUID = Path("/etc/subuid")
DAEMON_JSON = Path("/etc/docker/daemon.json")
SELINUX_ENFORCE = Path("/sys/fs/selinux/enforce")
#: the user Docker's ``--userns-remap=default`` creates and maps
REMAP_DEFAULT_USER = "dockremap"


@dataclass(frozen=True)
class EngineKind:
    """The engine's security options that touch bind-mounted secrets, and the serving user's host uid."""

    options: frozenset[str]
    selinux_enforcing: bool
    serving_uid: int
    mapping: str  # "" (no user namespace), or how serving_uid was found

    @property
    def rootless(self) -> bool:
        return "rootless" in self.options

    @property
    def userns(self) -> bool:
        return "userns" in self.options

    @property
    def relabel(self) -> bool:
        """The secret files need the container_file_t label."""
        return self.selinux_enforcing and "selinux" in self.options

    def needs(self) -> list[str]:
        """What the secret files need on this engine, one line each (empty: nothing beyond uid 10001)."""
        out = []
        if self.relabel:
            out.append("SELinux is enforcing: the secret files need the container_file_t label (`chcon -t "
                       "container_file_t FILE`; `bwstack up` does it)")  # fmt: skip
        if self.rootless or self.userns:
            kind = "rootless Docker" if self.rootless else "userns-remap"
            out.append(f"{kind}: uid {imagelayout.UID} in the container is uid {self.serving_uid} on this "
                       f"host ({self.mapping}): the secret files must be readable for uid {self.serving_uid} "
                       "(`bwstack up` grants it by an ACL entry)")  # fmt: skip
        return out


def security_options(info: dict[str, object]) -> frozenset[str]:
    """The option names of ``docker info``'s ``SecurityOptions`` (``name=selinux`` -> ``selinux``)."""
    found = info.get("SecurityOptions")
    names = set()
    for item in found if isinstance(found, list) else []:
        for part in str(item).split(","):
            key, _, value = part.partition("=")
            if key.strip() == "name" and value.strip():
                names.add(value.strip())
    return frozenset(names)


def subuid_start(user: str, path: Path = SUBUID) -> int | None:
    """The first subordinate uid of ``user`` (``/etc/subuid``: ``user:start:count``), or None."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] == user and parts[1].isdigit():
            return int(parts[1])
    return None


def serving_uid(
    options: frozenset[str], *, daemon_user: str, remap_user: str, subuid: Path = SUBUID
) -> tuple[int, str]:
    """The host uid of the container's uid 10001, and how it was found."""
    if "rootless" in options:
        start = subuid_start(daemon_user, subuid)
        if start is not None:
            return start + imagelayout.UID - 1, f"{subuid} {daemon_user}:{start}"
    elif "userns" in options:
        start = subuid_start(remap_user, subuid)
        if start is not None:
            return start + imagelayout.UID, f"{subuid} {remap_user}:{start}"
    return imagelayout.UID, ""


def docker_info(docker: str = "docker", host: str | None = None) -> dict[str, object] | None:
    """``docker info`` as JSON, or None when no engine answers."""
    argv = [docker, *(["-H", host] if host else []), "info", "--format", "{{json .}}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        data = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remap_user_of(daemon_json: Path = DAEMON_JSON) -> str:
    """The remap user of ``--userns-remap`` as daemon.json names it (``default`` is ``dockremap``)."""
    try:
        data = json.loads(daemon_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return REMAP_DEFAULT_USER
    value = str(data.get("userns-remap") or "default") if isinstance(data, dict) else "default"
    user = value.split(":", 1)[0]
    return REMAP_DEFAULT_USER if user in ("", "default") else user


def detect(info: dict[str, object] | None = None, *, remap_user: str | None = None) -> EngineKind:
    """This host's engine kind (``info``: a ``docker info`` JSON already read; ``remap_user``: the userns
    remap user when not the one daemon.json names)."""
    info = docker_info() if info is None else info
    return kind_of(security_options(info or {}), remap_user=remap_user)


def kind_of(options: frozenset[str], *, remap_user: str | None = None) -> EngineKind:
    """The engine kind from its security option names (``doctor`` reads them from its own probe)."""
    remap_user = remap_user or remap_user_of()
    try:
        enforcing = SELINUX_ENFORCE.read_text(encoding="ascii").strip() == "1"
    except OSError:
        enforcing = False
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    uid, mapping = serving_uid(options, daemon_user=user, remap_user=remap_user)
    return EngineKind(options, enforcing, uid, mapping)


def relabel(path: Path) -> str | None:
    """``chcon -t container_file_t PATH``; a note, or None when it was not possible (no chcon)."""
    chcon = shutil.which("chcon")
    if chcon is None:
        return None
    done = subprocess.run([chcon, "-t", "container_file_t", str(path)], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    if done.returncode != 0:
        return f"{path}: chcon -t container_file_t failed: {' '.join(done.stderr.split())[:200]}"
    return f"{path}: labelled container_file_t (SELinux)"
