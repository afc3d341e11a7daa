#!/usr/bin/env python3
"""A bounded concurrent soak of a running SGLang server, with a stall watchdog (``bwstack sweep --soak``).

    python3 healthchecks/soak_client.py --url URL --duration S --concurrency C --lengths L1,L2,...
        --output-len M --stall-after S [--window S] [--api-key-file PATH] [--seed N]

``C`` threads keep ``C`` streamed ``POST /generate`` requests in flight for ``S`` seconds; prompt lengths
cycle through ``--lengths`` (random token ids, seeded; include one past the model's sparse window), each
asks for ``M`` sampled tokens (temperature 0.7, ``ignore_eos``) with ``return_logprob``. The lengths are
capped by the served context length (``max_model_len`` of ``GET /v1/models``) less ``M``: a prompt the
server must refuse measures nothing. Every streamed token's logprob must be finite (else ``nan``); a
finished request's logprobs must not be flat or one token looping (else ``garbage``,
:func:`judging.degenerate_decode`). The watchdog looks every 0.25 s: a request in flight with no token for
``--stall-after`` seconds ends the soak at once as ``hang``.

A request *fails* when the server answers it with an HTTP error, puts an error in the stream (SGLang's
``data: {"error": {"message": ...}}`` chunk, or a chunk whose ``finish_reason`` is ``abort``), or the stream
ends early (the connection closes before ``data: [DONE]``, or ``[DONE]`` comes without a finished chunk).
More than :data:`FAIL_RATIO` (2 %) of the soak's requests failing is a verdict: the class of the kept error
texts in the one failure catalog (:func:`healthchecks.signatures.classify_lines`, root cause first: ``CUDA
error: an illegal memory access`` is ``illegal_memory``), else :data:`GENERIC_CLASS` (``warmup_failed``,
the catalog's class for a request that could not be completed without a known signature, as the
healthcheck's own decode). The reason names the length bucket with the most failures and its first error
text (redacted, capped). Why 2 %: a healthy server on 127.0.0.1 fails no request, so the threshold only has
to absorb a rare glitch (one in a thousand stays ``ok``); the lengths cycle evenly, so a length where at
least half of the requests fail (the sparse-window failure: short prompts fine, long ones broken) puts the
whole soak past 1/(2 x 16) > 3 % with any number of lengths (at most 16).

Figures over windows of ``--window`` seconds: tokens, requests, ITL p50/p99 overall, the worst window
(highest ITL p99), stalls (gaps between two tokens of one request longer than half the stall bound); per
length bucket (``buckets``): requests completed, failed, tokens, ITL p50/p99. One JSON line on stdout; exit
0 when ``verdict`` is ``ok``, 1 otherwise, 2 on bad arguments. Stdlib only; 127.0.0.1 in the sweep.
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

from healthchecks import common, judging, signatures
from healthchecks.bench_client import TOKEN_ID_HIGH, TOKEN_ID_LOW, percentile, token_count

TEMPERATURE = 0.7
WATCH_S = 0.25
CONNECT_S = 10.0
MAX_LINE = 16 * 1024 * 1024
KEEP_ERRORS = 5
#: the longest duration, stall bound or window the client takes (a day: `bwstack up --soak`'s own cap)
MAX_SECONDS = 86_400.0
#: a stream whose requests fail waits before the next one: 50 ms, doubling, at most 1 s
BACKOFF_S, BACKOFF_MAX_S = 0.05, 1.0
#: more than this share of the soak's requests failed -> not ``ok`` (module docstring: why 2 %)
FAIL_RATIO = 0.02
#: the class of failed requests whose error text the catalog does not know
GENERIC_CLASS = "warmup_failed"
#: characters of one error text kept for the catalog, and shown in the reason and ``errors``
ERROR_TEXT, SHOWN_TEXT = 2000, 300
#: bytes of an HTTP error body read
ERROR_BODY = 4096


@dataclass
class Flight:
    """One request in flight: when it started and when its last token arrived."""

    started: float
    last: float
    tokens: int = 0
    conn: http.client.HTTPConnection | None = None


@dataclass
class Bucket:
    """The figures of one prompt length."""

    length: int
    completed: int = 0
    failed: int = 0
    tokens: int = 0
    gaps_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the first KEEP_ERRORS, redacted, ERROR_TEXT long

    def record(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "requests": self.completed,
            "failed": self.failed,
            "tokens": self.tokens,
            **{f"itl_ms_p{q}": _ms(percentile(self.gaps_ms, q)) for q in (50, 99)},
        }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


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
    buckets: dict[int, Bucket] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
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

    def bucket(self, length: int) -> Bucket:
        """The bucket of ``length`` (call with the lock held)."""
        return self.buckets.setdefault(length, Bucket(length))

    def fail(self, length: int, message: str) -> None:
        """One failed request of ``length`` tokens; its error text redacted (the API key) and capped."""
        text = " ".join(common.redact(message, self.secrets).split())[:ERROR_TEXT]
        with self.lock:
            self.failed += 1
            bucket = self.bucket(length)
            bucket.failed += 1
            if len(bucket.errors) < KEEP_ERRORS:
                bucket.errors.append(text)
            if len(self.errors) < KEEP_ERRORS:
                self.errors.append(text[:SHOWN_TEXT])


class Ended(Exception):
    """The soak is over (deadline or a verdict) while a request was in flight."""


class Failed(Exception):
    """The server failed one request: an HTTP error, an error in the stream, or a stream cut short."""


def stream_error(chunk: Any) -> str | None:
    """The error a streamed chunk carries, or None: SGLang's ``{"error": {"message": ...}}`` (0.5.9 and
    0.5.23 http_server ``stream_results``; a plain string is taken too), or a ``finish_reason`` of type
    ``abort`` (0.5.23 tokenizer_manager ``_handle_abort_finish_reason`` streams the abort as a chunk)."""
    if not isinstance(chunk, dict):
        return None
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        return f"error in the stream: {message if message else error}"
    meta = chunk.get("meta_info")
    if isinstance(meta, dict):
        kind, message = judging.finish(meta)
        if kind == "abort":
            return f"request aborted in the stream: {message or meta.get('finish_reason')}"
    return None


def finished(chunk: Any) -> bool:
    """Whether a streamed chunk is a request's last (its ``finish_reason`` is set)."""
    meta = chunk.get("meta_info") if isinstance(chunk, dict) else None
    return isinstance(meta, dict) and meta.get("finish_reason") is not None


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


def one(soak: Soak, target: Target, ids: list[int], key: int) -> bool:  # noqa: PLR0912, PLR0915 - one streamed request's states
    """One streamed request, checked token by token; the watchdog shuts its socket down to end it. True
    when it completed."""
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
    done = last_finished = False
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
            text = response.read(ERROR_BODY).decode("utf-8", errors="replace")
            raise Failed(f"HTTP {response.status} {response.reason}: {text}".strip())
        while True:
            raw = response.readline(MAX_LINE)
            if not raw or soak.stop.is_set():
                break
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            if line[5:].strip() == b"[DONE]":
                done = True
                break
            chunk = json.loads(line[5:].strip())
            problem = stream_error(chunk)
            if problem:
                raise Failed(problem)
            last_finished = finished(chunk)
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
                    soak.bucket(len(ids)).gaps_ms.extend([gap * 1000] * (count - flight.tokens))
                soak.bucket(len(ids)).tokens += count - flight.tokens
                flight.tokens, flight.last = count, stamp
        if soak.stop.is_set():
            raise Ended()
        if not done:
            raise Failed(
                f"the stream closed before [DONE] after {flight.tokens} of {target.output_len} tokens"
            )
        if not last_finished:
            raise Failed(
                f"the stream ended ([DONE]) without a finished chunk after {flight.tokens} of "
                f"{target.output_len} tokens"
            )
        degenerate = judging.degenerate_decode([e for e in entries if isinstance(e, list) and e])
        if degenerate:
            soak.end("garbage", degenerate.replace("sampled decode", "soak request"))
        with soak.lock:
            soak.completed += 1
            soak.bucket(len(ids)).completed += 1
        return True
    except judging.Unhealthy as exc:
        soak.end(exc.cls, exc.reason)
    except Ended:
        pass
    except Failed as exc:
        if not soak.stop.is_set():
            soak.fail(len(ids), str(exc))
    except (OSError, http.client.HTTPException, RuntimeError, ValueError) as exc:
        if not soak.stop.is_set():
            # the client's own exception, not the server's text: not in the "Name: message" shape of a
            # traceback line, which the catalog would take for a crash of the server
            where = f"after {flight.tokens} tokens" if flight.tokens else "before any token"
            soak.fail(len(ids), f"the request failed {where}: {type(exc).__name__} {exc}")
    finally:
        with soak.lock:
            soak.flights.pop(key, None)
        conn.close()
    return False


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


def context_length(target: Target) -> int | None:
    """The served context length (``max_model_len`` of ``GET /v1/models``, 0.5.9 and 0.5.23); None when the
    server does not say."""
    parts = urllib.parse.urlsplit(target.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=CONNECT_S)
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    try:
        conn.request("GET", parts.path.rstrip("/") + "/v1/models", headers=headers)
        response = conn.getresponse()
        data = json.loads(response.read(1 << 20)) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    cards = data.get("data") if isinstance(data, dict) else None
    value = (
        cards[0].get("max_model_len")
        if isinstance(cards, list) and cards and isinstance(cards[0], dict)
        else None
    )
    return value if isinstance(value, int) and value > 0 else None


def capped(lengths: Sequence[int], context: int | None, output_len: int) -> list[int]:
    """The prompt lengths the soak sends: each at most ``context - output_len`` (room to answer), in order,
    without repeats."""
    if not context:
        return list(dict.fromkeys(lengths))
    room = max(1, context - output_len)
    return list(dict.fromkeys(min(length, room) for length in lengths))


def failure_verdict(soak: Soak) -> tuple[str, str] | None:
    """The verdict of the soak's failed requests: None at most :data:`FAIL_RATIO` of them, else the catalog's
    class of their error texts (:data:`GENERIC_CLASS` when it knows none) and a reason naming the length that
    failed most and its first error."""
    with soak.lock:
        buckets = [b for b in soak.buckets.values() if b.completed or b.failed]
    failed = sum(b.failed for b in buckets)
    tried = failed + sum(b.completed for b in buckets)
    if not failed or failed <= FAIL_RATIO * tried:
        return None
    texts = [text for b in buckets for text in b.errors]
    found = signatures.classify_lines(texts)
    worst = max(buckets, key=lambda b: (b.failed / (b.failed + b.completed), b.failed))
    first = worst.errors[0] if worst.errors else ""
    shown = first if len(first) <= SHOWN_TEXT else first[: SHOWN_TEXT - 3] + "..."
    reason = (
        f"{failed} of {tried} requests failed (more than {FAIL_RATIO:.0%}); at {worst.length} tokens "
        f"{worst.failed} of {worst.failed + worst.completed}: {shown}"
    )
    return (found.cls if found else GENERIC_CLASS), reason


def run(args: argparse.Namespace, api_key: str | None) -> dict[str, Any]:
    """The soak; its JSON record."""
    target = Target(args.url, api_key, args.output_len)
    context = context_length(target)
    lengths = capped(args.lengths, context, args.output_len)
    started = time.monotonic()
    soak = Soak(
        deadline=started + args.duration, stall_after=args.stall_after, secrets=[api_key] if api_key else []
    )
    soak.buckets = {length: Bucket(length) for length in lengths}
    rng = random.Random(args.seed)
    lock = threading.Lock()
    issued = [0]

    def worker() -> None:
        failing = 0  # this stream's failures in a row: it backs off (50 ms doubling to 1 s), never spins
        while not soak.stop.is_set() and time.monotonic() < soak.deadline:
            with lock:
                key = issued[0]
                issued[0] += 1
                length = lengths[key % len(lengths)]
                ids = [rng.randrange(TOKEN_ID_LOW, TOKEN_ID_HIGH) for _ in range(length)]
            failing = 0 if one(soak, target, ids, key) else failing + 1
            if failing:
                soak.stop.wait(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** min(failing - 1, 10)))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for thread in threads:
        thread.start()
    watchdog(soak)
    ended = time.monotonic()
    for thread in threads:
        thread.join(timeout=WATCH_S * 4)
    with soak.lock:
        buckets = [soak.buckets[length].record() for length in lengths]
    out: dict[str, Any] = {
        "verdict": soak.verdict,
        "reason": soak.reason,
        "duration_s": round(ended - started, 2),
        "requests": soak.completed,
        "failed": soak.failed,
        "errors": soak.errors,
        "concurrency": args.concurrency,
        "lengths": lengths,
        "context_length": context,
        "output_len": args.output_len,
        "stall_after": args.stall_after,
        "buckets": buckets,
    }
    if lengths != list(args.lengths):
        out["lengths_asked"] = list(args.lengths)
    out.update(figures(soak, started, ended, args.window))
    failing = failure_verdict(soak) if soak.verdict == "ok" else None
    if failing is not None:
        out.update(verdict=failing[0], reason=failing[1])
    elif soak.verdict == "ok" and not soak.completed:
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
        value = getattr(args, name)
        if not 0 < value <= MAX_SECONDS:  # NaN and inf fail this too
            parser.error(f"--{name.replace('_', '-')} must be more than 0 and at most {MAX_SECONDS:g} s")
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
