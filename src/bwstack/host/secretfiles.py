"""The stack's secret files on the host (``secrets/api_key``, ``secrets/hf_token``): made readable for the
serving user only.

Compose file secrets outside swarm are bind mounts that keep the host file's owner and mode (``uid``/``gid``/
``mode`` are ignored: docker/compose#12362, moby/moby#40046), so a 0600 file of the operator is unreadable for
the image's serving user (uid :data:`healthchecks.imagelayout.UID`). bwstack grants that one user read access
with a POSIX ACL entry (``user:10001:r--``; owner keeps read/write, group and others get nothing); as root
without ACL support it hands the file to that user instead. :func:`readable_by` judges a file for ``doctor``
as the kernel will.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from bwstack import launch
from bwstack.errors import UserError
from bwstack.host import enginekind
from bwstack.stack.schema import Stack
from healthchecks import common, imagelayout

#: the image's serving user (Dockerfile ``USER 10001:10001``; the k8s securityContext)

ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_UNDEFINED_ID = 0xFFFFFFFF
_READ = 4


@dataclass(frozen=True)
class AclEntry:
    tag: int
    perm: int
    id: int


def parse_acl(blob: bytes) -> list[AclEntry]:
    """The entries of a ``system.posix_acl_access`` value (Linux xattr format, version 2)."""
    if len(blob) < 4 or (len(blob) - 4) % 8 or struct.unpack_from("<I", blob)[0] != _ACL_VERSION:
        raise ValueError("not a POSIX ACL (version 2) xattr value")
    return [AclEntry(*struct.unpack_from("<HHI", blob, off)) for off in range(4, len(blob), 8)]


def build_acl(entries: list[AclEntry]) -> bytes:
    """The xattr value of ``entries`` (sorted as the kernel requires: by tag, then id)."""
    ordered = sorted(entries, key=lambda e: (e.tag, e.id))
    return struct.pack("<I", _ACL_VERSION) + b"".join(
        struct.pack("<HHI", e.tag, e.perm, e.id) for e in ordered
    )


def _acl_of(path: Path) -> list[AclEntry] | None:
    try:
        return parse_acl(os.getxattr(path, ACL_XATTR))
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise
    except ValueError:
        return None


def readable_by(path: Path, uid: int = imagelayout.UID, gid: int = imagelayout.GID) -> bool:
    """Whether ``uid`` (primary group ``gid``, no other groups) may read ``path``: mode bits and a POSIX
    access ACL, judged as the kernel does (owner, named user & mask, owning/named group & mask, other)."""
    info = path.stat()
    if uid == 0:
        return True
    acl = _acl_of(path)
    if acl is None:
        if info.st_uid == uid:
            return bool(info.st_mode & stat.S_IRUSR)
        if info.st_gid == gid:
            return bool(info.st_mode & stat.S_IRGRP)
        return bool(info.st_mode & stat.S_IROTH)
    mask = next((e.perm for e in acl if e.tag == _MASK), 7)
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IRUSR)
    named = [e for e in acl if e.tag == _USER and e.id == uid]
    if named:
        return bool(named[0].perm & mask & _READ)
    groups = [
        e for e in acl if (e.tag == _GROUP_OBJ and info.st_gid == gid) or (e.tag == _GROUP and e.id == gid)
    ]
    if groups:
        return any(e.perm & mask & _READ for e in groups)
    other = next((e.perm for e in acl if e.tag == _OTHER), 0)
    return bool(other & _READ)


def _grant_acl(path: Path, info: os.stat_result, uid: int) -> None:
    """Add ``user:UID:r--`` to the file's access ACL, keeping the owner's bits and dropping the group's and
    others' (a secret is for its owner and the serving user only)."""
    current = _acl_of(path) or []
    keep = [e for e in current if e.tag == _USER and e.id != uid]
    owner = (info.st_mode >> 6) & 7
    entries = [
        AclEntry(_USER_OBJ, owner, _UNDEFINED_ID),
        *keep,
        AclEntry(_USER, _READ, uid),
        AclEntry(_GROUP_OBJ, 0, _UNDEFINED_ID),
        AclEntry(_MASK, _READ, _UNDEFINED_ID),
        AclEntry(_OTHER, 0, _UNDEFINED_ID),
    ]
    os.setxattr(path, ACL_XATTR, build_acl(entries))


def grant_serving_user(path: Path, uid: int = imagelayout.UID) -> str | None:
    """Make ``path`` readable for the serving user only; a note saying what changed, None when it already was.
    ``uid``: the host uid the serving user runs as (uid 10001, or its mapped uid under rootless Docker or
    userns-remap: :mod:`bwstack.host.enginekind`).

    Raises UserError (one line, the file and the fix) when neither an ACL nor (as root) a change of owner is
    possible."""
    info = path.stat()
    if readable_by(path, uid, uid) and not info.st_mode & (stat.S_IRWXO):
        return None
    where = f"uid {uid}" if uid == imagelayout.UID else f"uid {uid}, uid {imagelayout.UID} in the container"
    try:
        _grant_acl(path, info, uid)
        return f"{path}: readable for the serving user ({where}) by an ACL entry, no one else"
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            raise UserError(
                f"cannot grant uid {imagelayout.UID} read access: {exc.strerror or exc}", file=path
            ) from None
    if os.geteuid() == 0:
        os.chown(path, uid, -1)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        return f"{path}: owned by the serving user ({where}), mode 0600 (no ACL support here)"
    raise UserError(
        f"the serving user (uid {imagelayout.UID}) cannot read it and this file system takes no POSIX ACL; "
        f"run `sudo chown {imagelayout.UID} {path}` (keep mode 0600) or put stack.secrets_dir on "
        "ext4/xfs/btrfs",
        file=path,
    )


def create_secret(path: Path) -> None:
    """An empty secret file, mode 0600 and readable for the serving user (see :func:`grant_serving_user`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    os.close(fd)
    grant_serving_user(path)


def check_regular(path: Path) -> None:
    """Refuse a secret path that is not a regular file (a FIFO would block every reader)."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise UserError("a secret must be a regular file", file=path)


@dataclass(frozen=True)
class SecretState:
    """One secret file as ``doctor`` judges it: ``state`` is ``missing``, ``not_regular``, ``unreadable``
    (the serving user cannot read it), ``empty``, ``open`` (others may read it) or ``ok``."""

    name: str
    path: Path
    state: str


def state_of(name: str, path: Path, uid: int = imagelayout.UID) -> SecretState:
    """The state of one secret file for the serving user as host ``uid`` (never its content beyond whether
    it is empty)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return SecretState(name, path, "missing")
    if not stat.S_ISREG(info.st_mode):
        return SecretState(name, path, "not_regular")
    if not readable_by(path, uid, uid if uid != imagelayout.UID else imagelayout.GID):
        return SecretState(name, path, "unreadable")
    if info.st_mode & stat.S_IRWXO:
        return SecretState(name, path, "open")
    try:
        with path.open("rb") as fh:
            empty = not fh.read(4096).strip()
    except OSError:
        empty = False
    return SecretState(name, path, "empty" if empty else "ok")


def ensure_secrets(
    stack: Stack, kind: enginekind.EngineKind | None = None, *, create: bool = True
) -> list[str]:
    """Make each secret file the stack mounts exist (empty, mode 0600; only with ``create``) and readable for
    the serving user only (:mod:`bwstack.host.secretfiles`), as the engine runs it (``kind``: SELinux labels,
    rootless or userns-remapped uids; detected when not given); one note per file created or changed."""
    notes: list[str] = []
    if not launch.stack_secrets(stack):
        return notes
    kind = kind or enginekind.detect()
    folder = (stack.root / stack.settings.secrets_dir).resolve()
    for name in launch.stack_secrets(stack):
        path = folder / name
        if not path.exists() and not create:
            continue
        if not path.exists():
            create_secret(path)
            notes.append(
                f"created empty secret file {path} (mode 0600, readable for the serving user uid "
                f"{imagelayout.UID} only); put your token there if needed"
            )
        check_regular(path)
        if name == "api_key":
            with contextlib.suppress(OSError):  # unreadable here: serve.py checks it in the container
                problem = common.api_key_problem(path.read_text(encoding="utf-8", errors="replace").strip())
                if problem is not None:
                    raise UserError(problem, file=path)
        changed = grant_serving_user(path, kind.serving_uid)
        if changed:
            notes.append(changed)
        if kind.relabel:
            labelled = enginekind.relabel(path)
            notes.append(labelled or f"{path}: SELinux is enforcing and chcon is missing: label it "
                         "container_file_t yourself")  # fmt: skip
    return notes


def api_key(stack: Stack) -> str | None:
    """The key the stack's services take (``stack.api_key`` on), read from the operator's secret file; None
    when the services take none (or the file is empty). Never logged."""
    if not stack.settings.api_key:
        return None
    return common.read_secret(str(stack.root / stack.settings.secrets_dir / "api_key"))
