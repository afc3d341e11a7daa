"""Raw host facts for ``bwstack doctor``: run a few commands and reads with timeouts, judge nothing.

A :class:`HostProbe` answers five questions (run a command, read a file, size a filesystem, read the
memlock limit, count a directory's entries). :class:`SystemProbe` asks the real host; :class:`FixtureProbe`
answers from a recorded host folder (``tests/fixtures/doctor/<host>/host.toml``), so every judgement can be
tested on a machine without GPUs. A missing binary, a non-zero exit or a timeout is an answer, never an
exception.

Testing hook: when ``BWSTACK_DOCTOR_FIXTURE=<dir>`` is set, :func:`default_probe` returns a FixtureProbe of
that folder instead of probing the real host.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bwstack.errors import UserError

FIXTURE_ENV = "BWSTACK_DOCTOR_FIXTURE"
DEFAULT_TIMEOUT = 20.0


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``problem`` is set when it did not run to an exit status (not found, timeout)."""

    argv: tuple[str, ...]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.problem is None and self.returncode == 0

    def failure_text(self) -> str:
        """One line saying why the command gave no usable output."""
        if self.problem is not None:
            return f"{self.argv[0]}: {self.problem}"
        text = self.stderr.strip() or self.stdout.strip() or f"exit status {self.returncode}"
        return f"{self.argv[0]}: {' '.join(text.split())}"


@dataclass(frozen=True)
class FsStats:
    """Size and space available to unprivileged users of the filesystem holding a path, in bytes."""

    size_bytes: int
    free_bytes: int


class HostProbe(Protocol):
    """The questions doctor asks a host; ``None`` (or a CommandResult with a problem) means unknown."""

    def run(self, key: str, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CommandResult:
        """Run ``argv``; ``key`` names the command for recorded hosts."""
        ...

    def read_text(self, path: str) -> str | None:
        """The text of a file such as /proc/cmdline."""
        ...

    def fs_stats(self, path: str) -> FsStats | None:
        """Size and free space of the filesystem holding ``path``."""
        ...

    def memlock(self) -> str | None:
        """The soft memlock limit as ``ulimit -l`` prints it: ``unlimited`` or KiB."""
        ...

    def count_entries(self, path: str) -> int | None:
        """How many entries a directory has (e.g. /sys/kernel/iommu_groups)."""
        ...


class SystemProbe:
    """Probe the machine this process runs on."""

    def run(self, key: str, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CommandResult:
        """Run ``argv`` with a timeout and the C locale; never raises."""
        args = tuple(argv)
        if shutil.which(args[0]) is None:
            return CommandResult(args, problem="not found")
        env = {**os.environ, "LC_ALL": "C"}
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, check=False)
        except subprocess.TimeoutExpired:
            return CommandResult(args, problem=f"timed out after {timeout:g} s")
        except OSError as exc:
            return CommandResult(args, problem=exc.strerror or str(exc))
        return CommandResult(args, returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)

    def read_text(self, path: str) -> str | None:
        """Read a small text file; None when it cannot be read."""
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def fs_stats(self, path: str) -> FsStats | None:
        """statvfs of ``path``; None when it cannot be reached."""
        try:
            st = os.statvfs(path)
        except OSError:
            return None
        return FsStats(size_bytes=st.f_blocks * st.f_frsize, free_bytes=st.f_bavail * st.f_frsize)

    def memlock(self) -> str | None:
        """This process's soft RLIMIT_MEMLOCK in ``ulimit -l`` form."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft == resource.RLIM_INFINITY:
            return "unlimited"
        return str(soft // 1024)

    def count_entries(self, path: str) -> int | None:
        """Entries of a directory; None when it is missing or unreadable."""
        try:
            return len(os.listdir(path))
        except OSError:
            return None


class FixtureProbe:
    """Answer from a recorded host folder: ``host.toml`` names the recorded output file of each question.

    ``[commands.<key>]`` has ``stdout`` / ``stderr`` (file names in the folder), ``returncode`` (default 0),
    or ``missing = true`` (binary not found) or ``timeout = true``; a key not listed is a missing binary.
    ``[files]`` maps a host path to a recorded copy; ``df`` names a recorded ``df -B1`` output used for
    every filesystem question; ``memlock`` names a recorded ``ulimit -l``; ``[entries]`` maps a directory
    to its entry count.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        manifest = folder / "host.toml"
        try:
            self.manifest: dict[str, Any] = tomllib.loads(manifest.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"cannot read recorded host: {exc.strerror}", file=manifest) from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"malformed recorded host: {exc}", file=manifest) from None

    def _text(self, name: str | None) -> str:
        if not name:
            return ""
        path = self.folder / name
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read recorded output: {exc.strerror}", file=path) from None

    def run(self, key: str, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CommandResult:
        """The recorded result of command ``key``."""
        args = tuple(argv)
        entry = self.manifest.get("commands", {}).get(key)
        if entry is None or entry.get("missing"):
            return CommandResult(args, problem="not found")
        if entry.get("timeout"):
            return CommandResult(args, problem=f"timed out after {timeout:g} s")
        return CommandResult(
            args,
            returncode=int(entry.get("returncode", 0)),
            stdout=self._text(entry.get("stdout")),
            stderr=self._text(entry.get("stderr")),
        )

    def read_text(self, path: str) -> str | None:
        """The recorded copy of ``path``, if any."""
        name = self.manifest.get("files", {}).get(path)
        return None if name is None else self._text(name)

    def fs_stats(self, path: str) -> FsStats | None:
        """From the recorded ``df -B1``: the mount that is the longest prefix of ``path``."""
        name = self.manifest.get("df")
        if name is None:
            return None
        return df_lookup(self._text(name), path)

    def memlock(self) -> str | None:
        """The recorded ``ulimit -l``."""
        name = self.manifest.get("memlock")
        return None if name is None else self._text(name).strip()

    def count_entries(self, path: str) -> int | None:
        """The recorded entry count of ``path``."""
        value = self.manifest.get("entries", {}).get(path)
        return None if value is None else int(value)


def df_lookup(df_text: str, path: str) -> FsStats | None:
    """Parse ``df -B1`` output and return the row whose mount point holds ``path``."""
    best: tuple[int, FsStats] | None = None
    for line in df_text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 6 or not cols[1].isdigit() or not cols[3].isdigit():
            continue
        mount = cols[5]
        if not _under(path, mount):
            continue
        if best is None or len(mount) > best[0]:
            best = (len(mount), FsStats(size_bytes=int(cols[1]), free_bytes=int(cols[3])))
    return None if best is None else best[1]


def _under(path: str, mount: str) -> bool:
    if mount == "/":
        return path.startswith("/")
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def default_probe() -> HostProbe:
    """The probe doctor uses: the recorded host named by BWSTACK_DOCTOR_FIXTURE, else this host."""
    folder = os.environ.get(FIXTURE_ENV)
    if folder:
        return FixtureProbe(Path(folder))
    return SystemProbe()
