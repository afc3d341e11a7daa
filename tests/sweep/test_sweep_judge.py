"""The sweep's verdict state machine, driven by recorded event/log/health sequences (no Docker).

Times are explicit numbers, never the wall clock: each sequence is a list of (time, event) pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from bwstack import classify
from bwstack.sweep.judge import Event, Exited, HealthChange, Judge, LogEnd, LogLine, Probe
from bwstack.sweep.streams import split_lines
from healthchecks import signatures
from support.stack import TESTS

LOGS = TESTS / "healthchecks" / "logs"

STARTING = Probe(
    1, "unhealthy: starting: GET /health answered 503: SGLang is still starting (warmup not done)"
)
HEALTHY = Probe(0, "healthy: sampled decode ok (8 tokens, finish length, min logprob -2.07); tp_size=8")
NAN = Probe(1, "unhealthy: nan: output token 0 (id 0): logprob null (NaN/inf serialized as null)")
OVERRIDE = Probe(1, "unhealthy: backend_override: kv_cache_dtype: requested bf16, effective fp8_e4m3")
CRASH = Probe(1, "unhealthy: crash: connection refused after a healthy pass: the server process is gone")

ASSERT_TRACE = [
    "[2026-03-02 11:02:10] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16",
    "[2026-03-02 11:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 4956, in set_kv_buffer',
    "    assert not self.dsa_kv_cache_store_fp8",
    "AssertionError",
    "[2026-03-02 11:02:11] Received sigquit from a child process. It usually means the child failed.",
]


def run(
    events: Sequence[tuple[float, Event]],
    *,
    timeout: float = 100.0,
    until: float | None = None,
    **kwargs: Any,
) -> tuple[Judge, float | None]:
    """Feed a recorded sequence; returns the judge and the time it decided (None if it did not)."""
    judge = Judge(timeout, now=0.0, settle_s=5.0, drain_s=3.0, **kwargs)
    for at, event in events:
        if judge.poll(at):
            return judge, judge.decided_at
        judge.feed(event, at)
        if judge.poll(at):
            return judge, judge.decided_at
    if until is not None and judge.poll(until):
        return judge, judge.decided_at
    return judge, None


def lines(at: float, texts: Sequence[str], step: float = 0.01) -> list[tuple[float, Event]]:
    return [(at + i * step, LogLine(text)) for i, text in enumerate(texts)]


def test_healthy_after_the_first_full_pass() -> None:
    judge, decided = run(
        [
            *lines(0.5, ["[2026] Load weight begin", "[2026] The server is fired up and ready to roll!"]),
            (2.0, STARTING),
            (3.0, HEALTHY),
            (3.0, HealthChange("healthy")),
            (9.0, LogLine("never read: decided before")),
        ]
    )
    assert decided == 3.0
    verdict = judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("healthy", "healthcheck")
    assert verdict.reason.startswith("healthy: sampled decode ok")
    assert judge.health_evidence()["probes"] == 2


def test_starting_alone_decides_nothing_until_the_budget() -> None:
    judge, decided = run([(float(t), STARTING) for t in range(1, 30)], timeout=30.0, until=30.0)
    assert decided == 30.0
    verdict = judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("timeout", "timeout")
    assert "within 30 s" in verdict.reason and "still starting" in verdict.reason


def test_root_cause_after_the_generic_crash_line() -> None:
    """The first fatal line is generic (crash); the assertion below it is the root cause."""
    events = [*lines(1.0, ASSERT_TRACE[:2])]
    judge, decided = run(events)
    assert decided is None and judge.settle_at == pytest.approx(6.01)
    assert judge.fatal_log() is not None and judge.fatal_log().cls == "crash"  # type: ignore[union-attr]
    judge, decided = run([*lines(1.0, ASSERT_TRACE), (2.5, Exited(137)), (2.6, LogEnd())])
    assert decided == 2.6  # exited and the log drained: no need to wait for the settle window
    verdict = judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("assertion", "log")
    assert verdict.reason == "assert not self.dsa_kv_cache_store_fp8"
    evidence = judge.log_evidence()
    assert evidence is not None and evidence["line"] == 4 and "crash" in evidence["also"]
    assert [c["line"] for c in evidence["context"]] == [1, 2, 3, 4, 5, 6]
    assert evidence["source"]


def test_fatal_line_of_a_server_that_does_not_exit_settles() -> None:
    judge, decided = run([*lines(1.0, ASSERT_TRACE[:2]), (4.0, STARTING), (6.5, STARTING)])
    assert decided == 6.5  # settle_at = 1.01 + 5
    assert judge.verdict().cls == "crash"


def test_fatal_log_beats_a_healthy_health_status() -> None:
    nan_line = "Detected errors during sampling! NaN in the logits."
    judge, decided = run([(1.0, LogLine(nan_line)), (1.5, HealthChange("healthy")), (7.0, STARTING)])
    assert decided == 7.0
    assert (judge.verdict().cls, judge.verdict().decided_by) == ("nan", "log")


def test_health_timeout_line_is_no_verdict_while_the_server_lives() -> None:
    line = "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds."
    judge, decided = run([(1.0, LogLine(line)), (2.0, HEALTHY), (2.0, HealthChange("healthy"))])
    assert decided == 2.0 and judge.verdict().cls == "healthy"
    judge, decided = run([(1.0, LogLine(line)), (2.0, Exited(1)), (2.1, LogEnd())])
    assert decided == 2.1 and judge.verdict().cls == "health_timeout"


def test_nan_from_the_healthcheck_then_fail_fast_exit() -> None:
    judge, decided = run([(1.0, STARTING), (2.0, NAN), (2.5, Exited(1)), (2.6, LogEnd())])
    assert decided == 2.6
    verdict = judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("nan", "healthcheck")
    assert verdict.reason.startswith("unhealthy: nan:")


def test_repeated_fatal_probes_decide_without_an_exit() -> None:
    """An image without fail-fast keeps running; three equal verdicts (the stack's retries) decide."""
    judge, decided = run(
        [(1.0, STARTING), (2.0, OVERRIDE), (3.0, OVERRIDE), (4.0, OVERRIDE), (5.0, OVERRIDE)], confirm=3
    )
    assert decided == 4.0
    assert judge.verdict().cls == "backend_override"
    _, decided = run([(1.0, NAN), (2.0, CRASH), (3.0, NAN)], confirm=2)
    assert decided is None  # not the same class twice in a row


def test_first_failure_after_the_last_healthy_pass_is_the_cause() -> None:
    judge, decided = run(
        [(1.0, NAN), (2.0, CRASH), (3.0, CRASH), (4.0, Exited(137)), (4.0, LogEnd())], confirm=9
    )
    assert decided == 4.0 and judge.verdict().cls == "nan"
    judge, _ = run([(1.0, NAN), (2.0, HEALTHY), (3.0, CRASH), (4.0, Exited(137)), (4.0, LogEnd())], confirm=9)
    assert judge.verdict().cls == "crash"


def test_exit_without_any_class_is_a_crash_and_waits_for_the_log_to_drain() -> None:
    judge, decided = run([(1.0, STARTING), (2.0, Exited(2)), (4.0, LogLine("Killed"))], until=5.0)
    assert decided == 5.0  # 2.0 + drain 3.0: the log stream never reported its end
    verdict = judge.verdict()
    # issue 11: the shell's "Killed" line is itself crash evidence (a process killed by a signal), so the log
    # decides; it used to be a line without a signature, and the exit status decided
    assert (verdict.cls, verdict.decided_by) == ("crash", "log") and verdict.reason == "Killed"
    assert judge.log_tail() == ["Killed"]


def test_lines_arriving_after_the_exit_still_count() -> None:
    judge, decided = run([(1.0, Exited(1)), *lines(1.5, ASSERT_TRACE), (1.7, LogEnd())])
    assert decided == 1.7 and judge.verdict().cls == "assertion"


def test_oom_killed_exit() -> None:
    judge, decided = run([(1.0, Exited(137)), (1.1, LogEnd())])
    judge.oom_killed = True
    assert decided == 1.1
    assert (judge.verdict().cls, judge.verdict().decided_by) == ("oom", "exit")


def test_docker_unhealthy_while_starting_is_a_timeout() -> None:
    judge, decided = run([(1.0, STARTING), (2.0, HealthChange("unhealthy"))])
    assert decided == 2.0
    assert (judge.verdict().cls, judge.verdict().decided_by) == ("timeout", "unhealthy")


def test_nothing_is_taken_after_the_decision() -> None:
    judge, decided = run([(1.0, HEALTHY), (1.0, HealthChange("healthy"))])
    judge.feed(LogLine("Detected errors during sampling! NaN in the logits."), 2.0)
    assert decided == 1.0 and judge.verdict().cls == "healthy" and judge.line_count == 0


def test_wake_at_is_the_earlier_of_settle_and_budget() -> None:
    judge = Judge(50.0, now=10.0, settle_s=5.0)
    assert judge.wake_at() == 60.0
    judge.feed(LogLine("RuntimeError: CUDA error: an illegal memory access was encountered"), 12.0)
    assert judge.wake_at() == 17.0


@pytest.mark.parametrize(
    ("output", "cls"),
    [
        ("healthy: all good", "healthy"),
        ("some noise\nunhealthy: nan: logprob null\n", "nan"),
        ("unhealthy: backend_override: kv", "backend_override"),
        ("unhealthy: nonsense: x", None),
        ("Health check exceeded timeout (90s)", None),
        ("", None),
    ],
)
def test_probe_class(output: str, cls: str | None) -> None:
    assert classify.probe_class(output) == cls


def _class_of(name: str) -> str:
    stem = name.removesuffix(".log")
    return max((c for c in signatures.CLASSES if stem == c or stem.startswith(c + "_")), key=len)


@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.glob("*.log")))
def test_recorded_server_logs_end_in_their_class(log: str) -> None:
    """Real-shaped server logs (tests/healthchecks/logs) replayed line by line, then the process exits."""
    expected = _class_of(log)
    texts = (LOGS / log).read_text(encoding="utf-8").splitlines()
    events: list[tuple[float, Event]] = lines(1.0, texts, step=0.001)
    end = 1.0 + len(texts) * 0.001
    if expected == "healthy":
        events += [(end + 1, HEALTHY), (end + 1, HealthChange("healthy"))]
    else:
        events += [(end + 1, Exited(1)), (end + 1.1, LogEnd())]
    judge, decided = run(events, timeout=1e6)
    assert decided is not None
    verdict = judge.verdict()
    assert verdict.cls == expected, f"{log}: {verdict}"


def test_split_lines_cuts_at_newlines_and_carriage_returns() -> None:
    done, rest = split_lines("", "a\nb\r")
    assert (done, rest) == (["a", "b"], "")
    done, rest = split_lines("par", "tial\r\nnext")
    assert (done, rest) == (["partial"], "next")
    assert split_lines("x", "") == ([], "x")


def test_a_crash_logged_while_fail_fast_stops_the_server_is_no_cause() -> None:
    """Seen on real SGLang 0.5.23 on the CPU (cpu-intel-amx): the healthcheck read backend_override from the
    log, the wrapper stopped the loading server, and its scheduler logged a broken pipe on the way down."""
    stop_line = (
        "bwstack-serve: server stopped by fail-fast (exit status 143): unhealthy: backend_override: "
        "attention_backend: requested intel_amx (--expect), effective torch_native (line 13) in the server log"
    )
    events = [
        (
            1.0,
            Probe(
                1,
                "unhealthy: backend_override: attention_backend: requested intel_amx, effective torch_native",
            ),
        ),
        *lines(
            2.0,
            [
                "[2026-12-02 17:28:05] Scheduler hit an exception: Traceback (most recent call last):",
                "BrokenPipeError: [Errno 32] Broken pipe",
                stop_line,
            ],
        ),
        (3.0, Exited(143)),
        (3.1, LogEnd()),
    ]
    judge, decided = run(events)
    assert decided is not None
    verdict = judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("backend_override", "healthcheck")
    assert verdict.reason.startswith("server stopped by fail-fast")


def test_a_specific_root_cause_in_the_log_still_beats_the_fail_fast_class() -> None:
    events = [
        (1.0, NAN),
        *lines(2.0, ["RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"]),
        *lines(
            2.5,
            ["bwstack-serve: server stopped by fail-fast (exit status 143): unhealthy: nan: logprob null"],
        ),
        (3.0, Exited(143)),
        (3.1, LogEnd()),
    ]
    judge, _ = run(events)
    assert (judge.verdict().cls, judge.verdict().decided_by) == ("nan", "log")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("sglang28038_gb10_gemma4_fused_moe_oor_short_wording.log", "shared_memory"),
        ("cutlass2819_sm120_arch_conditional_mma_assert.log", "unsupported_arch"),
        ("sglang3685_multinode_sigquit_logging_message.log", "crash"),
    ],
)
def test_fatal_evidence_settles_the_verdict_while_the_healthcheck_still_says_starting(
    name: str, cls: str
) -> None:
    """Issue 27: the judge reads the catalog's fatal evidence (real corpus excerpts that read `starting`
    before) and decides after the settle time, without a probe naming the class."""
    text = (TESTS / "healthchecks" / "corpus" / name).read_text(encoding="utf-8").splitlines()
    assert run([(0.5, STARTING), *lines(1.0, text)], until=5.5)[1] is None  # the settle time runs
    judge, at = run([(0.5, STARTING), *lines(1.0, text)], until=6.5)
    assert at == 6.5
    assert judge.verdict().cls == cls and judge.verdict().decided_by == "log"
