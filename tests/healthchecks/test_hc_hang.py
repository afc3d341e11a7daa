"""Busy and stuck: the stall clock over SGLang's /metrics counters, the watcher's record, the healthcheck.

The metric lines are in the shape real SGLang 0.5.23 served them (tests/sweep/test_cpu_stack.py runs the real
thing in the v0.5.23-cpu container: a SIGSTOPped scheduler under a soak).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from healthchecks import progress, soak_client, warmup

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
    line = progress.hang_line(3, 12.4)
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
    line = progress.hang_line(2, 31.0)
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
