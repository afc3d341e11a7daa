"""A CPU stack's copy model (:mod:`bwstack.tiny.tinycopy`) made in the stack's own CPU serving image.

The copy model needs torch and transformers; the stack's CPU image holds exactly the closure it is served
with, so it is built there, in a short-lived container with no network, as this process's own uid and gid
(the folder it writes belongs to the operator who runs ``up``, ``fetch`` or the sweep, root or not), with
bwstack's two packages mounted read-only. No host venv, no wheel downloaded, nothing in another user's home.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack import launch
from bwstack.errors import ExternalError
from bwstack.host import cachevolume
from bwstack.host.dockerimage import image_exists
from bwstack.stack.schema import Stack

#: where the staging folder is mounted in the container
OUT_MOUNT = "/out"
TIMEOUT = 900.0
#: HOME and caches in the container, a tmpfs of its own (the image's belong to the serving user)
SCRATCH = "/scratch"


def argv(image: str, staging: Path, good: str, broken: str) -> list[str]:
    """``docker run`` of ``python3 -m bwstack.tiny.tinycopy``: ``good`` and ``broken`` into ``staging``."""
    uid, gid = os.getuid(), os.getgid()
    return [
        "docker", "run", "--rm", "--network", "none", "--user", f"{uid}:{gid}",
        "--tmpfs", f"{SCRATCH}:uid={uid},gid={gid},mode=0700",
        "-e", f"HOME={SCRATCH}", "-e", f"XDG_CACHE_HOME={SCRATCH}/cache", "-e", f"HF_HOME={SCRATCH}/hf",
        "-e", f"PYTHONPATH={cachevolume.SOURCE_MOUNT}", "-e", "PYTHONDONTWRITEBYTECODE=1",
        *cachevolume.source_mounts(), "-v", f"{staging.resolve()}:{OUT_MOUNT}",
        "--entrypoint", "python3", image, "-m", "bwstack.tiny.tinycopy",
        "--good", f"{OUT_MOUNT}/{good}", "--broken", f"{OUT_MOUNT}/{broken}",
    ]  # fmt: skip


def copy_writer(image: str, variant: str) -> Callable[[Path, Path], dict[str, Any]]:
    """What :func:`bwstack.tiny.ensure.ensure_for_stack` calls to write the copy pair: ``(good, broken)``,
    two folders in one staging folder, written by ``image`` (the stack's CPU image of ``variant``)."""

    def write(good: Path, broken: Path) -> dict[str, Any]:
        if good.parent != broken.parent:
            raise ValueError("the copy pair is written into one staging folder")
        if not image_exists(image):
            raise ExternalError(
                f"the tiny copy model is made in the stack's CPU image {image}, which is not built here: "
                f"run 'bwstack build --variant {variant}' first"
            )
        try:
            done = subprocess.run(argv(image, good.parent, good.name, broken.name), capture_output=True,
                                  text=True, timeout=TIMEOUT, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ExternalError(f"building the copy models in {image} failed: {exc}") from None
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:300]
            raise ExternalError(
                f"building the copy models in {image} failed (exit {done.returncode}): {tail}"
            )
        found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return found

    return write


def for_stack(stack: Stack) -> Callable[[Path, Path], dict[str, Any]]:
    """The copy writer of ``stack``: its CPU image (``stack.variant``'s serving image)."""
    variant = stack.settings.variant
    return copy_writer(launch.image_ref(stack, variant), variant)
