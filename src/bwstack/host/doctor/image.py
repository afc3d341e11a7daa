"""``bwstack doctor --image VARIANT``: the built serving image checks itself, as the serving user, offline.

Runs ``healthchecks/selfcheck.py`` inside the variant's image with ``--network none --user 10001:10001`` and
the mounts Compose gives the service (the variant's JIT volume, the model cache, the secret files), so what it
finds is what the server will meet. ``bwstack build`` runs it after the build, ``bwstack up`` before starting
(without the import part, which the build already ran). Each failure is one line with its fix.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from bwstack import launch
from bwstack.errors import ExternalError
from bwstack.host import secretfiles
from bwstack.stack.schema import Stack
from healthchecks import imagelayout

SELFCHECK = f"{imagelayout.HC_DIR}/selfcheck.py"
TIMEOUT = 900


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"docker {args[0]} failed: {exc}") from None


def _volume(stack: Stack, short: str, *, create: bool) -> str | None:
    """The Compose volume ``<project>_<short>``; created with Compose's labels when missing and ``create``."""
    name = f"{stack.settings.project}_{short}"
    if _docker("volume", "inspect", name).returncode == 0:
        return name
    if not create:
        return None
    made = _docker(
        "volume", "create",
        "--label", f"com.docker.compose.project={stack.settings.project}",
        "--label", f"com.docker.compose.volume={short}",
        name,
    )  # fmt: skip
    if made.returncode != 0:
        raise ExternalError(f"docker volume create {name} failed: {made.stderr.strip()[:200]}")
    return name


def mounts(stack: Stack, variant: str) -> list[str]:
    """``-v`` arguments as Compose mounts them for a service of ``variant`` (:func:`launch.variant_mounts`):
    a host folder where one is set and exists; the JIT cache's volume, created as Compose would (the server
    writes there); the model cache's volume only where it exists (the self-check reads, never fills it)."""
    out = []
    for mount in launch.variant_mounts(stack, variant):
        if mount.host_folder is not None:
            folder = (stack.root / mount.host_folder).resolve()
            if folder.is_dir():
                out += ["-v", f"{folder}:{mount.target}"]
            continue
        volume = _volume(stack, mount.volume, create=mount.target == imagelayout.JIT_CACHE)
        if volume is not None:
            out += ["-v", f"{volume}:{mount.target}"]
    for name in launch.stack_secrets(stack):
        path = (stack.root / stack.settings.secrets_dir / name).resolve()
        if path.exists():
            out += ["-v", f"{path}:{imagelayout.SECRETS_DIR}/{name}:ro"]
    return out


def selfcheck_argv(stack: Stack, variant: str, *, imports: bool, secrets: bool = True) -> list[str]:
    argv = [
        "docker", "run", "--rm", "--network", "none",
        "--user", f"{imagelayout.UID}:{imagelayout.GID}",
        "--entrypoint", "python3",
        *mounts(stack, variant),
        launch.image_ref(stack, variant), SELFCHECK,
    ]  # fmt: skip
    if not imports:
        argv.append("--no-imports")
    if not secrets:
        argv.append("--no-secrets")
    return argv


def run_image_check(
    stack: Stack,
    variant: str,
    *,
    imports: bool = True,
    secrets: bool = True,
    echo: Callable[[str], object] = print,
) -> int:
    """0 when the image passes its self-check, 1 with one line per problem, each with its fix."""
    stack.variant(variant)  # UserError for an unknown variant
    image = launch.image_ref(stack, variant)
    if _docker("image", "inspect", image).returncode != 0:
        echo(f"bwstack doctor: image {image} not found -- fix: bwstack build --variant {variant}")
        return 1
    if secrets:  # the secret files as up leaves them: readable for the serving user (none created here)
        for note in secretfiles.ensure_secrets(stack, create=False):
            echo(f"bwstack: {note}")
    done = _docker(*selfcheck_argv(stack, variant, imports=imports, secrets=secrets)[1:], timeout=TIMEOUT)
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("bwstack selfcheck:")]
    for line in lines:
        echo(line)
    if done.returncode != 0 and not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        echo(f"bwstack selfcheck: did not run in {image} ({tail}) -- fix: rebuild it (bwstack build)")
    return 0 if done.returncode == 0 else 1


def main_check(stack: Stack, variant: str, *, before_up: bool = False) -> int:
    """For build (everything) and up (no imports, which the build ran; no secrets, which up grants and
    serve.py refuses when unreadable; an image not built yet is left to Compose, which builds it)."""
    if before_up and _docker("image", "inspect", launch.image_ref(stack, variant)).returncode != 0:
        print(
            f"bwstack: {launch.image_ref(stack, variant)} is not built yet: no self-check before this start"
        )
        return 0
    status = run_image_check(
        stack,
        variant,
        imports=not before_up,
        secrets=not before_up,
        echo=lambda line: print(line, file=sys.stderr),
    )
    if status:
        print(
            f"bwstack: the image of {variant} failed its self-check (lines above); "
            f"re-run with 'bwstack doctor --image {variant}'",
            file=sys.stderr,
        )
    return status
