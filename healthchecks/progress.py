"""Busy-and-stuck versus busy-and-progressing, told from SGLang's own Prometheus counters; stdlib only.

SGLang started with ``--enable-metrics`` (0.5.9 and 0.5.23 alike) serves ``GET /metrics`` from its main
process, which keeps answering while the scheduler is frozen. Requests in flight: the HTTP middleware's
``sglang:http_requests_active`` gauge (every endpoint but ``/metrics``; streamed answers count until their
last chunk). Progress: any change of the token counters (inter-token latency and time-to-first-token counts,
finished requests, the scheduler's processed tokens; not aborted requests: a client's disconnect counts
there). With requests in flight and no progress for the hang bound (``BWSTACK_HC_HANG_AFTER``, derived per
profile) the server is stuck (class ``hang``); an idle server is never stuck. The serve
wrapper samples every second and writes :func:`record` beside the healthcheck's state file; ``warmup.py``
reads it (:func:`hang_from_record`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from healthchecks.verdict import Verdict

IN_FLIGHT = "sglang:http_requests_active"
NOT_WORK = ('endpoint="/metrics"',)
#: counters that move whenever the server produces a token, a prefill or a finished request. Not
#: ``sglang:num_aborted_requests_total``: SGLang's main process counts a client's disconnect there
#: (``TokenizerManager.abort_request``) without the scheduler doing anything, so a client giving up on a
#: frozen server restarted the stall clock (seen on 0.5.23 in the CPU container: hang after 61 s, not 31 s)
PROGRESS = (
    "sglang:inter_token_latency_seconds_count",
    "sglang:time_to_first_token_seconds_count",
    "sglang:e2e_request_latency_seconds_count",
    "sglang:realtime_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total",
)
SUFFIX = ".progress"  # beside the healthcheck state file
#: a record older than this many sampling intervals is stale (the watcher is gone): no verdict from it
FRESH_INTERVALS = 5.0


@dataclass(frozen=True)
class Sample:
    """One scrape of /metrics: requests in flight and the sum of the progress counters."""

    in_flight: int
    progress: float


def parse(text: str) -> Sample | None:
    """The sample in a Prometheus text exposition; None when it has none of SGLang's counters."""
    in_flight = 0.0
    progress = 0.0
    seen = False
    for line in text.splitlines():
        if not line.startswith("sglang:"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
        if name == IN_FLIGHT:
            seen = True
            if not any(tag in line for tag in NOT_WORK):
                in_flight += value
        elif name in PROGRESS:
            seen = True
            progress += value
    return Sample(in_flight=max(0, round(in_flight)), progress=progress) if seen else None


class Tracker:
    """The stall clock: starts when requests are in flight, restarts at every progress, stops when idle."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.last: float | None = None
        self.in_flight = 0

    def update(self, sample: Sample, now: float) -> float:
        """Seconds the in-flight requests have gone without progress (0 when idle or progressing)."""
        moved = self.last is None or sample.progress != self.last
        self.last = sample.progress
        self.in_flight = sample.in_flight
        if sample.in_flight == 0:
            self.since = None
            return 0.0
        if moved or self.since is None:
            self.since = now
        return now - self.since


def hang_verdict(in_flight: int, stalled: float) -> Verdict:
    """The verdict of a stuck server (its line is what the watcher's record keeps)."""
    return Verdict("hang", f"{in_flight} requests in flight, no token for {stalled:.0f} s")


def record(
    in_flight: int, stalled: float, stall_after: float, interval: float, verdict: str | None
) -> dict[str, Any]:
    """What the watcher writes beside the state file after each sample."""
    return {
        "time": time.time(),
        "in_flight": in_flight,
        "stalled_s": round(stalled, 3),
        "stall_after": stall_after,
        "interval": interval,
        "verdict": verdict,
    }


@dataclass(frozen=True)
class Record:
    """A fresh watcher record: requests in flight, seconds without progress, the bound, the hang line."""

    in_flight: int
    stalled: float
    stall_after: float
    verdict: str | None

    @property
    def reason(self) -> str | None:
        """The hang reason (``N requests in flight, no token for S s``) when the watcher called it."""
        found = Verdict.parse(self.verdict) if self.verdict is not None else None
        return found.reason if found is not None and not found.healthy else None

    @property
    def stalling(self) -> bool:
        """Requests are in flight and the counters have not moved since the last sample."""
        return self.in_flight > 0 and self.stalled > 0


def read_record(path: str, now: float | None = None) -> Record | None:
    """The watcher's record when it is fresh (written within :data:`FRESH_INTERVALS` samples), else None."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        when, interval = float(data["time"]), float(data["interval"])
        found = Record(
            in_flight=int(data["in_flight"]),
            stalled=float(data["stalled_s"]),
            stall_after=float(data["stall_after"]),
            verdict=data.get("verdict") if isinstance(data.get("verdict"), str) else None,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None
    now = time.time() if now is None else now
    return found if now - when <= FRESH_INTERVALS * max(interval, 1.0) else None


def hang_from_record(path: str, now: float | None = None) -> str | None:
    """The hang reason of a fresh watcher record (``N requests in flight, no token for S s``), else None."""
    found = read_record(path, now)
    return found.reason if found is not None else None
