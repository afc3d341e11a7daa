"""Busy and stuck: the stall clock over SGLang's /metrics counters, the watcher's record, the healthcheck.

The metric lines are in the shape real SGLang 0.5.23 served them (tests/sweep/test_cpu_stack.py runs the real
thing in the v0.5.23-cpu container: a SIGSTOPped scheduler under a soak).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_hc_warmup import assert_unhealthy, run_hc

from healthchecks import progress, soak_client, warmup
from support.hc_fakes import FakeSGLang, generate_body

MODEL = 'engine_type="unified",model_name="/m"'


def metrics(active: float, itl: float, metrics_active: float = 1.0) -> str:
    return "\n".join(
        [
            "# HELP sglang:http_requests_active Number of currently active HTTP requests",
            f'sglang:http_requests_active{{endpoint="/generate",method="POST"}} {active}',
            f'sglang:http_requests_active{{endpoint="/metrics",method="GET"}} {metrics_active}',
            f"sglang:inter_token_latency_seconds_count{{{MODEL}}} {itl}",
            f'sglang:time_to_first_token_seconds_count{{{MODEL},is_streaming="true"}} 2.0',
            f'sglang:num_running_reqs{{{MODEL},tp_rank="0"}} 1.0',
        ]
    )


def test_parse_counts_work_in_flight_but_not_the_scrape_itself() -> None:
    sample = progress.parse(metrics(active=2.0, itl=456.0))
    assert sample == progress.Sample(in_flight=2, progress=458.0)
    assert progress.parse("# nothing of SGLang here\nprocess_cpu_seconds_total 1.0\n") is None


def test_idle_is_never_stuck_and_progress_restarts_the_clock() -> None:
    tracker = progress.Tracker()
    idle = progress.Sample(in_flight=0, progress=10.0)
    assert [tracker.update(idle, t) for t in (0.0, 100.0, 1000.0)] == [0.0, 0.0, 0.0]
    moving = [progress.Sample(1, 10.0 + i) for i in range(5)]
    assert [tracker.update(s, 1000.0 + 20 * i) for i, s in enumerate(moving)] == [0.0] * 5  # slow, not stuck
    frozen = progress.Sample(1, 14.0)
    assert tracker.update(frozen, 1100.0) == 20.0
    assert tracker.update(frozen, 1130.0) == 50.0
    assert tracker.update(progress.Sample(0, 14.0), 1131.0) == 0.0  # the stuck request went away
    assert tracker.update(frozen, 1132.0) == 0.0  # a new one starts a new clock


def test_a_fresh_hang_record_is_a_verdict_a_stale_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "hc.json.progress"
    line = progress.hang_verdict(3, 12.4).line()
    assert line == "unhealthy: hang: 3 requests in flight, no token for 12 s"
    path.write_text(json.dumps(progress.record(3, 12.4, 10.0, 1.0, line)))
    assert progress.hang_from_record(str(path)) == "3 requests in flight, no token for 12 s"
    assert progress.hang_from_record(str(path), now=time.time() + 60) is None  # the watcher is gone
    path.write_text(json.dumps(progress.record(3, 2.0, 10.0, 1.0, None)))
    assert progress.hang_from_record(str(path)) is None
    path.write_text("{not json")
    assert progress.hang_from_record(str(path)) is None


def test_the_healthcheck_reports_the_watchers_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "hc.json"
    line = progress.hang_verdict(2, 31.0).line()
    (tmp_path / ("hc.json" + progress.SUFFIX)).write_text(
        json.dumps(progress.record(2, 31.0, 30.0, 1.0, line))
    )
    code = warmup.main(["--url", "http://127.0.0.1:9", "--state", str(state), "--log", str(tmp_path / "l")])
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 1
    assert out.startswith("unhealthy: hang: 2 requests in flight, no token for 31 s"), out


def test_soak_figures_over_windows() -> None:
    soak = soak_client.Soak(deadline=0.0, stall_after=4.0)
    soak.firsts = [0.5, 5.5]
    soak.stamps = [(1.0, 0.010), (2.0, 0.020), (6.0, 0.300), (7.0, 2.5)]
    out = soak_client.figures(soak, started=0.0, ended=10.0, window=5.0)
    assert out["tokens"] == 6 and out["windows"] == 2
    assert out["stalls"] == 1  # one gap of 2.5 s >= half the 4 s stall bound
    assert out["worst_window"]["start_s"] == 5.0 and out["worst_window"]["tokens"] == 3
    assert out["itl_ms_p50"] == pytest.approx(160.0)


def test_soak_flags_non_finite_streamed_logprobs() -> None:
    chunk = {"meta_info": {"output_token_logprobs": [[-1.0, 5, None], [None, 6, None]]}}
    assert soak_client.new_logprobs(chunk, 1) == [[None, 6, None]]
    with pytest.raises(SystemExit):
        soak_client.parse_args(["--duration", "0", "--concurrency", "1", "--lengths", "8", "--output-len", "4",
                                "--stall-after", "5"])  # fmt: skip


def _watcher(path: Path, in_flight: int, stalled_from: float, bound: float, stop: threading.Event) -> None:
    """Writes the record the serve wrapper's watchdog writes every second (progress.record), its stall clock
    running from ``stalled_from`` (0: the counters keep moving) and its hang line once past ``bound``."""
    started = time.monotonic()
    while not stop.wait(0.2):
        stalled = stalled_from + (time.monotonic() - started) if stalled_from else 0.0
        line = progress.hang_verdict(in_flight, stalled).line() if stalled >= bound else None
        record = progress.record(in_flight, stalled, bound, 1.0, line)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)


@pytest.mark.parametrize(
    ("in_flight", "stalled_from", "cls"),
    [(2, 1.0, "hang"), (2, 0.0, "health_timeout"), (0, 0.0, "health_timeout")],
    ids=["in-flight-and-still", "in-flight-and-moving", "nothing-in-flight"],
)
def test_health_503_after_a_healthy_pass_is_hang_only_with_requests_in_flight_and_no_token(
    tmp_path: Path, in_flight: int, stalled_from: float, cls: str
) -> None:
    """SGLang's /health answers 503 when nothing came back for 20 s. With requests in flight and the
    watchdog's stall clock running, the probe waits (within its budget) for the hang bound and says ``hang``
    with what SGLang said; with tokens flowing or nothing in flight it stays ``health_timeout``."""
    state = tmp_path / "state.json"
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url, "--state", str(state)).code == 0
        fake.set_health(503)
        stop = threading.Event()
        path = tmp_path / ("state.json" + progress.SUFFIX)
        writer = threading.Thread(
            target=_watcher, args=(path, in_flight, stalled_from, 3.0, stop), daemon=True
        )
        writer.start()
        try:
            time.sleep(0.5)
            result = run_hc(tmp_path, fake.url, "--state", str(state), timeout=8)
        finally:
            stop.set()
            writer.join()
    reason = assert_unhealthy(result, cls)
    if cls == "hang":
        assert reason.startswith("2 requests in flight, no token for "), reason
        assert "GET /health answered 503; hang bound 3 s" in reason, reason
        assert result.elapsed < 6, result.elapsed  # it waited for the bound, not for its whole budget
    else:
        assert "GET /health answered 503 after a healthy pass" in reason, reason
    assert json.loads(state.read_text())["failing"] == 1  # Docker's failing streak, for the linger


def _long_route(fake: FakeSGLang, behaviour: str) -> None:
    """/generate as the fake answers it, except the long-context probe (a prompt past 2000 tokens), which is
    streamed the way SGLang streams (``data: {...}`` events): ``stall`` sends the headers and then no token,
    ``error`` sends SGLang's error chunk, ``ok`` one chunk with the prompt logprobs and ``[DONE]``."""
    plain = generate_body()

    def route(h: Any) -> None:
        body = json.loads(h.server.fake.requests[-1][3] or b"{}")
        if len(body.get("input_ids") or []) < 2000:
            h.send_json(200, plain)
            return
        assert body.get("stream") is True  # the long probe streams
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        if behaviour == "stall":
            fake.released.wait(30)
            return
        if behaviour == "error":
            chunk: Any = {"error": {"message": "CUDA error: an illegal memory access was encountered"}}
        else:
            meta = {**plain["meta_info"], "input_token_logprobs": [[-0.2, 5, None]] * 1152}
            chunk = {**plain, "meta_info": meta}
        h.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")
        h.close_connection = True

    fake.routes[("POST", "/generate")] = route


@pytest.mark.parametrize(
    ("behaviour", "cls", "words"),
    [
        (
            "stall",
            "hang",
            "long-context probe (2304 tokens): 1 request in flight, no token for 2 s (hang bound 2 s)",
        ),
        (
            "error",
            "illegal_memory",
            "long-context probe (2304 tokens): error in the stream: CUDA error: an illegal",
        ),
        ("ok", "healthy", "long context (2304 tokens) score -0.200 nats/token over 1152 tokens"),
    ],
)
def test_the_long_probe_streams_with_a_per_token_deadline(
    tmp_path: Path, behaviour: str, cls: str, words: str
) -> None:
    """The long-context probe is one streamed request: no token within the hang bound (``--hang-after``;
    the rendered BWSTACK_HC_HANG_AFTER) is ``hang`` while the short probes answered; an error chunk is
    classified by the catalog; a streamed answer is scored like a whole one."""
    with FakeSGLang() as fake:
        _long_route(fake, behaviour)
        result = run_hc(tmp_path, fake.url, "--hang-after", "2", timeout=10)
    if cls == "healthy":
        assert result.code == 0 and words in result.last, result.last
        return
    assert words in assert_unhealthy(result, cls)
    if cls == "hang":
        assert 2 <= result.elapsed < 5, result.elapsed  # the per-token deadline, not the 10 s budget


def test_a_client_giving_up_is_not_progress() -> None:
    """SGLang's main process counts a client's disconnect in ``sglang:num_aborted_requests_total``
    (TokenizerManager.abort_request, 0.5.23) with the scheduler frozen: the stall clock keeps running."""
    aborted = f"sglang:num_aborted_requests_total{{{MODEL}}}"
    tracker = progress.Tracker()
    before = progress.parse(metrics(active=3.0, itl=456.0) + f"\n{aborted} 0.0")
    after = progress.parse(metrics(active=1.0, itl=456.0) + f"\n{aborted} 2.0")
    assert before is not None and after is not None
    assert tracker.update(before, 100.0) == 0.0
    assert tracker.update(after, 131.0) == 31.0
