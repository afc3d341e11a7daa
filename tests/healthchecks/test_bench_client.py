"""``healthchecks/bench_client.py`` run as the sweep runs it (a subprocess) against an in-process streaming
server that paces its tokens: the figures follow the pacing, the time limit is hard, failures are counted.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from healthchecks import bench_client
from support import sse
from support.stack import ROOT

CLIENT = ROOT / "healthchecks" / "bench_client.py"


@dataclass
class Pacing:
    """How the fake server answers: seconds before the first token, between tokens, status, tokens per chunk."""

    first_s: float = 0.05
    gap_s: float = 0.01
    status: int = 200
    per_chunk: int = 1
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(sse.StreamHandler):
    pacing: Pacing

    def do_POST(self) -> None:
        pacing = self.pacing
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with pacing.lock:
            pacing.bodies.append(body)
            pacing.auth.append(self.headers.get("Authorization"))
            pacing.in_flight += 1
            pacing.most_in_flight = max(pacing.most_in_flight, pacing.in_flight)
        try:
            self._answer(body)
        finally:
            with pacing.lock:
                pacing.in_flight -= 1

    def _answer(self, body: dict[str, Any]) -> None:
        pacing = self.pacing
        if pacing.status != 200:
            payload = b'{"error": "overloaded"}'
            self.send_response(pacing.status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.start_stream()
        want = int(body["sampling_params"]["max_new_tokens"])
        time.sleep(pacing.first_s)
        count = 0
        try:
            while count < want:
                if count:
                    time.sleep(pacing.gap_s * pacing.per_chunk)
                count = min(want, count + pacing.per_chunk)
                chunk = {"text": "x" * count, "meta_info": {"completion_tokens": count}}
                self.event(chunk)
            self.chunk(b"data: [DONE]\n\n")
            self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            return


@pytest.fixture()
def paced_server() -> Iterator[tuple[str, Pacing]]:
    pacing = Pacing()
    with sse.serving(type("Handler", (_Handler,), {"pacing": pacing})) as port:
        yield f"http://127.0.0.1:{port}", pacing


def run_client(
    url: str, *extra: str, limit: float = 30, **settings: int
) -> tuple[int, dict[str, Any], float]:
    values = {"num_prompts": 8, "input_len": 24, "output_len": 10, "concurrency": 4, **settings}
    argv = [sys.executable, str(CLIENT), "--url", url, "--time-limit", str(limit), *extra]
    for key, value in values.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=limit + 30, check=False)
    elapsed = time.monotonic() - started
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    return done.returncode, json.loads(lines[0]), elapsed


def test_figures_follow_the_servers_pacing(paced_server: tuple[str, Pacing]) -> None:
    url, pacing = paced_server
    pacing.first_s, pacing.gap_s = 0.08, 0.02
    code, out, _ = run_client(url, num_prompts=8, output_len=10, concurrency=4)
    assert code == 0, out
    assert (out["completed"], out["failed"], out["timed_out"]) == (8, 0, False)
    assert out["output_tokens"] == 80 and out["input_tokens"] == 8 * 24
    assert 70 <= out["ttft_ms_p50"] <= 400  # the first token waits first_s (plus a loaded machine)
    assert out["ttft_ms_p99"] >= out["ttft_ms_p50"]
    assert 15 <= out["itl_ms_p50"] <= 120
    # two waves of four requests, each ~0.08 + 9 * 0.02 s: the rate is tokens over that wall time
    assert out["output_tokens_per_s"] == pytest.approx(80 / out["duration_s"], rel=0.02)
    assert out["requests_per_s"] == pytest.approx(8 / out["duration_s"], rel=0.02)
    assert 0.45 <= out["duration_s"] <= 3.0
    # what was sent: one uncounted warmup request, then the 8; exact lengths, random ids inside every
    # byte-level vocabulary, greedy, ignore_eos, stream
    # concurrency 4: never more in flight; at least two at once (all four is the usual, but a loaded box can
    # finish one before the fourth is sent: that is pacing, not the cap)
    assert len(pacing.bodies) == 9 and 2 <= pacing.most_in_flight <= 4
    for body in pacing.bodies:
        ids = body["input_ids"]
        assert len(ids) == 24 and all(
            bench_client.TOKEN_ID_LOW <= i < bench_client.TOKEN_ID_HIGH for i in ids
        )
        assert body["stream"] is True
        assert body["sampling_params"] == {"max_new_tokens": 10, "ignore_eos": True, "temperature": 0.0}
    assert len({tuple(b["input_ids"]) for b in pacing.bodies}) == 9  # no two prompts share a cache entry


def test_chunks_of_several_tokens_spread_their_gap(paced_server: tuple[str, Pacing]) -> None:
    url, pacing = paced_server
    pacing.first_s, pacing.gap_s, pacing.per_chunk = 0.02, 0.03, 3  # a chunk every 0.09 s with 3 tokens
    code, out, _ = run_client(url, "--warmup", "0", num_prompts=2, output_len=12, concurrency=2)
    assert code == 0 and out["output_tokens"] == 24 and len(pacing.bodies) == 2
    assert 20 <= out["itl_ms_p50"] <= 90  # ~30 ms per token, not ~90 ms per chunk


def test_the_time_limit_is_hard_and_keeps_what_completed(paced_server: tuple[str, Pacing]) -> None:
    url, pacing = paced_server
    pacing.first_s, pacing.gap_s = 0.05, 0.1  # 1 s per request of 10 tokens
    code, out, elapsed = run_client(
        url, "--warmup", "0", limit=2.5, num_prompts=20, output_len=10, concurrency=2
    )
    assert out["timed_out"] is True and len(pacing.bodies) < 20
    assert elapsed < 2.5 + 2.0  # interpreter start and exit included
    assert 2 <= out["completed"] < 20 and code == 0
    assert out["output_tokens"] == out["completed"] * 10  # only whole requests count


def test_nothing_completed_is_exit_1_with_the_errors(paced_server: tuple[str, Pacing]) -> None:
    url, pacing = paced_server
    pacing.status = 503
    code, out, _ = run_client(url, num_prompts=3, concurrency=1)
    assert code == 1
    assert (out["completed"], out["failed"]) == (0, 3)
    assert out["output_tokens_per_s"] is None and out["ttft_ms_p50"] is None
    assert out["errors"][0].startswith("warmup: RuntimeError: HTTP 503")  # the warmup is not counted
    assert out["errors"][1].startswith("RuntimeError: HTTP 503")


def test_the_api_key_comes_from_its_file(paced_server: tuple[str, Pacing], tmp_path: Path) -> None:
    url, pacing = paced_server
    key = tmp_path / "api_key"
    key.write_text("s3cret\n")
    code, out, _ = run_client(url, "--api-key-file", str(key), num_prompts=1, concurrency=1)
    assert code == 0 and pacing.auth == ["Bearer s3cret"] * 2  # the warmup request and the counted one
    assert "s3cret" not in json.dumps(out)


def test_no_server_counts_as_failed_requests() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    code, out, elapsed = run_client(f"http://127.0.0.1:{port}", num_prompts=2, concurrency=2)
    assert code == 1 and (out["completed"], out["failed"]) == (0, 2)
    assert out["errors"][0].startswith("warmup: ConnectionRefusedError")
    assert out["errors"][1].startswith("ConnectionRefusedError")
    assert elapsed < 10


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([], 50, None), ([5.0], 99, 5.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([1.0, 2.0, 3.0], 99, 2.98)],
)
def test_percentile_interpolates_like_numpy(values: list[float], q: float, expected: float | None) -> None:
    found = bench_client.percentile(values, q)
    assert found == (None if expected is None else pytest.approx(expected))


def test_prompts_are_seeded() -> None:
    assert bench_client.prompts(3, 5, seed=1) == bench_client.prompts(3, 5, seed=1)
    assert bench_client.prompts(3, 5, seed=1) != bench_client.prompts(3, 5, seed=2)


@pytest.mark.parametrize("bad", [["--num-prompts", "0"], ["--time-limit", "0"], ["--url", "ftp://x"]])
def test_bad_arguments_exit_2(bad: list[str]) -> None:
    argv = [sys.executable, str(CLIENT), "--num-prompts", "1", "--input-len", "1", "--output-len", "1",
            "--concurrency", "1", "--time-limit", "5", *bad]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
