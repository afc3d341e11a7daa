"""The stand-in's root file system image ``bwstack/standin-rootfs:bookworm``, and the docker helpers it needs.

A Debian bookworm root file system with python3, procps, iproute2, passwd and ca-certificates, made by
``mmdebstrap … | docker import`` (built once, then reused). Without mmdebstrap: ``debian:bookworm-slim``
(pulled if absent) plus the same packages from apt. It is the base of the stand-in images
(:mod:`bwstack.build.standin_image`) and of the CPU variants (``dockerbuild.build``), so it imports neither.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from bwstack.errors import ExternalError
from bwstack.host.dockerimage import image_exists

Echo = Callable[[str], Any]

ROOTFS_IMAGE = "bwstack/standin-rootfs:bookworm"
LABEL = "io.bwstack.standin"
PACKAGES = ("python3", "procps", "iproute2", "passwd", "ca-certificates")
FALLBACK_BASE = "debian:bookworm-slim"

MMDEBSTRAP_HINT = (
    "install mmdebstrap (Debian/Ubuntu: 'sudo apt-get install mmdebstrap'; it needs root or unprivileged "
    "user namespaces) or make the image debian:bookworm-slim available to Docker, then run "
    "'bwstack standin build' again"
)


# --- root file system ---------------------------------------------------------------------------------------


def ensure_rootfs(*, echo: Echo = print) -> str:
    """``bwstack/standin-rootfs:bookworm``: mmdebstrap + docker import once, else bookworm-slim + apt."""
    if image_exists(ROOTFS_IMAGE):
        return ROOTFS_IMAGE
    problems: list[str] = []
    if shutil.which("mmdebstrap") is not None:
        echo(f"stand-in: building {ROOTFS_IMAGE} with mmdebstrap (Debian bookworm; about 30 s, once)")
        started = time.monotonic()
        try:
            _mmdebstrap_import(echo)
            echo(f"stand-in: {ROOTFS_IMAGE} ready ({time.monotonic() - started:.0f} s)")
            return ROOTFS_IMAGE
        except ExternalError as exc:
            problems.append(str(exc))
    else:
        problems.append("mmdebstrap is not installed")
    try:
        _rootfs_from_slim(echo)
    except ExternalError as exc:
        problems.append(str(exc))
        raise ExternalError(
            f"cannot build {ROOTFS_IMAGE}: {'; '.join(problems)}; {MMDEBSTRAP_HINT}"
        ) from None
    return ROOTFS_IMAGE


def _mmdebstrap_import(echo: Echo) -> None:
    make = [
        "mmdebstrap",
        "--variant=apt",
        f"--include={','.join(PACKAGES)}",
        "bookworm",
        "-",
    ]
    load = [
        "docker",
        "import",
        "--change",
        'CMD ["/bin/bash"]',
        "--change",
        "ENV LANG=C.UTF-8",
        "--change",
        f'LABEL {LABEL}="rootfs"',
        "--message",
        "bwstack stand-in rootfs (mmdebstrap bookworm)",
        "-",
        ROOTFS_IMAGE,
    ]
    producer = subprocess.Popen(make, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert producer.stdout is not None and producer.stderr is not None
    progress = threading.Thread(target=_forward, args=(producer.stderr, echo, "I: "), daemon=True)
    progress.start()
    consumer = subprocess.run(load, stdin=producer.stdout, capture_output=True, text=True, check=False)
    producer.stdout.close()
    made = producer.wait()
    progress.join(timeout=5)
    if made != 0 or consumer.returncode != 0:
        if consumer.returncode == 0:
            subprocess.run(["docker", "image", "rm", "-f", ROOTFS_IMAGE], capture_output=True, check=False)
        detail = (
            consumer.stderr.strip()[-300:] if consumer.returncode != 0 else f"mmdebstrap exit status {made}"
        )
        raise ExternalError(f"mmdebstrap | docker import failed: {' '.join(detail.split())}")


def _rootfs_from_slim(echo: Echo) -> None:
    if not image_exists(FALLBACK_BASE):
        echo(f"stand-in: pulling {FALLBACK_BASE}")
        pulled = subprocess.run(
            ["docker", "pull", FALLBACK_BASE], capture_output=True, text=True, check=False
        )
        if pulled.returncode != 0:
            reason = " ".join((pulled.stderr or pulled.stdout).split())[-200:]
            raise ExternalError(f"docker pull {FALLBACK_BASE} failed: {reason}")
    echo(f"stand-in: building {ROOTFS_IMAGE} from {FALLBACK_BASE} with apt")
    dockerfile = (
        f"FROM {FALLBACK_BASE}\n"
        "RUN apt-get update \\\n"
        f" && apt-get install -y --no-install-recommends {' '.join(PACKAGES)} \\\n"
        " && rm -rf /var/lib/apt/lists/*\n"
        f'LABEL {LABEL}="rootfs"\n'
    )
    with tempfile.TemporaryDirectory(prefix="bwstack-rootfs-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(dockerfile, encoding="utf-8")
        run_logged(
            ["docker", "build", "--tag", ROOTFS_IMAGE, tmp], echo, what=f"docker build of {ROOTFS_IMAGE}"
        )


# --- docker helpers -----------------------------------------------------------------------------------------


def _legacy_builder_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DOCKER_BUILDKIT"] = "0"
    return env


def run_logged(argv: list[str], echo: Echo, *, what: str) -> None:
    """Run a docker command, echoing its step lines; ExternalError with its tail when it fails."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_legacy_builder_env()
    )
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        tail = [*tail[-20:], line.rstrip()]
        if line.startswith("Step "):
            echo(f"  {line.rstrip()}")
    if process.wait() != 0:
        raise ExternalError(f"{what} failed: {' | '.join(t for t in tail[-5:] if t)}")


def _forward(stream: IO[bytes], echo: Echo, prefix: str) -> None:
    for raw in stream:
        line = raw.decode("utf-8", errors="replace").rstrip()
        if line.startswith(prefix):
            echo(f"  {line}")
