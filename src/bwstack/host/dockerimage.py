"""Whether an image is in this machine's Docker engine: the one check every room that builds or runs an image
asks (the stand-in's rootfs and image builds, the sweep, the copy model made in the CPU image)."""

from __future__ import annotations

import subprocess

from bwstack.errors import ExternalError


def image_exists(ref: str) -> bool:
    """``docker image inspect REF`` succeeds; ExternalError when the CLI is missing or the engine hangs."""
    try:
        result = subprocess.run(
            ["docker", "image", "inspect", ref], capture_output=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise ExternalError("the docker CLI is not installed") from None
    except subprocess.TimeoutExpired:
        raise ExternalError("docker image inspect timed out; is the Docker engine running?") from None
    return result.returncode == 0
