"""The deep healthcheck's reading of the server log, stdlib only: the incremental scan through the failure
catalog (its offset and matcher state kept in the run's state file, across a rotation), how long the log has
been still, and the verdicts the log gives: a fatal signature's class, a root cause that beats a generic HTTP
failure, and dead-or-still-starting while nothing answers on the port.
"""

from __future__ import annotations

import os
import time

from healthchecks import common, phases, signatures
from healthchecks.judging import Unhealthy
from healthchecks.probehttp import SECRETS, Reply, Run, snippet

LOG_SNIPPET = 200
LOG_CHUNK = 1 << 20


def scan_from(run: Run, path: str, offset: int, scanner: signatures.Scanner) -> int:
    """Feed complete lines from ``offset`` on; returns the new offset (at a line end)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        while run.deadline - time.monotonic() > 0.2:
            data = fh.read(LOG_CHUNK)
            if not data:
                break
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) < LOG_CHUNK:
                    break  # a partial last line: read it once it is complete
                cut = len(data)  # an over-long line: scan it in pieces
            scanner.feed(data[:cut].decode("utf-8", errors="replace"))
            offset += cut
            fh.seek(offset)
    return offset


def scan_log(run: Run) -> signatures.Scanner:
    """Continue the incremental scan of the server log (and its rotated predecessor); sticky per run."""
    saved = run.state.get("log")
    saved = saved if isinstance(saved, dict) and saved.get("path") == run.cfg.log else {}
    if saved and not signatures.state_is_current(saved.get("scanner")):
        saved = {}  # another catalog's scan (an upgraded image, a kept state file): read the log again
    scanner = signatures.Scanner.from_state(saved.get("scanner"))
    offset = int(saved.get("offset") or 0)
    inode = saved.get("inode")
    try:
        st = os.stat(run.cfg.log)
        if inode != st.st_ino or st.st_size < offset:
            rotated = run.cfg.log + ".1"
            if inode is not None and os.path.exists(rotated) and os.stat(rotated).st_ino == inode:
                scan_from(run, rotated, offset, scanner)
            offset, inode = 0, st.st_ino
        offset = scan_from(run, run.cfg.log, offset, scanner)
        if scanner.tail_missing():  # a traceback begun in an earlier run's chunk: its frames are in the file
            scanner.restore_tail(read_tail(run.cfg.log, offset))
    except FileNotFoundError:
        run.notes.append(f"no server log at {run.cfg.log}")
    except OSError as exc:
        run.notes.append(f"log unreadable ({exc.strerror})")
    run.state["log"] = {"path": run.cfg.log, "inode": inode, "offset": offset, "scanner": scanner.to_state()}
    return scanner


def read_tail(path: str, offset: int) -> str:
    """The log's last ``signatures.structure.TAIL`` bytes before ``offset``, from a line start."""
    start = max(0, offset - signatures.structure.TAIL)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(offset - start)
    if start:
        data = data[data.find(b"\n") + 1 :]
    return data.decode("utf-8", errors="replace")


def log_idle_seconds(run: Run) -> float | None:
    """Seconds since the server log last changed (its mtime), or None when there is no log."""
    try:
        return max(0.0, time.time() - os.stat(run.cfg.log).st_mtime)
    except OSError:
        return None


def around_match(match: signatures.Match) -> str:
    """The matched line, cut to a window that keeps the matching text."""
    text = " ".join(common.redact(match.text, SECRETS).split())
    found = match.signature.pattern.search(text)
    start = max(0, found.start() - 40) if found else 0
    window = text[start : start + LOG_SNIPPET]
    return ("..." if start else "") + window + ("..." if start + LOG_SNIPPET < len(text) else "")


def log_verdict(match: signatures.Match) -> Unhealthy:
    reason = f"server log: {around_match(match)}"
    if match.host_arch:
        reason += f" (host arch: {match.host_arch})"
    if match.also:
        reason += f" (also: {', '.join(match.also)})"
    if match.signature.fix:
        reason += f"; fix: {match.signature.fix}"
    return Unhealthy(match.cls, reason)


def root_cause_or(run: Run, fallback: Unhealthy, wait: bool = False) -> Unhealthy:
    """After an HTTP failure: a fatal log signature (maybe just written) beats the generic class.

    SGLang's health_timeout line only backs up a /health 503 (long prefills trip it on a working server).
    Generic traceback evidence counts only when nothing answers on the port (``fallback.gone``): a live
    server may log a handled exception. With nothing answering and no evidence, a log that reached the
    ready line, or that has not changed for --stall-after seconds, means the server is dead, not starting.
    """

    def usable(found: signatures.Match | None) -> bool:
        return found is not None and (
            found.cls not in signatures.NOT_FATAL_WHILE_ALIVE or fallback.cls == "health_timeout"
        )

    def match_of(scanner: signatures.Scanner) -> signatures.Match | None:
        return scanner.result(strong_only=not fallback.gone, answering=not fallback.gone)

    scanner = scan_log(run)
    match = match_of(scanner)
    if not usable(match) and wait:
        time.sleep(max(0.0, min(1.0, run.deadline - time.monotonic() - 0.5)))
        scanner = scan_log(run)
        match = match_of(scanner)
    if match is not None and usable(match):
        verdict = log_verdict(match)
        verdict.reason = f"{fallback.reason}; {verdict.reason}"
        return verdict
    if fallback.gone and fallback.cls == "starting":
        return dead_or_starting(run, scanner, fallback)
    return fallback


def dead_or_starting(run: Run, scanner: signatures.Scanner, fallback: Unhealthy) -> Unhealthy:
    """Nothing answers and the log names no cause: dead when the log says so, else still starting."""
    if scanner.serves:
        where = (
            f"reached SGLang's ready line (line {scanner.ready_line})"
            if scanner.ready
            else "shows it serving"
        )
        return Unhealthy(
            "crash",
            f"{fallback.reason.split(':')[0]}, but the server log {where}: the server process is gone",
        )
    idle = log_idle_seconds(run)
    if idle is not None and idle > run.cfg.stall_after:
        compilers = phases.compiling()
        if compilers:  # a first-boot JIT compile keeps the log quiet: still starting (first-contact-2 R4)
            return Unhealthy(
                "starting",
                f"{fallback.reason.split(':')[0]}; the server log has not changed for {idle:.0f}s, but a JIT "
                f"compile is running ({', '.join(compilers[:3])})",
                gone=True,
            )
        return Unhealthy(
            "crash",
            f"{fallback.reason.split(':')[0]} and the server log has not changed for {idle:.0f}s "
            f"(> --stall-after {run.cfg.stall_after:g}s): the server is not starting any more",
        )
    return fallback


def http_failure(run: Run, what: str, reply: Reply, rescan: bool = True) -> Unhealthy:
    detail = f"{what} answered {reply.status} {reply.reason}".rstrip()
    if reply.status in (401, 403):
        key_state = common.secret_status(run.cfg.api_key_file)
        return Unhealthy("warmup_failed", f"{detail}: API key missing or wrong (key file {key_state})")
    if reply.body:
        detail += f": {snippet(reply.body)!r}"
    if not rescan:
        return Unhealthy("warmup_failed", detail)
    return root_cause_or(run, Unhealthy("warmup_failed", detail), wait=reply.status >= 500)
