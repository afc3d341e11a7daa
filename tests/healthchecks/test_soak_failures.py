"""The soak's verdict on failed requests, end to end without Docker: a real HTTP server on 127.0.0.1 (stdlib
``http.server`` in a thread, a random port) streams ``POST /generate`` as SGLang does for short prompts and
fails past the 2048-token sparse window (an HTTP 500, SGLang's streamed error chunk or abort, a stream cut short); the real
``healthchecks/soak_client.py`` runs against it as a subprocess, with the argv the sweep builds
(:func:`bwstack.sweep.soak.measure`), and its record goes through the sweep's row logic and ``up --soak``.

The streamed shapes are SGLang's: ``data: {"error": {"message", "type", "code", "retryable"}}`` then
``data: [DONE]`` (0.5.23 http_server.py ``stream_results``; 0.5.9 sends ``{"error": {"message"}}``), a final
chunk whose ``meta_info.finish_reason`` is ``{"type": "abort", "message", "status_code"}`` (0.5.23
tokenizer_manager.py ``_handle_abort_finish_reason``), cumulative ``meta_info.output_token_logprobs``
triples and ``completion_tokens``, ``max_model_len`` in ``GET /v1/models``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from bwstack.ops import updown
from bwstack.stack import loader
from bwstack.stack.schema import SoakSettings
from bwstack.sweep import bench, soak
from bwstack.sweep.judge import Outcome
from healthchecks import soak_client
from support import sse
from support.stack import ROOT

CLIENT = ROOT / "healthchecks" / "soak_client.py"
#: the test server fails prompts longer than this (the default sparse window: short prompts fine, long broken)
FAIL_OVER = 2048
ILLEGAL = "CUDA error: an illegal memory access"


@dataclass
class Behaviour:
    """How the test server answers: ``ok`` always; the other modes fail prompts over FAIL_OVER tokens, or
    (``fail_every`` N) every N-th request whatever its length."""

    mode: str = "ok"
    fail_every: int = 0
    context: int = 8192
    lock: threading.Lock = field(default_factory=threading.Lock)
    served: int = 0
    lengths: list[int] = field(default_factory=list)


class _Handler(sse.StreamHandler):
    behaviour: Behaviour

    def do_GET(self) -> None:
        card = {
            "id": "tiny",
            "object": "model",
            "owned_by": "sglang",
            "max_model_len": self.behaviour.context,
        }
        self._json(200, {"object": "list", "data": [card]})

    def _json(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        length = len(body["input_ids"])
        with self.behaviour.lock:
            index = self.behaviour.served
            self.behaviour.served += 1
            self.behaviour.lengths.append(length)
        mode, every = self.behaviour.mode, self.behaviour.fail_every
        failing = (every and index % every == every - 1) or (mode != "ok" and length > FAIL_OVER)
        if failing and (mode == "http500" or every):
            # what uvicorn answers to an unhandled exception in the app
            payload = b"Internal Server Error"
            self.send_response(500)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.start_stream()
        try:
            self._stream(int(body["sampling_params"]["max_new_tokens"]), failing, mode)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _stream(self, want: int, failing: bool, mode: str) -> None:
        entries: list[list[Any]] = []
        for count in range(1, want + 1):
            entries.append([-0.2 - (count * 37 % 11) / 5, 16 + count * 7 % 200, None])
            if failing and count == 2:
                if mode == "error_chunk":  # 0.5.23's shape
                    error = {
                        "message": ILLEGAL,
                        "type": "invalid_request_error",
                        "code": 400,
                        "retryable": False,
                    }
                    self.event({"error": error})
                    break
                if mode == "error_text":  # a plain string
                    self.event({"error": ILLEGAL})
                    break
                if mode == "abort":
                    reason = {"type": "abort", "message": "CUDA out of memory. Tried to allocate 2.00 GiB",
                              "status_code": 500}  # fmt: skip
                    self.event({"text": "", "meta_info": {"finish_reason": reason, "completion_tokens": 2}})
                    break
                if mode == "reset":  # the connection is reset mid-stream (RST)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if mode == "cut":
                    self.close_connection = True  # the connection closes mid-stream: no [DONE], no last chunk
                    return
                if mode == "short":
                    break  # [DONE] without a finished chunk
            finish = {"type": "length", "length": want} if count == want else None
            meta = {
                "finish_reason": finish,
                "completion_tokens": count,
                "output_token_logprobs": list(entries),
            }
            self.event({"text": "x" * count, "output_ids": [e[1] for e in entries], "meta_info": meta})
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")


@contextmanager
def serving(behaviour: Behaviour) -> Iterator[int]:
    """The test server on a random port of 127.0.0.1; yields the port."""
    with sse.serving(type("Handler", (_Handler,), {"behaviour": behaviour})) as port:
        yield port


def local(argv: Sequence[str]) -> list[str]:
    """The sweep's ``docker exec CONTAINER python3 <image path>/soak_client.py ...`` as a local command: this
    interpreter, this checkout's client, the same arguments."""
    assert list(argv[:2]) == ["docker", "exec"] and argv[3:5] == ["python3", soak.CLIENT], argv
    return [sys.executable, str(CLIENT), *argv[5:]]


def soaked(behaviour: Behaviour, settings: SoakSettings, seconds: float = 2.0) -> tuple[dict[str, Any], int]:
    """The sweep's soak step (the argv :func:`soak.measure` builds, the real client as a subprocess) against
    the test server: the row's record and the client's exit status."""
    codes: list[int] = []

    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        done = bench.run_host(local(argv), timeout)
        codes.append(done.returncode)
        return done

    with serving(behaviour) as port:
        record = soak.measure(settings, "c0ffee", port=port, seconds=seconds, api_key_file=None, run=run)
    return record, codes[0]


SETTINGS = SoakSettings(concurrency=2, lengths=[64, 2304], output_len=8, stall_after_s=10, window_s=1)
HEALTHY = Outcome("healthy", "healthcheck", "healthy: sampled decode ok")


def _bucket(record: dict[str, Any], length: int) -> dict[str, Any]:
    return next(b for b in record["buckets"] if b["length"] == length)


@pytest.mark.parametrize(
    ("mode", "cls", "says"),
    [
        ("http500", "warmup_failed", "HTTP 500 Internal Server Error: Internal Server Error"),
        ("error_chunk", "illegal_memory", f"error in the stream: {ILLEGAL}"),
        ("error_text", "illegal_memory", f"error in the stream: {ILLEGAL}"),
        ("abort", "oom", "request aborted in the stream: CUDA out of memory"),
        ("reset", "warmup_failed", "the request failed after 1 tokens: ConnectionResetError [Errno 104]"),
        ("cut", "warmup_failed", "the stream closed before [DONE] after 1 of 8 tokens"),
        ("short", "warmup_failed", "the stream ended ([DONE]) without a finished chunk after 1 of 8 tokens"),
    ],
)
def test_a_server_failing_at_length_is_not_ok_and_its_row_not_healthy(mode: str, cls: str, says: str) -> None:
    record, code = soaked(Behaviour(mode), SETTINGS)
    assert code == 1
    assert record["verdict"] == cls, record
    assert record["reason"].startswith(
        f"{record['failed']} of {record['failed'] + record['requests']} requests"
    )
    assert "at 2304 tokens" in record["reason"] and says in record["reason"], record["reason"]
    short, long = _bucket(record, 64), _bucket(record, 2304)
    assert short["requests"] > 0 and short["failed"] == 0 and short["itl_ms_p50"] is not None
    assert long["requests"] == 0 and long["failed"] > 0
    assert record["failed"] == long["failed"] and record["requests"] == short["requests"]
    assert f"| 2304 | 0 | {long['failed']} |" in "\n".join(soak.bucket_table(record))  # the matrix's table
    row = soak.row_verdict(HEALTHY, record)
    assert row.cls == cls and row.decided_by == "soak" and row.reason == f"soak: {record['reason']}"
    assert soak.words(record).startswith(f"{cls}: ")


def test_a_healthy_server_is_ok_with_figures_per_length() -> None:
    behaviour = Behaviour("ok")
    record, code = soaked(behaviour, SETTINGS)
    assert code == 0 and record["verdict"] == "ok" and record["failed"] == 0, record
    for length in (64, 2304):
        bucket = _bucket(record, length)
        assert bucket["requests"] > 0 and bucket["failed"] == 0 and bucket["tokens"] == 8 * bucket["requests"]
        assert 0 <= bucket["itl_ms_p50"] <= bucket["itl_ms_p99"]
    assert sorted(set(behaviour.lengths)) == [64, 2304]
    assert soak.row_verdict(HEALTHY, record) is HEALTHY


def test_one_failure_in_a_thousand_stays_ok_one_in_twenty_does_not() -> None:
    rare = Behaviour("ok", fail_every=1000)
    record, code = soaked(rare, SETTINGS, seconds=5.0)
    tried = record["requests"] + record["failed"]
    assert tried >= 1000 and record["failed"] == tried // 1000 >= 1, record  # the server did fail some
    assert code == 0 and record["verdict"] == "ok"
    assert f"{record['requests']} req ({record['failed']} failed)" in soak.words(record)
    often, code = soaked(Behaviour("ok", fail_every=20), SETTINGS)
    tried = often["requests"] + often["failed"]
    assert often["failed"] == tried // 20 and tried >= 40, often
    assert code == 1 and often["verdict"] == "warmup_failed"
    assert soak.row_verdict(HEALTHY, often).cls == "warmup_failed"


def _with_bucket(
    completed: int, failed: int, error: str = "HTTP 500 Internal Server Error: x"
) -> soak_client.Soak:
    state = soak_client.Soak(deadline=0.0, stall_after=1.0)
    state.buckets = {64: soak_client.Bucket(64, completed=completed)}
    for _ in range(failed):
        state.fail(64, error)
    return state


def test_the_threshold_is_more_than_two_percent() -> None:
    assert soak_client.failure_verdict(_with_bucket(98, 2)) is None  # 2 of 100: at the threshold
    found = soak_client.failure_verdict(_with_bucket(97, 3))
    assert found is not None and found[0] == "warmup_failed"
    assert found[1] == (
        "3 of 100 requests failed (more than 2%); at 64 tokens 3 of 100: HTTP 500 Internal Server Error: x"
    )
    assert soak_client.failure_verdict(_with_bucket(0, 1, f"error in the stream: {ILLEGAL}")) == (
        "illegal_memory",
        f"1 of 1 requests failed (more than 2%); at 64 tokens 1 of 1: error in the stream: {ILLEGAL}",
    )


def test_error_texts_are_redacted_and_capped() -> None:
    state = soak_client.Soak(deadline=0.0, stall_after=1.0, secrets=["sk-secret-key"])
    state.fail(64, "HTTP 401: bad key sk-secret-key " + "y" * 5000)
    kept = state.buckets[64].errors[0]
    assert "sk-secret" not in kept and "***" in kept and len(kept) == soak_client.ERROR_TEXT
    assert len(state.errors[0]) == soak_client.SHOWN_TEXT
    found = soak_client.failure_verdict(state)
    assert found is not None and len(found[1]) < 400 and found[1].endswith("...")


def test_lengths_are_capped_by_the_served_context() -> None:
    behaviour = Behaviour("ok", context=1024)
    record, code = soaked(behaviour, SETTINGS, seconds=1.0)
    assert code == 0 and record["context_length"] == 1024
    assert record["lengths"] == [64, 1016] and record["lengths_asked"] == [64, 2304]
    assert max(behaviour.lengths) == 1016
    assert soak_client.capped([3000, 2304, 64], 2048, 8) == [2040, 64]
    assert soak_client.capped([64, 2304], None, 8) == [64, 2304]


def test_up_soak_exits_1_when_the_soak_fails_at_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bwstack up --soak``'s step after health (updown.soak_service), its subprocess and progress run real,
    the shipped CPU profile's soak settings, only the port and ``docker exec`` pointed at the test server."""
    stack = loader.load_stack(ROOT / "profiles.cpu.yaml")
    monkeypatch.setattr(updown, "container_id", lambda project, service: "c0ffee")
    monkeypatch.setattr(updown, "inspect", lambda cid: {"State": {"Status": "running"}})
    monkeypatch.setattr(
        bench, "exec_argv", lambda container, argv: local(["docker", "exec", container, *argv])
    )
    lengths = soak.for_profile(stack, "cpu-torch-native").lengths
    assert lengths and min(lengths) < FAIL_OVER < max(lengths)  # the shipped soak crosses the window
    out = io.StringIO()
    with serving(Behaviour("error_chunk")) as port:
        stack = dataclasses.replace(stack, settings=stack.settings.model_copy(update={"port": port}))
        code = updown.soak_service(stack, None, "cpu-torch-native", 2, out)  # type: ignore[arg-type]
    assert code == updown.EXIT_SOAK_FAILED == 1
    verdict_line = out.getvalue().splitlines()[-2 if "next to try" in out.getvalue() else -1]
    assert verdict_line.startswith("bwstack: soak verdict: illegal_memory: "), out.getvalue()
    assert f"error in the stream: {ILLEGAL}" in verdict_line


def test_a_stream_whose_requests_fail_backs_off_instead_of_spinning() -> None:
    """A server that accepts and hangs up at once: each of the client's streams waits 50 ms, doubling to 1 s,
    between failed requests (about 7 tries in 3 s; a loop without back-off makes thousands)."""
    accepted = [0]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted[0] += 1
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        done = subprocess.run(
            [sys.executable, str(CLIENT), "--url", f"http://127.0.0.1:{server.getsockname()[1]}", "--duration",
             "3", "--concurrency", "1", "--lengths", "8", "--output-len", "4", "--stall-after", "5"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        stop.set()
        thread.join()
        server.close()
    assert done.returncode == 1, done.stdout + done.stderr
    assert 3 <= accepted[0] <= 12, accepted[0]
