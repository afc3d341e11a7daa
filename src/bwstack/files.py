"""Files on the host, written so that nothing is ever lost or torn: one home for atomic writes and digests.

``atomic_write`` writes a temp file in the target's folder, fsyncs it and ``os.replace``s it into place, so a
reader (or a SIGKILL at any moment) sees either the old file or the new one. Reports, locks, snapshots,
caches and rendered files all go through it. ``sha256_file`` streams a file's digest (wheels, lock files,
downloaded shards).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and os.replace (never a torn file).

    The file keeps the mode of the one it replaces (new files: 0644); the folder is created if missing.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` for bytes (archives)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
