"""The model cache volume through a short-lived container, for an operator who cannot open its host path.

A named volume's data lives under Docker's root folder (``/var/lib/docker/volumes/…``, mode 0710 root), so a
non-root member of the ``docker`` group can start containers but cannot read or write the volume's folder.
``fetch`` and the model-state check (``up``, the sweep, ``doctor``) then do their cache work in a container
of the stack's serving image, as the serving user (uid 10001), with the volume mounted at ``HF_HOME`` (an
empty volume takes the image folder's owner there, so the server owns what the fetch writes), host networking
(the Hub or proxy this host reaches) and bwstack's own two packages mounted read-only
(:mod:`bwstack.host.cacheworker` runs there: stdlib and huggingface_hub only). The request, the HF token
included, goes in on stdin: never in argv, the environment or ``docker inspect``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack import errors
from bwstack.errors import AbandonedWork, ExternalError, UserError
from healthchecks import imagelayout

#: where bwstack's packages are mounted in the helper container (beside, never over, the image's own)
SOURCE_MOUNT = imagelayout.HOST_SOURCE
#: the host's variables the worker's Hub client reads (passed by name: docker reads the values from its env)
PASSED_ENV = (
    "HF_ENDPOINT",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "BWSTACK_FETCH_STALL_S",
)
#: the images the helper may run when the stack's own is not built: any bwstack serving image has python3,
#: huggingface_hub, the serving user and HF_HOME
FALLBACK_REPOSITORY = "bwstack/sglang"


def needs_container(root: Path, *, write: bool) -> bool:
    """True when this process cannot open a volume's host folder (read, or ``write``) itself."""
    mode = os.R_OK | os.X_OK | (os.W_OK if write else 0)
    try:
        return not os.access(root, mode)
    except OSError:
        return True


def _docker(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"docker {argv[0]} failed: {exc}") from None


def helper_image(preferred: str | None) -> str:
    """The image the helper runs: the stack's serving image when built here, else any bwstack one."""
    if preferred and _docker(["image", "inspect", "--format", "{{.Id}}", preferred], 60).returncode == 0:
        return preferred
    listed = _docker(["image", "ls", "--format", "{{.Repository}}:{{.Tag}}", FALLBACK_REPOSITORY], 60)
    for ref in listed.stdout.split():
        if not ref.endswith(":<none>"):
            return ref
    raise ExternalError(
        f"the model cache volume is open to root only and no serving image is built to reach it as uid "
        f"{imagelayout.UID}: run 'bwstack build' first (or set stack.model_cache_path to a folder you own)"
    )


def source_mounts() -> list[str]:
    """``docker run`` options mounting bwstack's two packages read-only at :data:`SOURCE_MOUNT` (beside the
    image's own packages; ``PYTHONPATH`` names it). Each package is found by a module of its own: a folder
    of the same name without ``__init__.py`` ahead on ``sys.path`` (``tests/healthchecks`` once ``tests/``
    is on it, as in benchmarks/) makes the package name a namespace with no ``__file__``."""
    mounts: list[str] = []
    for module in (errors, imagelayout):
        folder = Path(str(module.__file__)).resolve().parent
        mounts += ["-v", f"{folder}:{SOURCE_MOUNT}/{folder.name}:ro"]
    return mounts


def argv(volume: str, image: str) -> list[str]:
    """``docker run`` of the worker: the volume at HF_HOME, as the serving user, the request on stdin."""
    mounts = source_mounts()
    env: list[str] = []
    for name in PASSED_ENV:
        if name in os.environ:
            env += ["-e", name]
    return [
        "docker", "run", "--rm", "-i", "--network", "host", "--user", f"{imagelayout.UID}:{imagelayout.GID}",
        "-v", f"{volume}:{imagelayout.HF_HOME}", *mounts, "-e", f"PYTHONPATH={SOURCE_MOUNT}",
        "-e", "PYTHONDONTWRITEBYTECODE=1", *env, "--entrypoint", "python3", image,
        "-m", "bwstack.host.cacheworker",
    ]  # fmt: skip


def run(
    volume: str,
    image: str,
    request: dict[str, Any],
    *,
    echo: Callable[[str], object] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run one worker request; its ``say:`` lines go to ``echo``, its ``done:`` answer is returned, its
    ``error:`` line is raised (UserError or ExternalError, one line)."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        try:
            proc = subprocess.Popen(
                argv(volume, image), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
            )
        except OSError as exc:
            raise ExternalError(f"cannot run docker for the model cache volume {volume}: {exc}") from None
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request))
        proc.stdin.close()
        lines: list[str] = []
        try:
            _read(proc, lines, echo, timeout)
        except KeyboardInterrupt:  # docker run passes the signal on: the worker says what it left, then ends
            _read(proc, lines, echo, 60)
            if not any(line.startswith("error: ") for line in lines):
                raise AbandonedWork(f"interrupted; the helper on volume {volume} was stopped") from None
        errors.seek(0)
        stderr = errors.read()
    answer = [json.loads(line[6:]) for line in lines if line.startswith("done: ")]
    failure = [line[7:] for line in lines if line.startswith("error: ")]
    if failure:
        which, _, message = failure[0].partition(" ")
        raise (UserError if which == "user" else ExternalError)(message)
    if not answer or proc.returncode != 0:
        last = " ".join((stderr.strip().splitlines() or ["no output"])[-1].split())[:200]
        raise ExternalError(
            f"the model cache helper ({image} as uid {imagelayout.UID}, volume {volume}) failed "
            f"(exit {proc.returncode}): {last}"
        )
    found: dict[str, Any] = answer[0]
    return found


def _read(
    proc: subprocess.Popen[str], lines: list[str], echo: Callable[[str], object] | None, timeout: float | None
) -> None:
    """The worker's lines until it ends (``say:`` lines echoed as they come); killed past ``timeout``."""
    assert proc.stdout is not None
    timer = threading.Timer(timeout, proc.kill) if timeout else None
    if timer is not None:
        timer.start()
    try:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if line.startswith("say: ") and echo is not None:
                echo(line[5:])
            lines.append(line)
        proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
