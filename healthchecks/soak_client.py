#!/usr/bin/env python3
"""A bounded concurrent soak of a running SGLang server, with a stall watchdog (``bwstack sweep --soak``).

    python3 healthchecks/soak_client.py --url URL --duration S --concurrency C --lengths L1,L2,...
        --output-len M --stall-after S [--window S] [--api-key-file PATH] [--seed N]

``C`` threads keep ``C`` streamed ``POST /generate`` requests in flight for ``S`` seconds; prompt lengths
cycle through ``--lengths`` (random token ids, seeded; include one past the model's sparse window), each
asks for ``M`` sampled tokens (temperature 0.7, ``ignore_eos``) with ``return_logprob``. Every streamed
token's logprob must be finite (else ``nan``); a finished request's logprobs must not be flat or one token
looping (else ``garbage``, :func:`judging.degenerate_decode`). The watchdog looks every 0.25 s: a request in
flight with no token for ``--stall-after`` seconds ends the soak at once as ``hang``. Figures over windows of
``--window`` seconds: tokens, requests, ITL p50/p99 overall, the worst window (highest ITL p99), stalls (gaps
between two tokens of one request longer than half the stall bound). One JSON line on stdout; exit 0 when
``verdict`` is ``ok``, 1 otherwise, 2 on bad arguments. Stdlib only; 127.0.0.1 in the sweep.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

if not __package__:  # run as a script: make the folder above importable so "healthchecks" resolves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from healthchecks import common, judging
from healthchecks.bench_client import TOKEN_ID_HIGH, TOKEN_ID_LOW, percentile, token_count

TEMPERATURE = 0.7
WATCH_S = 0.25
CONNECT_S = 10.0
MAX_LINE = 16 * 1024 * 1024
KEEP_ERRORS = 5


@dataclass
class Flight:
    """One request in flight: when it started and when its last token arrived."""

    started: float
    last: float
    tokens: int = 0
    conn: http.client.HTTPConnection | None = None


@dataclass
class Soak:
    """The soak's shared state, under one lock."""

    deadline: float
    stall_after: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    flights: dict[int, Flight] = field(default_factory=dict)
    stamps: list[tuple[float, float]] = field(
        default_factory=list
    )  # (time, gap) of every token after a first
    firsts: list[float] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    verdict: str = "ok"
    reason: str = ""
    stop: threading.Event = field(default_factory=threading.Event)

    def end(self, verdict: str, reason: str) -> None:
        with self.lock:
            if self.verdict == "ok":
                self.verdict, self.reason = verdict, reason
        self.halt()

    def halt(self) -> None:
        """Stop: no new request, and every socket in flight shut down (a blocked read returns at once)."""
        self.stop.set()
        with self.lock:
            conns = [f.conn for f in self.flights.values() if f.conn is not None]
        for conn in conns:
            with contextlib.suppress(OSError):
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failed += 1
            if len(self.errors) < KEEP_ERRORS:
                self.errors.append(message[:300])


class Ended(Exception):
    """The soak is over (deadline or a verdict) while a request was in flight."""


def body(ids: list[int], output_len: int) -> bytes:
    sampling = {"max_new_tokens": output_len, "ignore_eos": True, "temperature": TEMPERATURE}
    payload = {"input_ids": ids, "sampling_params": sampling, "stream": True, "return_logprob": True}
    return json.dumps(payload).encode()


def new_logprobs(chunk: Any, seen: int) -> list[Any]:
    """The output-token logprob entries of a streamed chunk past the first ``seen`` (cumulative or not)."""
    meta = chunk.get("meta_info") if isinstance(chunk, dict) else None
    entries = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(entries, list):
        return []
    return entries[seen:] if len(entries) >= seen else entries


@dataclass(frozen=True)
class Target:
    """Where and what to send."""

    url: str
    api_key: str | None
    output_len: int


def one(soak: Soak, target: Target, ids: list[int], key: int) -> None:  # noqa: PLR0912 - one streamed request's states
    """One streamed request, checked token by token; the watchdog shuts its socket down to end it."""
    parts = urllib.parse.urlsplit(target.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=CONNECT_S)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if target.api_key:
        headers["Authorization"] = f"Bearer {target.api_key}"
    now = time.monotonic()
    flight = Flight(started=now, last=now, conn=conn)
    with soak.lock:
        soak.flights[key] = flight
    entries: list[Any] = []
    try:
        if soak.stop.is_set():
            raise Ended()
        path = parts.path.rstrip("/") + "/generate"
        conn.request("POST", path, body=body(ids, target.output_len), headers=headers)
        assert conn.sock is not None
        # a backstop only: the watchdog ends a stuck request long before this
        conn.sock.settimeout(max(1.0, soak.deadline - time.monotonic()) + soak.stall_after * 2)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read(300)!r}")
        while True:
            raw = response.readline(MAX_LINE)
            if not raw or soak.stop.is_set():
                break
            line = raw.strip()
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            chunk = json.loads(line[5:].strip())
            if isinstance(chunk, dict) and chunk.get("error"):
                raise RuntimeError(f"server error in the stream: {str(chunk['error'])[:200]}")
            fresh = new_logprobs(chunk, len(entries))
            for pos, entry in enumerate(fresh, start=len(entries)):
                if isinstance(entry, list) and entry:
                    judging.finite_logprob(entry[0], f"soak: output token {pos} (id {entry[1:2]})")
            entries.extend(fresh)
            count = token_count(chunk, flight.tokens)
            if count <= flight.tokens:
                continue
            stamp = time.monotonic()
            with soak.lock:
                if flight.tokens == 0:
                    soak.firsts.append(stamp)
                else:
                    gap = (stamp - flight.last) / (count - flight.tokens)
                    soak.stamps.extend([(stamp, gap)] * (count - flight.tokens))
                flight.tokens, flight.last = count, stamp
        if soak.stop.is_set():
            raise Ended()
        degenerate = judging.degenerate_decode([e for e in entries if isinstance(e, list) and e])
        if degenerate:
            soak.end("garbage", degenerate.replace("sampled decode", "soak request"))
        with soak.lock:
            soak.completed += 1
    except judging.Unhealthy as exc:
        soak.end(exc.cls, exc.reason)
    except Ended:
        pass
    except (OSError, http.client.HTTPException, RuntimeError, ValueError) as exc:
        if not soak.stop.is_set():
            soak.fail(f"{type(exc).__name__}: {exc}")
    finally:
        with soak.lock:
            soak.flights.pop(key, None)
        conn.close()


def watchdog(soak: Soak) -> None:
    """Ends the soak as ``hang`` when a request in flight has had no token for the stall bound."""
    while not soak.stop.wait(WATCH_S):
        now = time.monotonic()
        if now >= soak.deadline:
            soak.halt()
            return
        with soak.lock:
            flights = list(soak.flights.values())
        stuck = [now - f.last for f in flights if now - f.last >= soak.stall_after]
        if stuck:
            soak.end("hang", f"{len(flights)} requests in flight, no token for {max(stuck):.0f} s")
            return


def figures(soak: Soak, started: float, ended: float, window: float) -> dict[str, Any]:
    """Tokens, requests, ITL p50/p99, stalls and the worst window of a finished soak."""
    with soak.lock:
        stamps, firsts = list(soak.stamps), list(soak.firsts)
    gaps_ms = [gap * 1000 for _, gap in stamps]
    windows: list[dict[str, Any]] = []
    count = max(1, int((ended - started) // window) + (1 if (ended - started) % window else 0))
    for index in range(count):
        low, high = started + index * window, started + (index + 1) * window
        inside = [gap * 1000 for when, gap in stamps if low <= when < high]
        tokens = len(inside) + sum(1 for when in firsts if low <= when < high)
        windows.append(
            {"start_s": round(index * window, 1), "tokens": tokens, "itl_ms_p99": percentile(inside, 99)}
        )
    scored = [w for w in windows if w["itl_ms_p99"] is not None]
    worst = (
        max(scored, key=lambda w: w["itl_ms_p99"]) if scored else (min(windows, key=lambda w: w["tokens"]))
    )
    return {
        "tokens": len(stamps) + len(firsts),
        "itl_ms_p50": percentile(gaps_ms, 50),
        "itl_ms_p99": percentile(gaps_ms, 99),
        "stalls": sum(1 for gap in gaps_ms if gap >= soak.stall_after * 500),
        "windows": len(windows),
        "worst_window": worst,
    }


def run(args: argparse.Namespace, api_key: str | None) -> dict[str, Any]:
    """The soak; its JSON record."""
    started = time.monotonic()
    soak = Soak(deadline=started + args.duration, stall_after=args.stall_after)
    rng = random.Random(args.seed)
    lock = threading.Lock()
    issued = [0]
    target = Target(args.url, api_key, args.output_len)

    def worker() -> None:
        while not soak.stop.is_set() and time.monotonic() < soak.deadline:
            with lock:
                key = issued[0]
                issued[0] += 1
                length = args.lengths[key % len(args.lengths)]
                ids = [rng.randrange(TOKEN_ID_LOW, TOKEN_ID_HIGH) for _ in range(length)]
            one(soak, target, ids, key)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for thread in threads:
        thread.start()
    watchdog(soak)
    ended = time.monotonic()
    for thread in threads:
        thread.join(timeout=WATCH_S * 4)
    out: dict[str, Any] = {
        "verdict": soak.verdict,
        "reason": soak.reason,
        "duration_s": round(ended - started, 2),
        "requests": soak.completed,
        "failed": soak.failed,
        "errors": soak.errors,
        "concurrency": args.concurrency,
        "lengths": args.lengths,
        "output_len": args.output_len,
        "stall_after": args.stall_after,
    }
    out.update(figures(soak, started, ended, args.window))
    if soak.verdict == "ok" and not soak.completed:
        out.update(verdict="failed", reason=f"no request completed in {args.duration:g} s")
    return out


def _lengths(text: str) -> list[int]:
    values = [common.positive_int(part) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"want positive integers, comma-separated: {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get(common.ENV_HC_URL, common.DEFAULT_HC_URL))
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--concurrency", type=common.positive_int, required=True)
    parser.add_argument("--lengths", type=_lengths, required=True)
    parser.add_argument("--output-len", type=common.positive_int, required=True)
    parser.add_argument("--stall-after", type=float, required=True)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--api-key-file", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("duration", "stall_after", "window"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0")
    if not 1 <= args.concurrency <= 64 or not 1 <= args.output_len <= 65536:
        parser.error("--concurrency must be 1..64 and --output-len 1..65536")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    api_key = common.read_secret(args.api_key_file) if args.api_key_file else None
    result = run(args, api_key)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["verdict"] == "ok" else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # abandoned daemon threads must not hold the exit
