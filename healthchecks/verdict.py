"""The healthcheck's wire protocol, stdlib only: its one home.

- the verdict line the healthcheck prints last (``healthy: <summary>`` / ``unhealthy: <class>: <reason>``),
  which Docker keeps in ``docker inspect`` and the sweep, ``up`` and ``classify`` read back;
- the verdict record (``{"class", "line", "time"}``) the healthcheck keeps in its state file and the serve
  wrapper writes beside it when fail-fast stops the server;
- the serve wrapper's marker lines in the server log (``bwstack-serve: …``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
#: how much of a verdict line a record keeps (the state file is read on every probe)
RECORD_LINE_MAX = 500

#: the serve wrapper's lines in the server log start with this
MARKER = "bwstack-serve:"
STARTING = "starting"
CRASHED = "server crashed"
STOPPED = "server stopped by fail-fast"
READINESS = "readiness probe:"
_STOPPED_LINE = re.compile(re.escape(f"{STOPPED} (exit status ") + r"-?\d+\): (.*)$")


@dataclass(frozen=True)
class Verdict:
    """One verdict: ``cls`` ``healthy`` or a failure class of the catalog, and its one-line reason."""

    cls: str
    reason: str

    @property
    def healthy(self) -> bool:
        return self.cls == HEALTHY

    def line(self) -> str:
        """The line the healthcheck prints (whitespace folded to single spaces: one line, always)."""
        reason = " ".join(self.reason.split())
        return f"{HEALTHY}: {reason}" if self.healthy else f"{UNHEALTHY}: {self.cls}: {reason}"

    @classmethod
    def parse(cls, output: str) -> Verdict | None:
        """The verdict of an output's last non-empty line; None when that line is no verdict line."""
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        if not lines:
            return None
        last = lines[-1]
        if last == HEALTHY or last.startswith(f"{HEALTHY}:"):
            return cls(HEALTHY, last[len(HEALTHY) + 1 :].strip())
        if last.startswith(f"{UNHEALTHY}:"):
            name, _, reason = last[len(UNHEALTHY) + 1 :].strip().partition(":")
            if re.fullmatch(r"[a-z_]+", name.strip()):
                return cls(name.strip(), reason.strip())
        return None

    def record(self, now: float) -> dict[str, Any]:
        """The state-file record of this verdict."""
        return {"class": self.cls, "line": self.line()[:RECORD_LINE_MAX], "time": now}

    @classmethod
    def from_record(cls, record: Any) -> tuple[Verdict, float] | None:
        """(verdict, time) of a record; None when it is not one."""
        if not isinstance(record, dict):
            return None
        try:
            name, line, when = str(record["class"]), str(record["line"]), float(record.get("time", 0.0))
        except (KeyError, TypeError, ValueError):
            return None
        parsed = cls.parse(line)
        return (cls(name, parsed.reason if parsed is not None else line), when)


def read_json(path: str) -> Any:
    """A small JSON file's content; None when missing or malformed (a probe never fails on its state)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def state_verdict(state_path: str) -> tuple[Verdict, float] | None:
    """The healthcheck's last verdict as its state file records it."""
    data = read_json(state_path)
    return Verdict.from_record(data.get("verdict")) if isinstance(data, dict) else None


def write_record(path: str, verdict: Verdict, now: float) -> None:
    """Write a verdict record as its own file, atomically (best effort: never fails the caller)."""
    with contextlib.suppress(OSError):
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(verdict.record(now), fh)
        os.replace(path + ".tmp", path)


def marker(message: str) -> str:
    """A serve-wrapper line of the server log."""
    return f"{MARKER} {message}"


def readiness_message(verdict_line: str) -> str:
    """What the serve wrapper logs once its readiness probe (one full healthcheck) has a verdict."""
    return f"{READINESS} {verdict_line}"


def parse_readiness(text: str) -> str | None:
    """The verdict line of a serve-wrapper readiness line of the server log; None for any other line."""
    head = f"{MARKER} {READINESS} "
    at = text.find(head)
    if at < 0:
        return None
    return text[at + len(head) :].strip() or None


def stopped_message(exit_status: int, verdict_line: str) -> str:
    """What the serve wrapper logs after fail-fast stopped the server on ``verdict_line``."""
    return f"{STOPPED} (exit status {exit_status}): {verdict_line}"


def parse_stopped(text: str) -> tuple[Verdict, str] | None:
    """(the verdict, the stop line from its start) of a fail-fast stop line; None for any other line."""
    match = _STOPPED_LINE.search(text)
    found = Verdict.parse(match.group(1)) if match else None
    return (found, match.group(0)) if match and found is not None and not found.healthy else None
