"""What git says about a checkout (HEAD's commit and time, local changes): one bounded ``git -C`` call.

Used where bwstack records its own provenance: the OCI labels of an image it builds
(:mod:`bwstack.build.dockerbuild`) and the
manifest of a sweep bundle (``bundle``). A missing git, a folder that is no checkout or a slow git is an
answer (None), never an exception.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

TIMEOUT_S = 10


def git(root: Path, *args: str) -> str | None:
    """The stripped stdout of ``git -C root ARGS``, or None when it did not run or exited non-zero."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None
