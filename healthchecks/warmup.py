#!/usr/bin/env python3
"""The deep healthcheck of a bwstack SGLang container (Docker HEALTHCHECK / Kubernetes exec probe).

    python3 healthchecks/warmup.py --url URL [--timeout S] [--expect KEY=VALUE ...] [--log PATH]
        [--api-key-file PATH] [--mode full|light] [--expect-text TEXT] [--decode-every S] [--state PATH]
        [--stall-after S]
        [--baseline PASSAGE_ID=SCORE] [--margin NATS]

Exit 0 = healthy, 1 = unhealthy; the last stdout line is ``healthy: <summary>`` or
``unhealthy: <class>: <reason>``. Checks, cheapest first: liveness (GET /health), a scan of the server log for
a fatal signature (incremental, via the state file), the effective config (GET /server_info, falling back to
/get_server_info) against each --expect, a sampled decode (POST /generate, temperature > 0,
return_logprob, ignore_eos) whose logprobs must all be finite and not degenerate (flat, or one token looping),
and the quality probe: the reference passage scored by teacher forcing (one prefill), compared with the
calibrated --baseline (class ``garbage`` below baseline - margin). While the port refuses, the log tells
starting from dead: generic traceback evidence after the last start banner, a ready line, or a log that has
not changed for --stall-after seconds (while no JIT compiler runs: ``phases.compiling``) mean ``crash`` (or
the class of the evidence), not ``starting``. One
overall deadline: every socket wait is bounded by the remaining budget and an interval timer ends the run at
--timeout. Stdlib only; it runs every interval. Its HTTP client is ``probehttp.py``, its reading of the server
log ``logwatch.py``, the meaning of an answer ``judging.py``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

if not __package__:  # run as a script: make the folder above importable so "healthchecks" resolves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from healthchecks import common, judging, longprobe, progress, signatures, startup
from healthchecks.judging import Unhealthy
from healthchecks.logwatch import http_failure, log_verdict, root_cause_or, scan_log
from healthchecks.probehttp import (
    MAX_BODY_BYTES,
    SECRETS,
    DeadlineExceeded,
    Dropped,
    Refused,
    Reply,
    Run,
    Unreachable,
    connect,
    http_call,
    parse_json,
    read_body,
    remaining,
    snippet,
)
from healthchecks.settings import UsageError, parse_args
from healthchecks.verdict import Verdict, read_json

PROMPT = "The capital city of France is"
TEMPERATURE = 0.7  # > 0 and no top-k/top-p/min-p: the plain multinomial path that trips on NaN
MAX_NEW_TOKENS = 8
STATE_SCHEMA = "bwstack.hc-state/1"
STARTUP_BYTES = 4 << 20  # the startup record is near the top of the log (rotated at every start)


# --- state --------------------------------------------------------------------------------------------------


def load_state(path: str) -> dict[str, Any]:
    """The state of earlier runs; a fresh state when missing or malformed."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA:
        return {"schema": STATE_SCHEMA, "healthy_once": False, "last_decode": None, "config_ok": None}
    return data


def save_state(path: str, state: dict[str, Any]) -> None:
    """Best effort: a healthcheck never fails because its state file cannot be written."""
    with contextlib.suppress(OSError):
        common.write_json_atomic(path, state)


# --- checks -------------------------------------------------------------------------------------------------


def check_liveness(run: Run) -> Unhealthy | None:
    """GET /health: None when alive, else the verdict (run_checks still consults the log)."""
    run.stage = "GET /health"
    healthy_once = bool(run.state.get("healthy_once"))
    try:
        reply = http_call(run, "GET", "/health")
    except Refused:
        if healthy_once:
            return Unhealthy(
                "crash", "connection refused after a healthy pass: the server process is gone", True
            )
        return Unhealthy(
            "starting", "connection refused: the server is not listening yet (loading)", gone=True
        )
    except Dropped as exc:
        return Unhealthy("crash", f"connection dropped: {exc}", gone=True)
    except Unreachable as exc:
        return Unhealthy("crash" if healthy_once else "starting", f"server unreachable: {exc}", gone=True)
    if reply.status == 200:
        return None
    if reply.status == 503:
        if healthy_once:
            stuck = in_flight_hang(run, "GET /health answered 503")
            if stuck is not None:
                return stuck
            return Unhealthy(
                "health_timeout",
                "GET /health answered 503 after a healthy pass (SGLang unhealthy or stopping)"
                + _in_flight_note(run),
            )
        return Unhealthy("starting", "GET /health answered 503: SGLang is still starting (warmup not done)")
    return http_failure(run, "GET /health", reply, rescan=False)


def _watch_record(run: Run) -> progress.Record | None:
    return progress.read_record(run.cfg.state_path + progress.SUFFIX) if run.cfg.state_path else None


def in_flight_hang(run: Run, what: str) -> Unhealthy | None:
    """``hang`` when requests are in flight and SGLang's token counters have not moved for the hang bound (the
    serve wrapper's watchdog record says so). While they are in flight and still, waits within the budget
    for the bound (the watchdog rewrites its record every second); None once they move, when nothing is in
    flight, without a fresh record, or when the budget runs out first."""
    while True:
        found = _watch_record(run)
        if found is None or not found.stalling:
            return None
        if found.reason is not None or found.stalled >= found.stall_after:
            reason = found.reason or progress.hang_verdict(found.in_flight, found.stalled).reason
            return Unhealthy("hang", f"{reason} ({what}; hang bound {found.stall_after:g} s)")
        left = run.deadline - time.monotonic()
        if left < 1.5 or left < found.stall_after - found.stalled:
            return None
        time.sleep(0.5)


def _in_flight_note(run: Run) -> str:
    """What the watchdog saw, for a verdict that is not (yet) ``hang``: "" when nothing is in flight."""
    found = _watch_record(run)
    if found is None or not found.stalling:
        return ""
    return (
        f"; {found.in_flight} requests in flight, no token for {found.stalled:.0f} s "
        f"(hang bound {found.stall_after:g} s)"
    )


def _call_json(run: Run, method: str, path: str, payload: Any = None) -> tuple[Reply, Any]:
    run.stage = f"{method} {path}"
    try:
        reply = http_call(run, method, path, payload)
    except Refused as exc:
        raise Unhealthy("crash", f"{exc}: connection refused (server went away)") from exc
    except (Dropped, Unreachable) as exc:
        raise root_cause_or(run, Unhealthy("crash", f"connection dropped: {exc}"), wait=True) from exc
    if reply.status != 200:
        return reply, None
    return reply, parse_json(reply, f"{method} {path}")


def fetch_server_info(run: Run) -> dict[str, Any]:
    """GET /server_info, or /get_server_info on servers without it."""
    reply, data = _call_json(run, "GET", "/server_info")
    path = "/server_info"
    if reply.status == 404:
        reply, data = _call_json(run, "GET", "/get_server_info")
        path = "/get_server_info"
    if reply.status != 200:
        raise http_failure(run, f"GET {path}", reply)
    if not isinstance(data, dict):
        raise Unhealthy("warmup_failed", f"GET {path}: expected a JSON object, got {type(data).__name__}")
    return data


def check_config(run: Run) -> str:
    """Compare --expect with /server_info; returns a short summary of the effective config."""
    info = fetch_server_info(run)
    problems = judging.compare_expect(run.cfg.expect, info)
    if problems:
        raise Unhealthy("backend_override", "; ".join(problems))
    return judging.config_summary(info)


def _generate(
    run: Run, payload: dict[str, Any], probe: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """POST /generate: (the answer, its meta_info, how it finished). A failed request, an answer without
    meta_info or an aborted request raises its verdict, named after ``probe`` (``passage``; None: the sampled
    decode); an abort's message goes through the failure catalog, and the log may name a root cause first."""
    what, who = (f"{probe} probe", f"{probe} probe") if probe else ("POST /generate", "request")
    reply, data = _call_json(run, "POST", "/generate", payload)
    if reply.status != 200:
        raise http_failure(run, f"POST /generate ({probe})" if probe else "POST /generate", reply)
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("meta_info"), dict):
        raise Unhealthy("warmup_failed", f"{what}: unexpected answer {snippet(json.dumps(data))!r}")
    meta: dict[str, Any] = data["meta_info"]
    kind, message = judging.finish(meta)
    if kind == "abort":
        found = signatures.classify_text(message)
        fallback = Unhealthy(found.cls if found else "warmup_failed", f"{who} aborted: {snippet(message)!r}")
        raise root_cause_or(run, fallback, wait=True)
    return data, meta, kind


def check_decode(run: Run) -> str:
    """A sampled decode with logprobs; returns a short summary."""
    payload = {
        "text": PROMPT,
        # ignore_eos: an early EOS is a legitimate sample, not an empty completion
        "sampling_params": {"temperature": TEMPERATURE, "max_new_tokens": MAX_NEW_TOKENS, "ignore_eos": True},
        "return_logprob": True,
    }
    data, meta, kind = _generate(run, payload)
    text = data.get("text")
    lowest = judging.check_logprobs(meta)
    degenerate = judging.degenerate_decode(meta["output_token_logprobs"])
    if degenerate:
        raise Unhealthy("garbage", degenerate)
    if not isinstance(text, str):
        raise Unhealthy("warmup_failed", "POST /generate: no text in the answer")
    tokens = len(meta["output_token_logprobs"])
    if not text.strip():
        raise Unhealthy("warmup_failed", f"empty completion ({tokens} tokens, finish {kind})")
    if run.cfg.expect_text is not None and run.cfg.expect_text not in text:
        raise Unhealthy("warmup_failed", f"completion lacks {run.cfg.expect_text!r}: got {snippet(text)!r}")
    return f"sampled decode ok ({tokens} tokens, finish {kind}, min logprob {lowest:.2f})"


# --- quality probe ------------------------------------------------------------------------------------------


def score_passage(run: Run) -> tuple[list[float], dict[str, Any]]:
    """One prefill of the passage; its prompt logprobs and the answer's meta_info."""
    _data, meta, _kind = _generate(run, judging.quality_payload(), "passage")
    return judging.passage_logprobs(meta), meta


def check_quality(run: Run) -> str:
    """The quality probe: score the reference passage, compare with the calibrated baseline."""
    run.stage = "POST /generate (passage)"
    values, _meta = score_passage(run)
    return judging.judge_passage(values, run.cfg.baseline, run.cfg.margin)


def context_length(run: Run) -> int | None:
    """The served context length (``max_model_len`` of GET /v1/models, 0.5.9 and 0.5.23); None if unknown."""
    with contextlib.suppress(Unhealthy, Refused, Dropped, Unreachable):
        reply, data = _call_json(run, "GET", "/v1/models")
        cards = data.get("data") if reply.status == 200 and isinstance(data, dict) else None
        if isinstance(cards, list) and cards and isinstance(cards[0], dict):
            value = cards[0].get("max_model_len")
            return value if isinstance(value, int) and value > 0 else None
    return None


def long_length(run: Run) -> int:
    """The long probe's length: the calibrated id's, else --long-len, else past the default window (both
    capped by the served context length)."""
    if run.cfg.long_baseline is not None:
        named = longprobe.length_of(run.cfg.long_baseline[0])
        if named is not None:
            return named
    context = context_length(run)
    if run.cfg.long_len:
        return min(run.cfg.long_len, context - 8) if context else run.cfg.long_len
    return longprobe.length_for(None, context)


def _stream_chunks(run: Run, path: str, payload: dict[str, Any], per_token: float) -> Iterator[Any]:
    """POST a streamed request; yields each ``data:`` chunk (a non-streamed JSON answer as one chunk). Every
    wait for the next chunk is bounded by ``per_token`` and the run's budget: :class:`TokenLate` when the
    per-token deadline passes first. A non-200 answer raises its failure verdict."""
    what = f"POST {path}"
    conn, prefix = connect(run)
    headers = {"Accept": "text/event-stream", "User-Agent": "bwstack-healthcheck"}
    headers["Content-Type"] = "application/json"
    if run.api_key:
        headers["Authorization"] = f"Bearer {run.api_key}"
    last = time.monotonic()
    try:
        conn.connect()
        sock = conn.sock
        conn.request("POST", prefix + path, body=json.dumps(payload).encode(), headers=headers)
        sock.settimeout(min(remaining(run), per_token))
        resp = conn.getresponse()
        if resp.status != 200 or "event-stream" not in (resp.getheader("Content-Type") or ""):
            reply = Reply(status=resp.status, reason=resp.reason, body=read_body(run, sock, resp, what))
            if reply.status != 200:
                raise http_failure(run, what, reply)
            yield parse_json(reply, what)
            return
        while True:
            sock.settimeout(min(remaining(run), per_token))
            line = resp.readline(MAX_BODY_BYTES)
            if not line:
                return
            last = time.monotonic()
            data = line.strip()
            if not data.startswith(b"data:"):
                continue
            data = data[5:].strip()
            if data == b"[DONE]":
                return
            try:
                yield json.loads(data)
            except ValueError as exc:
                raise Unhealthy("warmup_failed", f"{what}: non-JSON chunk: {snippet(data)!r}") from exc
    except ConnectionRefusedError as exc:
        raise Refused(what) from exc
    except TimeoutError as exc:
        raise TokenLate(time.monotonic() - last) from exc
    except (http.client.IncompleteRead, ConnectionError) as exc:
        raise Dropped(f"{what}: {type(exc).__name__}") from exc
    except http.client.HTTPException as exc:
        raise Unhealthy("warmup_failed", f"{what}: malformed HTTP response ({type(exc).__name__})") from exc
    except OSError as exc:
        raise Unreachable(f"{what}: {exc.strerror or type(exc).__name__}") from exc
    finally:
        conn.close()


class TokenLate(Exception):
    """A streamed request's next token did not come within its per-token deadline."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"no token for {waited:.0f} s")
        self.waited = waited


def score_long(run: Run, length: int) -> list[float]:
    """One prefill of the long prompt, streamed; its second copy's logprobs. The request carries a per-token
    deadline, the hang bound (``--hang-after``): no token within it (or within the run's budget) is ``hang``,
    a long request stuck while short ones flow."""
    what = f"long-context probe ({length} tokens)"
    run.stage = f"POST /generate (long context, {length} tokens)"
    payload = {**longprobe.payload(length), "stream": True}
    started = time.monotonic()
    final: Any = None
    try:
        for chunk in _stream_chunks(run, "/generate", payload, run.cfg.hang_after):
            if isinstance(chunk, dict) and chunk.get("error") is not None:
                raise _stream_error(run, what, chunk["error"])
            final = chunk
    except (TokenLate, DeadlineExceeded) as exc:
        waited = exc.waited if isinstance(exc, TokenLate) else time.monotonic() - started
        raise Unhealthy(
            "hang",
            f"{what}: 1 request in flight, no token for {waited:.0f} s (hang bound {run.cfg.hang_after:g} s)",
        ) from None
    except (Refused, Dropped, Unreachable) as exc:
        raise root_cause_or(run, Unhealthy("crash", f"{what}: {exc}"), wait=True) from exc
    if isinstance(final, list) and final:
        final = final[0]
    if not isinstance(final, dict) or not isinstance(final.get("meta_info"), dict):
        raise Unhealthy("warmup_failed", f"{what}: unexpected answer {snippet(json.dumps(final))!r}")
    return longprobe.scores(final["meta_info"])


def _stream_error(run: Run, what: str, error: Any) -> Unhealthy:
    """An error chunk in a streamed answer (SGLang sends ``{"error": {"message": ...}}``): its text goes
    through the failure catalog, so a CUDA fault names its class."""
    text = error.get("message") if isinstance(error, dict) else error
    text = " ".join(str(text).split())
    match = signatures.classify_text(text)
    cls = match.cls if match is not None and match.cls not in ("healthy", "starting") else "warmup_failed"
    return Unhealthy(cls, f"{what}: error in the stream: {snippet(common.redact(text, SECRETS))}")


def check_long(run: Run) -> str:
    """The long-context probe, judged against its calibrated baseline."""
    length = long_length(run)
    values = score_long(run, length)
    run.state["last_long"] = time.time()
    return longprobe.judge(values, length, run.cfg.long_baseline, run.cfg.margin)


def _long_due(run: Run) -> bool:
    """At start-up (before the first healthy pass), then every --long-every seconds; never on each probe."""
    last = run.state.get("last_long")
    if not run.state.get("healthy_once") or not isinstance(last, int | float):
        return True
    return time.time() - last >= run.cfg.long_every


def _decode_due(run: Run) -> bool:
    if run.cfg.mode == "full" or not run.state.get("healthy_once"):
        return True
    last = run.state.get("last_decode")
    return not isinstance(last, int | float) or time.time() - last >= run.cfg.decode_every


def startup_look(run: Run) -> Unhealthy | None:
    """--expect against the server log's own startup record (healthchecks/startup.py): a cheap first look
    that works before /server_info answers and when it never does. Re-read until the record is seen."""
    if not run.cfg.expect:
        return None
    expect_key = json.dumps(run.cfg.expect, sort_keys=True)
    try:
        inode = os.stat(run.cfg.log).st_ino
    except OSError:
        return None
    if run.state.get("startup_ok") == [inode, expect_key]:
        return None
    try:
        parsed = startup.read_file(run.cfg.log, max_bytes=STARTUP_BYTES)
    except OSError:
        return None
    problems = [e["message"] for e in startup.compare(parsed, run.cfg.expect) if e["kind"] == "mismatch"]
    if problems:
        return Unhealthy("backend_override", "; ".join(problems) + " in the server log")
    if parsed.server_args is not None:
        run.state["startup_ok"] = [inode, expect_key]
    return None


def _stopped_verdict(run: Run) -> Unhealthy | None:
    """The verdict the serve wrapper's fail-fast stopped the server on (its record beside the state file):
    repeated while the server is gone, so Docker's health log names the class the readiness probe found."""
    found = Verdict.from_record(read_json(run.cfg.state_path + common.STOPPED_SUFFIX))
    if found is None or found[0].cls not in signatures.CLASSES or found[0].cls in ("healthy", "starting"):
        return None
    return Unhealthy(found[0].cls, f"{found[0].reason} (fail-fast stopped the server on this verdict)")


def run_checks(run: Run) -> str:
    """All checks in order; returns the healthy summary or raises Unhealthy."""
    stopped = _stopped_verdict(run)
    if stopped is not None:
        raise stopped
    hang = progress.hang_from_record(run.cfg.state_path + progress.SUFFIX)
    if hang is not None:
        raise Unhealthy("hang", f"{hang} (the serve wrapper's watchdog over SGLang's /metrics counters)")
    run.stage = "log scan"
    match = scan_log(run).result(strong_only=True)
    if match is not None and match.cls not in signatures.NOT_FATAL_WHILE_ALIVE:
        raise log_verdict(match)
    early = startup_look(run)
    if early is not None:
        raise early
    dead = check_liveness(run)
    if dead is not None:
        raise root_cause_or(run, dead)  # the log may have just said why
    parts = []
    expect_key = json.dumps(run.cfg.expect, sort_keys=True)
    if run.cfg.mode == "full" or run.state.get("config_ok") != expect_key:
        parts.append(check_config(run))
        run.state["config_ok"] = expect_key
    if _decode_due(run):
        run.stage = "POST /generate"
        parts.insert(0, check_decode(run))
        parts.insert(1, check_quality(run))
        run.state["last_decode"] = time.time()
    if _long_due(run):
        parts.insert(2, check_long(run))
    else:
        age = time.time() - float(run.state["last_decode"])
        parts.insert(0, f"alive, last sampled decode {age:.0f}s ago")
    run.state["healthy_once"] = True
    return "; ".join(p for p in [*parts, *run.notes] if p)


# --- main ---------------------------------------------------------------------------------------------------


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise DeadlineExceeded()


def _verdict(run: Run) -> Verdict:
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, run.deadline - time.monotonic()))
            return Verdict("healthy", run_checks(run))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Unhealthy as exc:
        return Verdict(exc.cls, exc.reason)
    except DeadlineExceeded:
        found = _watch_record(run)
        if found is not None and found.reason is not None:
            return Verdict("hang", f"{found.reason} (no verdict within the budget at {run.stage})")
        return Verdict(
            "timeout",
            f"no verdict within the {run.cfg.timeout:g}s budget (at {run.stage})" + _in_flight_note(run),
        )
    except UsageError as exc:
        return Verdict("warmup_failed", f"healthcheck misconfigured: {exc}")
    except Exception as exc:  # never a traceback in the health log
        return Verdict("warmup_failed", f"healthcheck internal error: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    """Run the healthcheck; prints the verdict line and returns 0 (healthy) or 1 (unhealthy)."""
    started = time.monotonic()
    try:
        cfg = parse_args(argv)
    except UsageError as exc:
        print(Verdict("warmup_failed", f"healthcheck misconfigured: {exc}").line())
        return 1
    api_key = common.read_secret(cfg.api_key_file)
    SECRETS[:] = [api_key] if api_key else []
    run = Run(cfg=cfg, deadline=started + cfg.timeout, api_key=api_key, state=load_state(cfg.state_path))
    signal.signal(signal.SIGALRM, _on_alarm)
    found = _verdict(run)
    # every printed form of a secret is redacted before anything is cut or folded
    found = Verdict(found.cls, " ".join(common.redact(found.reason, SECRETS).split()))
    run.state["verdict"] = found.record(time.time())  # serve.py's fail-fast reads this
    # the failing streak, as Docker counts it against `retries` (serve.py's linger waits for it)
    streak = run.state.get("failing")
    streak = streak if isinstance(streak, int) and not isinstance(streak, bool) and streak >= 0 else 0
    run.state["failing"] = 0 if found.healthy else streak + 1
    save_state(cfg.state_path, run.state)
    print(found.line()[:2000], flush=True)
    return 0 if found.healthy else 1


if __name__ == "__main__":
    sys.exit(main())
