"""Files on the host, written so that nothing is ever lost or torn: one home for atomic writes and digests.

``atomic_write`` writes a temp file in the target's folder, fsyncs it and ``os.replace``s it into place, so a
reader (or a SIGKILL at any moment) sees either the old file or the new one. Reports, locks, snapshots,
caches and rendered files all go through it. ``sha256_file`` streams a file's digest (wheels, lock files,
downloaded shards). ``read_bounded`` and ``read_json`` are the bounded readers of files from outside (reports,
bundles, shipped evidence, bisect state): FIFOs refused, symlinks read within the bound, JSON within
:mod:`healthchecks.untrusted`'s limits; every refusal one line naming the file and the limit.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from healthchecks import untrusted


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and os.replace (never a torn file).

    The file keeps the mode of the one it replaces (new files: 0644); the folder is created if missing.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` for bytes (archives). A folder in the way of the file, or a file in the way of a
    folder on its path, is a UserError (one line), never a traceback."""
    if path.is_dir():
        raise UserError("cannot write a file here: a folder of that name exists", file=path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(
            "cannot write here: a part of the path exists and is not a folder", file=path
        ) from None
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


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes; OSError otherwise.

    Input files are opened without blocking and judged by ``fstat`` before a byte is read: a FIFO (which a
    plain ``open`` waits on forever), a device or a folder raises (``IsADirectoryError`` for a folder, else
    errno EINVAL), and a file over ``limit`` raises errno EFBIG unread; the message is in ``strerror``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device): refused", str(path))
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            piece = os.read(fd, min(1 << 20, limit + 1 - total))
            if not piece:
                break
            chunks.append(piece)
            total += len(piece)
        if total > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes: refused", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: Path, what: str, limits: untrusted.Limits = untrusted.DEFAULT) -> Any:
    """The JSON value of an untrusted file within ``limits`` (size read bounded, then depth, values, digits,
    duplicate keys, NaN/Infinity); UserError (``path: cannot read WHAT: the limit``, exit 2) otherwise.
    FileNotFoundError passes through for callers that word a missing file themselves."""
    try:
        data = read_bounded(path, limits.max_bytes)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    try:
        return untrusted.loads(data, limits)
    except untrusted.Refused as exc:
        raise UserError(f"cannot read {what}: {exc}", file=path) from None


def refuse_overwrite(out: Path, reads: Iterable[Path], option: str) -> None:
    """UserError when ``out`` is, or resolves to, a file or folder the command reads (the report, the stack
    file, an input bundle): an output never clobbers an input."""
    target = out.resolve()
    for path in reads:
        same = path.resolve() == target
        if not same and out.exists() and path.exists():
            same = os.path.samefile(out, path)
        if same:
            raise UserError(f"{option} names {path}, which this command reads; choose another path", file=out)


def need_folder(out: Path, option: str) -> None:
    """UserError when ``out`` exists and is not a folder (a folder output never replaces a file)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{option} names an existing file, not a folder; choose a folder", file=out)
