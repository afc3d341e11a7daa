"""The verdict of one profile: the events the sweep follows (log lines, health changes, healthcheck runs,
the exit) and the :class:`Judge` that turns them into a failure class as soon as the evidence is decisive.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bwstack.classify import probe_class
from bwstack.record.types import Health
from healthchecks import phases, signatures, startup, verdict

#: a fatal log signature waits this long for the root-cause line (the traceback follows the first crash line)
SETTLE_S = 5.0
#: after the process exited, how long the rest of the log stream may take to arrive
DRAIN_S = 3.0
#: this many consecutive healthcheck runs naming the same failure class decide (Docker's default retries)
CONFIRM_PROBES = 3
#: server log lines kept per profile (for the context around the match and the tail)
KEEP_LINES = 20000
CONTEXT_BEFORE = 5
CONTEXT_AFTER = 10
TAIL_LINES = 30
HEALTH_KEEP = 5
#: classes a log line may carry that are not a verdict while the server lives (SGLang's own /health timeout)


@dataclass(frozen=True)
class LogLine:
    """One line of the container's output (without its line end)."""

    text: str


@dataclass(frozen=True)
class LogEnd:
    """The log stream ended (the container stopped)."""


@dataclass(frozen=True)
class HealthChange:
    """Docker's ``health_status`` event: ``starting``, ``healthy`` or ``unhealthy``."""

    status: str


@dataclass(frozen=True)
class Probe:
    """One finished healthcheck run from the container's health log."""

    exit_code: int
    output: str
    at: str = ""

    @property
    def verdict_class(self) -> str | None:
        """``healthy``, or the class of ``unhealthy: <class>: …``; None for other output."""
        return probe_class(self.output)


@dataclass(frozen=True)
class Exited:
    """The container's process exited (Docker's ``die`` event)."""

    exit_code: int | None


Event = LogLine | LogEnd | HealthChange | Probe | Exited


@dataclass(frozen=True)
class Outcome:
    """The outcome of one profile: class, what decided it, a one-line reason."""

    cls: str
    decided_by: str  # healthcheck | log | exit | unhealthy | timeout
    reason: str


#: the serve wrapper's line when its fail-fast stopped the server (healthchecks/serve.py)


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Judge:
    """The verdict state machine of one profile: feed it events (with the time they arrived), poll it.

    Decisive: healthy (no fatal log line), a fatal log signature (after ``settle_s``, or at once when the
    process has exited and the log stream ended), the process exiting (after the log drained, at most
    ``drain_s``), Docker's ``unhealthy``, or the budget. Pure logic: no Docker, no clock of its own.
    """

    def __init__(
        self,
        timeout_s: float,
        *,
        now: float,
        settle_s: float = SETTLE_S,
        drain_s: float = DRAIN_S,
        confirm: int = CONFIRM_PROBES,
        keep_lines: int = KEEP_LINES,
    ) -> None:
        self.scanner = signatures.Scanner()
        self.startup = startup.StartupReader()  # what the server log's startup says about the backends
        self.phases = phases.PhaseReader()  # where the start is (clock: when each line arrived)
        self.lines: deque[tuple[int, str]] = deque(maxlen=keep_lines)
        self.line_count = 0
        self.probes: list[Probe] = []
        self.health: str | None = None
        self.exit_code: int | None = None
        self.oom_killed = False
        #: the serve wrapper stopped the server on this healthcheck class (its fail-fast line in the log)
        self.fail_fast: tuple[str, str] | None = None
        #: the verdict line of the serve wrapper's readiness probe (one full healthcheck: its scores)
        self.readiness: str | None = None
        self.exited = False
        self.log_ended = False
        self.healthy = False
        self.unhealthy = False
        self.timed_out = False
        self.timeout_s = timeout_s
        self.timeout_at = now + timeout_s
        self.settle_s = settle_s
        self.drain_s = drain_s
        self.confirm = max(1, confirm)
        self.settle_at: float | None = None
        self.decided_at: float | None = None

    # -- input --

    def feed(self, event: Event, now: float) -> None:
        """Take one event into account."""
        if isinstance(event, LogLine) and self.readiness is None:  # also after the verdict: it may come late
            self.readiness = verdict.parse_readiness(event.text)
        if self.decided_at is not None:
            return
        if isinstance(event, LogLine):
            self._line(event.text, now)
        elif isinstance(event, LogEnd):
            self.log_ended = True
        elif isinstance(event, HealthChange):
            self.health = event.status
            self.healthy = self.healthy or event.status == "healthy"
            self.unhealthy = self.unhealthy or event.status == "unhealthy"
        elif isinstance(event, Probe):
            self.probes.append(event)
        elif isinstance(event, Exited):
            self.exited = True
            self.exit_code = event.exit_code
            self._settle(now + self.drain_s)

    def add_probes(self, probes: Sequence[Probe]) -> None:
        """Health-log entries read after the fact (they decide nothing on their own)."""
        self.probes.extend(probes)

    def _line(self, text: str, now: float) -> None:
        had_fatal = self.fatal_log() is not None
        self.line_count += 1
        self.lines.append((self.line_count, text))
        self.scanner.feed(text.replace("\n", " ") + "\n")
        self.startup.feed(text)
        self.phases.feed(text, at=now)
        stopped = verdict.parse_stopped(text)
        if stopped and self.fail_fast is None:
            self.fail_fast = (stopped[0].cls, stopped[1])
        if not had_fatal and self.fatal_log() is not None:
            self._settle(now + self.settle_s)

    def _settle(self, at: float) -> None:
        self.settle_at = at if self.settle_at is None else min(self.settle_at, at)

    # -- state --

    def fatal_log(self) -> signatures.Match | None:
        """The log's root-cause match, unless it is one that is no verdict while the server lives (generic
        traceback evidence, SGLang's /health timeout)."""
        match = self.scanner.result(strong_only=True)
        if match is None or match.cls in signatures.NOT_FATAL_WHILE_ALIVE:
            return None
        return match

    def poll(self, now: float) -> bool:
        """True once the verdict is decided (and from then on)."""
        if self.decided_at is not None:
            return True
        fatal = self.fatal_log()
        done = (
            (self.healthy and fatal is None)
            or (self.exited and self.log_ended)
            or self.unhealthy
            or (self.settle_at is not None and now >= self.settle_at)
            or self.confirmed_probe() is not None
        )
        if not done and now >= self.timeout_at:
            self.timed_out = True
            done = True
        if done:
            self.decided_at = now
        return done

    def wake_at(self) -> float:
        """When :meth:`poll` may change its answer without a new event."""
        return self.timeout_at if self.settle_at is None else min(self.timeout_at, self.settle_at)

    # -- output --

    def first_fatal_probe(self) -> Probe | None:
        """The first probe after the last healthy one that named a failure class."""
        start = 0
        for index, probe in enumerate(self.probes):
            if probe.verdict_class == "healthy":
                start = index + 1
        for probe in self.probes[start:]:
            if probe.verdict_class not in (None, "healthy", "starting"):
                return probe
        return None

    def confirmed_probe(self) -> Probe | None:
        """The last ``confirm`` probes when they all name one failure class: an image without fail-fast keeps
        running after the healthcheck's verdict, and Docker ignores failures during the start period."""
        if len(self.probes) < self.confirm:
            return None
        recent = self.probes[-self.confirm :]
        classes = {probe.verdict_class for probe in recent}
        if len(classes) == 1 and not classes & {None, "healthy", "starting"}:
            return recent[0]
        return None

    def verdict(self) -> Outcome:
        """The class and what decided it (call after :meth:`poll` returned True)."""
        fatal = self.fatal_log()
        if self.fail_fast is not None and (fatal is None or fatal.cls == "crash"):
            # the wrapper stopped the server on the healthcheck's verdict: a generic crash logged while it
            # stopped (a scheduler's broken pipe) is the stop's consequence, not the cause
            return Outcome(self.fail_fast[0], "healthcheck", self.fail_fast[1])
        if fatal is not None:
            return Outcome(fatal.cls, "log", fatal.text)
        if self.healthy:
            healthy = [p for p in self.probes if p.verdict_class == "healthy"]
            return Outcome("healthy", "healthcheck", last_line(healthy[-1].output) if healthy else "healthy")
        probe = self.first_fatal_probe()
        if probe is not None:
            return Outcome(str(probe.verdict_class), "healthcheck", last_line(probe.output))
        weak = self.scanner.result()
        if weak is not None:
            return Outcome(weak.cls, "log", weak.text)
        if self.exited:
            if self.oom_killed:
                return Outcome(
                    "oom", "exit", f"the kernel OOM killer stopped the container (exit {self.exit_code})"
                )
            return Outcome(
                "crash", "exit", f"the server exited with status {self.exit_code} before any verdict"
            )
        last = last_line(self.probes[-1].output) if self.probes else "no healthcheck run yet"
        if self.unhealthy:
            return Outcome(
                "timeout", "unhealthy", f"Docker marked the container unhealthy while starting ({last})"
            )
        return Outcome(
            "timeout", "timeout", f"no verdict within {self.timeout_s:g} s (last healthcheck: {last})"
        )

    def log_evidence(self) -> dict[str, Any] | None:
        """The root-cause match with the lines around it, or None."""
        match = self.scanner.result()
        if match is None:
            return None
        low, high = match.line - CONTEXT_BEFORE, match.line + CONTEXT_AFTER
        context = [{"line": n, "text": t} for n, t in self.lines if low <= n <= high]
        return {**match.to_dict(), "source": match.signature.source, "context": context}

    def startup_evidence(self, requested: Mapping[str, str]) -> dict[str, Any] | None:
        """The backends the server log's startup states (value, line, flag or SGLang) and every
        ``backend_override`` of the request; None when the log has no startup record."""
        found = self.startup.result()
        if not found.found:
            return None
        return {**found.to_dict(), "overrides": startup.compare(found, requested, "profile")}

    def log_tail(self, count: int = TAIL_LINES) -> list[str]:
        return [text for _, text in list(self.lines)[-count:]]

    def health_evidence(self) -> Health:
        return {
            "status": self.health,
            "probes": len(self.probes),
            "last": [
                {"exit": p.exit_code, "output": last_line(p.output), "at": p.at}
                for p in self.probes[-HEALTH_KEEP:]
            ],
        }
