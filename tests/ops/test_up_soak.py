"""``bwstack up --soak SECONDS`` without Docker: its refusals (exit 2, one line), and the step after health:
the sweep's soak record printed as figures and a verdict line, exit 1 unless the verdict is ``ok``.

The real run (the v0.5.23-cpu image, a soak on a healthy service, a frozen scheduler) is
tests/sweep/test_cpu_stack.py.
"""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from bwstack import cli
from bwstack.ops import updown
from bwstack.stack import loader, schema
from bwstack.sweep import soak
from support.stack import ROOT

OK = {
    "verdict": "ok", "reason": "", "duration_s": 20.04, "requests": 31, "failed": 0, "tokens": 992,
    "itl_ms_p50": 61.2, "itl_ms_p99": 240.7, "stalls": 0,
    "worst_window": {"start_s": 4.0, "tokens": 40, "itl_ms_p99": 240.7},
}  # fmt: skip
HANG = {**OK, "verdict": "hang", "reason": "2 requests in flight, no token for 10 s", "requests": 3}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--soak", "30", "--dry-run"],
            "--soak runs load against the started service; --dry-run starts nothing",
        ),
        (["--soak", "0"], "--soak wants seconds, more than 0 and at most 86400, got 0"),
        (["--soak", "-5"], "got -5"),
        (["--soak", "nan"], "got nan"),
        (["--soak", "90000"], "got 90000"),
        (["--soak", "10", "--no-wait"], "--soak needs a healthy service"),
    ],
)
def test_bad_soak_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "-f", str(ROOT / "profiles.cpu.yaml"), "up", "cpu-torch-native",
         *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


def test_up_help_names_soak_and_its_exit_status() -> None:
    text = " ".join(CliRunner().invoke(cli.main, ["up", "--help"]).output.split())
    assert "--soak SECONDS" in text
    assert "Exit 0 when the verdict is ok, 1 on hang, nan, garbage, failed requests or no result" in text


@pytest.fixture()
def shipped_cpu() -> schema.Stack:
    return loader.load_stack(ROOT / "profiles.cpu.yaml")


def _soaked(
    monkeypatch: pytest.MonkeyPatch, stack: schema.Stack, record: dict[str, Any]
) -> tuple[int, str, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def measure(settings: schema.SoakSettings, container: str, **kwargs: Any) -> dict[str, Any]:
        seen.update(settings=settings, container=container, **kwargs)
        return dict(record)

    monkeypatch.setattr(updown, "container_id", lambda project, service: "c0ffee")
    monkeypatch.setattr(soak, "measure", measure)
    out = io.StringIO()
    code = updown.soak_service(stack, None, "cpu-torch-native", 20, out)  # type: ignore[arg-type]
    return code, out.getvalue(), seen


def test_an_ok_soak_prints_figures_and_the_verdict_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, shipped_cpu: schema.Stack
) -> None:
    code, out, seen = _soaked(monkeypatch, shipped_cpu, OK)
    assert code == 0
    assert (
        seen["container"] == "c0ffee" and seen["seconds"] == 20 and seen["port"] == shipped_cpu.settings.port
    )
    # stack.soak with its stall bound resolved to the profile's derived hang bound and its lengths to the
    # default window's (the shipped file sets neither)
    assert shipped_cpu.settings.soak.stall_after_s is None and seen["api_key_file"] is None
    resolved = {"stall_after_s": 30.0, "lengths": [1024, 2304]}
    assert seen["settings"] == shipped_cpu.settings.soak.model_copy(update=resolved)
    lines = out.splitlines()
    assert lines[0] == (
        "bwstack: cpu-torch-native: soaking for 20 s (2 streams, prompts of 1024,2304 tokens, 32 sampled tokens "
        "each, no token for 30 s = hang)"
    )
    assert lines[1:] == [
        "bwstack: soak figures: 31 requests, 992 tokens, ITL p50 61 / p99 241 ms, 0 stalls, worst window @4.0 s: "
        "p99 241 ms, 40 tokens, 20.04 s",
        "bwstack: soak verdict: ok",
    ]


def test_a_hang_prints_its_verdict_line_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, shipped_cpu: schema.Stack
) -> None:
    code, out, _seen = _soaked(monkeypatch, shipped_cpu, HANG)
    assert code == updown.EXIT_SOAK_FAILED == 1
    assert "bwstack: soak verdict: hang: 2 requests in flight, no token for 10 s" in out.splitlines()
    assert "bwstack: soak figures: 3 requests, 992 tokens" in out
    assert "next to try: " in out


@pytest.mark.parametrize(
    ("record", "line"),
    [
        ({"verdict": "nan", "reason": "soak: output token 3 (id [5]) logprob nan"},
         "soak verdict: nan: soak: output token 3 (id [5]) logprob nan"),
        ({"verdict": "error", "reason": "the soak client printed no result (exit 124): timed out"},
         "soak verdict: error: the soak client printed no result (exit 124): timed out"),
    ],
)  # fmt: skip
def test_bad_logprobs_or_no_result_exit_1(
    monkeypatch: pytest.MonkeyPatch, shipped_cpu: schema.Stack, record: dict[str, Any], line: str
) -> None:
    code, out, _seen = _soaked(monkeypatch, shipped_cpu, record)
    assert code == 1
    assert out.splitlines()[1] == f"bwstack: {line}"  # no figures without a measurement


def test_the_progress_run_ticks_while_the_client_runs_and_bounds_it() -> None:
    ticks: list[float] = []
    run = soak.with_progress(ticks.append, 0.2)
    slow = [sys.executable, "-c", 'import time; time.sleep(0.7); print(\'{"verdict": "ok"}\')']
    done = run(slow, 30)
    assert done.returncode == 0 and soak.parse(done.stdout) == {"verdict": "ok"}
    assert len(ticks) >= 2 and ticks == sorted(ticks) and ticks[0] >= 0.2
    stuck = run([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert stuck.returncode == 124 and "timed out after 0.5 s" in stuck.stderr
    missing = run(["/nonexistent/soak-client"], 5)
    assert missing.returncode == 127
