"""The deep healthcheck's HTTP client, stdlib only: one run's budget (:class:`Run`), one request within it
(:func:`http_call`), an answer's body capped and its JSON read as untrusted, and snippets of an answer with
this run's API key redacted. Socket faults become :class:`Refused`, :class:`Dropped`, :class:`Unreachable` or
a verdict (:class:`healthchecks.judging.Unhealthy`); ``warmup.py`` decides what they mean.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from healthchecks import common, untrusted
from healthchecks.judging import Unhealthy
from healthchecks.settings import Config, UsageError

MAX_BODY_BYTES = 8 * 1024 * 1024
READ_CHUNK = 64 * 1024
SNIPPET = 160


class DeadlineExceeded(BaseException):
    """Raised by the interval timer when the overall budget is spent."""


class Refused(Exception):
    """Connection refused: nothing listens on the port."""


class Dropped(Exception):
    """The server closed or reset the connection without a complete answer."""


class Unreachable(Exception):
    """Another socket error while connecting."""


@dataclass
class Reply:
    """One HTTP answer, body capped at MAX_BODY_BYTES."""

    status: int
    reason: str
    body: bytes


@dataclass
class Run:
    """What one healthcheck run knows and has learnt."""

    cfg: Config
    deadline: float
    api_key: str | None
    state: dict[str, Any]
    stage: str = "start"
    notes: list[str] = field(default_factory=list)


def remaining(run: Run) -> float:
    left = run.deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded()
    return left


def target(url: str) -> tuple[str, str, int, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--url must be http(s)://host[:port], got {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise UsageError(f"bad port in --url {url!r}") from exc
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def connect(run: Run) -> tuple[http.client.HTTPConnection, str]:
    scheme, host, port, prefix = target(run.cfg.url)
    timeout = remaining(run)
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    return conn, prefix


def read_body(run: Run, sock: socket.socket, resp: http.client.HTTPResponse, what: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        sock.settimeout(remaining(run))  # a slow drip cannot stretch the budget
        piece = resp.read1(READ_CHUNK)
        if not piece:
            if resp.length:  # closed before Content-Length was reached: read1 does not raise it itself
                raise http.client.IncompleteRead(b"".join(chunks), resp.length)
            return b"".join(chunks)
        total += len(piece)
        if total > MAX_BODY_BYTES:
            raise Unhealthy("warmup_failed", f"{what}: response body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(piece)


def http_call(run: Run, method: str, path: str, payload: Any = None) -> Reply:
    """One request within the remaining budget; socket faults become Refused/Dropped/Unreachable/Unhealthy."""
    what = f"{method} {path}"
    conn, prefix = connect(run)
    headers = {"Accept": "application/json", "User-Agent": "bwstack-healthcheck"}
    if run.api_key:
        headers["Authorization"] = f"Bearer {run.api_key}"
    body = None
    if payload is not None:
        body = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.connect()
        sock = conn.sock
        conn.request(method, prefix + path, body=body, headers=headers)
        sock.settimeout(remaining(run))
        resp = conn.getresponse()
        data = read_body(run, sock, resp, what)
        return Reply(status=resp.status, reason=resp.reason, body=data)
    except ConnectionRefusedError as exc:
        raise Refused(what) from exc
    except TimeoutError as exc:
        raise Unhealthy("timeout", f"{what}: no answer within the {run.cfg.timeout:g}s budget") from exc
    except (http.client.IncompleteRead, ConnectionError) as exc:
        raise Dropped(f"{what}: {type(exc).__name__}") from exc
    except http.client.HTTPException as exc:
        raise Unhealthy("warmup_failed", f"{what}: malformed HTTP response ({type(exc).__name__})") from exc
    except socket.gaierror as exc:
        raise Unhealthy("warmup_failed", f"{what}: cannot resolve the host of {run.cfg.url}") from exc
    except OSError as exc:
        raise Unreachable(f"{what}: {exc.strerror or type(exc).__name__}") from exc
    finally:
        conn.close()


#: the API key of this run: every printed form is redacted from a reply before it is cut to a snippet (a
#: server that echoes the key must not leak a prefix of it into docker inspect or the state file)
SECRETS: list[str] = []


def snippet(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = " ".join(common.redact(text, SECRETS).split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 3] + "..."


#: what one answer's JSON may be: NaN / Infinity literals kept on purpose (a NaN logprob is the fault to see)
BODY_LIMITS = untrusted.Limits(max_bytes=MAX_BODY_BYTES, max_depth=32, max_values=200_000, allow_nan=True)


def parse_json(reply: Reply, what: str) -> Any:
    try:
        return untrusted.loads(reply.body, BODY_LIMITS)
    except untrusted.Refused as exc:
        if str(exc).startswith("not "):
            raise Unhealthy("warmup_failed", f"{what}: non-JSON body: {snippet(reply.body)!r}") from exc
        raise Unhealthy("warmup_failed", f"{what}: answer refused: {exc}") from exc
