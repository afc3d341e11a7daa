#!/usr/bin/env python3
"""A bounded load against a running SGLang server, for the sweep's speed column (``bwstack sweep --bench``).

    python3 healthchecks/bench_client.py --url URL --num-prompts N --input-len L --output-len M
        --concurrency C --time-limit S [--api-key-file PATH] [--seed N]

The sweep runs it with ``docker exec`` inside the serving container (against 127.0.0.1) when the image's own
``sglang.bench_serving`` cannot run there. Each request is a streaming ``POST /generate`` of ``L`` random
token ids (below :data:`TOKEN_ID_HIGH`, so present in any byte-level vocabulary; seeded, so a rerun sends the
same prompts) with ``max_new_tokens`` = ``M``, ``ignore_eos`` and greedy sampling, so every request asks for
exactly ``M`` tokens. First ``--warmup`` requests (1) of the same shape, one at a time and not counted (as
SGLang's own client does); then ``C`` threads keep ``C`` requests in flight until ``N`` are sent. Timing per
request: TTFT is the first streamed chunk carrying a token; each later chunk adds its gap, split evenly over
the tokens it carries, to the inter-token latencies (ITL).

The time limit is hard: no request starts after it, every socket wait is bounded by what is left of it, and
the run ends at it with what completed by then (``timed_out`` true). One JSON line on stdout:
``completed``, ``failed``, ``timed_out``, ``duration_s``, ``input_tokens``, ``output_tokens``,
``output_tokens_per_s``, ``requests_per_s``, ``ttft_ms_p50``, ``ttft_ms_p99``, ``itl_ms_p50``, ``errors``
(the first few). Exit 0 when at least one request completed, 1 otherwise, 2 on bad arguments. Stdlib only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

if not __package__:  # run as a script: make the folder above importable so "healthchecks" resolves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from healthchecks import common

CLIENT = "bwstack bench_client"
#: prompt token ids are drawn from [TOKEN_ID_LOW, TOKEN_ID_HIGH): inside every byte-level BPE vocabulary
TOKEN_ID_LOW = 16
TOKEN_ID_HIGH = 256
#: errors kept in the output (the count is always whole)
KEEP_ERRORS = 5
#: longest a connect may take (the server listens on the same host)
CONNECT_S = 10.0
MAX_LINE = 4 * 1024 * 1024


@dataclass
class Timing:
    """One finished request: time to the first token, the per-token gaps after it, tokens in and out."""

    ttft_s: float
    itl_s: list[float]
    input_tokens: int
    output_tokens: int
    finished_at: float


@dataclass
class Tally:
    """What the worker threads found, under one lock."""

    timings: list[Timing] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, timing: Timing) -> None:
        with self.lock:
            self.timings.append(timing)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failed += 1
            if len(self.errors) < KEEP_ERRORS:
                self.errors.append(message[:300])


class Deadline(Exception):
    """The run's time limit passed while a request was in flight."""


def prompts(count: int, length: int, seed: int) -> list[list[int]]:
    """``count`` prompts of ``length`` random token ids each, the same for the same seed."""
    rng = random.Random(seed)
    return [[rng.randrange(TOKEN_ID_LOW, TOKEN_ID_HIGH) for _ in range(length)] for _ in range(count)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def request_body(ids: list[int], output_len: int) -> bytes:
    sampling = {"max_new_tokens": output_len, "ignore_eos": True, "temperature": 0.0}
    return json.dumps({"input_ids": ids, "sampling_params": sampling, "stream": True}).encode()


def token_count(chunk: Any, previous: int) -> int:
    """Tokens generated so far according to one streamed chunk (``meta_info.completion_tokens``, else the
    length of ``output_ids``, else one more than before)."""
    if isinstance(chunk, dict):
        meta = chunk.get("meta_info")
        if isinstance(meta, dict) and isinstance(meta.get("completion_tokens"), int):
            return int(meta["completion_tokens"])
        if isinstance(chunk.get("output_ids"), list):
            return len(chunk["output_ids"])
    return previous + 1


class Client:
    """Sends the requests of one run against ``url`` before ``deadline`` (a ``time.monotonic`` value)."""

    def __init__(self, url: str, api_key: str | None, output_len: int, deadline: float) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"--url must be http://HOST:PORT, got {url!r}")
        self.host = parsed.hostname
        self.port = parsed.port or 80
        self.path = (parsed.path.rstrip("/") or "") + "/generate"
        self.api_key = api_key
        self.output_len = output_len
        self.deadline = deadline

    def left(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise Deadline()
        return remaining

    def one(self, ids: list[int]) -> Timing:
        """One streaming request; its timing, or an exception saying why it failed."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=min(self.left(), CONNECT_S))
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            started = time.monotonic()
            conn.request("POST", self.path, body=request_body(ids, self.output_len), headers=headers)
            response = self._response(conn)
            if response.status != 200:
                detail = " ".join(response.read(600).decode("utf-8", "replace").split())
                raise RuntimeError(f"HTTP {response.status}: {detail[:200]}")
            return self._stream(conn, response, started, len(ids))
        finally:
            conn.close()

    def _response(self, conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
        self._bound(conn)
        try:
            return conn.getresponse()
        except TimeoutError:
            raise Deadline() from None

    def _bound(self, conn: http.client.HTTPConnection) -> None:
        """Every socket wait ends at the deadline (a timed-out socket cannot be read again: the request is
        abandoned then)."""
        if conn.sock is not None:
            conn.sock.settimeout(self.left())

    def _stream(
        self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, started: float, n_in: int
    ) -> Timing:
        tokens = 0
        first: float | None = None
        last = started
        gaps: list[float] = []
        while True:
            self._bound(conn)
            try:
                raw = response.readline(MAX_LINE)
            except TimeoutError:
                raise Deadline() from None
            if not raw:
                break
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            now = time.monotonic()
            try:
                chunk = json.loads(payload)
            except ValueError:
                raise RuntimeError(f"not JSON in the stream: {payload[:120]!r}") from None
            if isinstance(chunk, dict) and chunk.get("error"):
                raise RuntimeError(f"server error in the stream: {str(chunk['error'])[:200]}")
            count = token_count(chunk, tokens)
            if count <= tokens:
                continue
            if first is None:
                first = now
            else:
                gaps.extend([(now - last) / (count - tokens)] * (count - tokens))
            tokens, last = count, now
        if first is None:
            raise RuntimeError("the stream ended before the first token")
        return Timing(first - started, gaps, n_in, tokens, last)


def warm(client: Client, work: list[list[int]], tally: Tally) -> None:
    """The uncounted warmup requests, one at a time; a failure is kept among the errors only."""
    for ids in work:
        try:
            client.one(ids)
        except Deadline:
            return
        except (OSError, http.client.HTTPException, RuntimeError, ValueError) as exc:
            with tally.lock:
                if len(tally.errors) < KEEP_ERRORS:
                    tally.errors.append(f"warmup: {type(exc).__name__}: {exc}"[:300])


def run(client: Client, work: list[list[int]], concurrency: int, tally: Tally) -> tuple[float, float, bool]:
    """Send ``work`` with ``concurrency`` threads; (start, end, timed_out). Ends at the deadline at the
    latest (threads still in flight then are daemons, abandoned with their sockets' timeouts)."""
    queue = list(reversed(work))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                ids = queue.pop()
            try:
                tally.done(client.one(ids))
            except Deadline:
                return
            except (OSError, http.client.HTTPException, RuntimeError, ValueError) as exc:
                tally.fail(f"{type(exc).__name__}: {exc}")

    started = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, client.deadline - time.monotonic()))
    timed_out = any(thread.is_alive() for thread in threads) or bool(queue)
    return started, time.monotonic(), timed_out


def summary(tally: Tally, started: float, ended: float, timed_out: bool) -> dict[str, Any]:
    """The one JSON object the run prints (figures None when nothing completed)."""
    with tally.lock:
        timings = list(tally.timings)
        failed, errors = tally.failed, list(tally.errors)
    end = ended if timed_out or not timings else max(t.finished_at for t in timings)
    duration = max(end - started, 1e-9)
    output_tokens = sum(t.output_tokens for t in timings)
    ttfts = [t.ttft_s * 1000 for t in timings]
    itls = [gap * 1000 for t in timings for gap in t.itl_s]
    figures = bool(timings)
    return {
        "client": CLIENT,
        "completed": len(timings),
        "failed": failed,
        "timed_out": timed_out,
        "duration_s": round(duration, 3),
        "input_tokens": sum(t.input_tokens for t in timings),
        "output_tokens": output_tokens,
        "output_tokens_per_s": output_tokens / duration if figures else None,
        "requests_per_s": len(timings) / duration if figures else None,
        "ttft_ms_p50": percentile(ttfts, 50),
        "ttft_ms_p99": percentile(ttfts, 99),
        "itl_ms_p50": percentile(itls, 50),
        "errors": errors,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get(common.ENV_HC_URL, common.DEFAULT_HC_URL))
    parser.add_argument("--num-prompts", type=common.positive_int, required=True)
    parser.add_argument("--input-len", type=common.positive_int, required=True)
    parser.add_argument("--output-len", type=common.positive_int, required=True)
    parser.add_argument("--concurrency", type=common.positive_int, required=True)
    parser.add_argument("--time-limit", type=float, required=True, help="seconds; the run never outlasts it")
    parser.add_argument("--api-key-file", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1, help="uncounted requests before the timed run")
    args = parser.parse_args(argv)
    if not args.time_limit > 0:
        parser.error("--time-limit must be more than 0 seconds")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    deadline = time.monotonic() + args.time_limit
    api_key = common.read_secret(args.api_key_file) if args.api_key_file else None
    try:
        client = Client(args.url, api_key, args.output_len, deadline)
    except ValueError as exc:
        print(f"bench_client: {exc}", file=sys.stderr)
        return 2
    work = prompts(args.num_prompts + max(args.warmup, 0), args.input_len, args.seed)
    tally = Tally()
    warm(client, work[args.num_prompts :], tally)
    concurrency = min(args.concurrency, args.num_prompts)
    started, ended, timed_out = run(client, work[: args.num_prompts], concurrency, tally)
    result = summary(tally, started, ended, timed_out)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["completed"] else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # abandoned daemon threads must not hold the exit past the time limit
