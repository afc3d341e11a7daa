"""The healthcheck's wire protocol (``healthchecks/verdict.py``): the verdict line, the state record and the
serve wrapper's marker lines, with literal expectations (what Docker, the sweep and operators read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from healthchecks.verdict import Verdict

from healthchecks import verdict


@pytest.mark.parametrize(
    ("found", "line"),
    [
        (Verdict("healthy", "alive,  sampled decode ok\n(12 tokens)"), "healthy: alive, sampled decode ok (12 tokens)"),
        (Verdict("nan", "POST /generate: logprob null"), "unhealthy: nan: POST /generate: logprob null"),
        (Verdict("timeout", "no verdict within the 30s budget (at GET /health)"),
         "unhealthy: timeout: no verdict within the 30s budget (at GET /health)"),
    ],
)  # fmt: skip
def test_a_verdict_is_one_line_and_parses_back(found: Verdict, line: str) -> None:
    assert found.line() == line
    assert Verdict.parse(f"some noise\n{line}\n\n") == Verdict(found.cls, " ".join(found.reason.split()))


@pytest.mark.parametrize(
    "output",
    ["", "\n\n", "Traceback (most recent call last):", "unhealthy: Not A Class: x", "healthyish: no"],
)
def test_output_that_is_no_verdict_parses_to_none(output: str) -> None:
    assert Verdict.parse(output) is None


def test_a_reason_may_hold_colons() -> None:
    parsed = Verdict.parse("unhealthy: assertion: AssertionError: a: b")
    assert parsed == Verdict("assertion", "AssertionError: a: b")


def test_the_record_round_trips_and_is_bounded() -> None:
    record = Verdict("garbage", "x" * 900).record(12.5)
    assert record["class"] == "garbage" and record["time"] == 12.5
    assert (
        record["line"].startswith("unhealthy: garbage: xxx")
        and len(record["line"]) == verdict.RECORD_LINE_MAX
    )
    back = Verdict.from_record(record)
    assert back is not None and back[0].cls == "garbage" and back[1] == 12.5
    for bad in (None, [], {"class": "nan"}, {"class": "nan", "line": "l", "time": "soon"}):
        assert Verdict.from_record(bad) is None


def test_state_file_and_stopped_record(tmp_path: Path) -> None:
    state = tmp_path / "hc.json"
    assert verdict.state_verdict(str(state)) is None  # missing
    state.write_text("{not json")
    assert verdict.state_verdict(str(state)) is None  # malformed
    state.write_text(json.dumps({"schema": 1, "verdict": Verdict("oom", "CUDA out of memory").record(3.0)}))
    assert verdict.state_verdict(str(state)) == (Verdict("oom", "CUDA out of memory"), 3.0)
    stopped = tmp_path / "hc.json.stopped"
    verdict.write_record(str(stopped), Verdict("nan", "logprob null"), 4.0)
    assert json.loads(stopped.read_text()) == {
        "class": "nan",
        "line": "unhealthy: nan: logprob null",
        "time": 4.0,
    }
    assert not (tmp_path / "hc.json.stopped.tmp").exists()


def test_marker_lines() -> None:
    assert verdict.marker("starting python3 -m sglang.launch_server") == (
        "bwstack-serve: starting python3 -m sglang.launch_server"
    )
    line = verdict.marker(verdict.stopped_message(0, "unhealthy: nan: logprob null"))
    assert line == "bwstack-serve: server stopped by fail-fast (exit status 0): unhealthy: nan: logprob null"
    assert verdict.parse_stopped("svc-1  | " + line) == (
        Verdict("nan", "logprob null"),
        "server stopped by fail-fast (exit status 0): unhealthy: nan: logprob null",
    )
    assert verdict.parse_stopped("bwstack-serve: server crashed: exit status 1") is None
