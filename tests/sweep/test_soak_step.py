"""The sweep's soak step (``--soak``): the client's argv, its JSON result into the row, the matrix words."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from bwstack.stack import loader, modelconfig
from bwstack.stack.schema import SoakSettings
from bwstack.sweep import soak
from bwstack.sweep.judge import HealthChange, Judge, LogLine, Outcome
from healthchecks import verdict
from support.stack import ROOT

RESULT = {
    "verdict": "ok", "reason": "", "duration_s": 20.1, "requests": 18, "failed": 0, "errors": [], "tokens": 860,
    "itl_ms_p50": 41.5, "itl_ms_p99": 180.2, "stalls": 0, "windows": 5,
    "worst_window": {"start_s": 4.0, "tokens": 120, "itl_ms_p99": 180.2},
}  # fmt: skip


def test_the_step_runs_the_client_in_the_container_and_keeps_its_record() -> None:
    seen: list[tuple[list[str], float]] = []

    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        seen.append((list(argv), timeout))
        return subprocess.CompletedProcess(list(argv), 0, "noise\n" + json.dumps(RESULT) + "\n", "")

    settings = SoakSettings(concurrency=3, lengths=[32, 2304], output_len=48, stall_after_s=10)
    record = soak.measure(settings, "c1", port=30000, seconds=20, api_key_file=None, run=run)
    argv, timeout = seen[0]
    assert argv[:4] == ["docker", "exec", "c1", "python3"]
    assert argv[argv.index("--lengths") + 1] == "32,2304" and argv[argv.index("--stall-after") + 1] == "10"
    assert argv[argv.index("--url") + 1] == "http://127.0.0.1:30000"
    assert timeout == 20 + 10 + soak.EXEC_GRACE_S
    assert record["tokens"] == 860 and record["settings"]["lengths"] == [32, 2304]
    words = soak.words(record)
    assert words.startswith("ok 20 s, 18 req, 860 tok, ITL p50 42 / p99 180 ms, 0 stalls"), words


def test_default_lengths_cross_the_models_window(tmp_path: Path) -> None:
    assert soak.default_lengths(None) == [1024, 2304]  # the default window, 2048
    assert soak.default_lengths(4096) == [2048, 4352]
    assert soak.lengths(SoakSettings()) == [1024, 2304]
    assert soak.lengths(SoakSettings(lengths=[32, 1500])) == [32, 1500]  # set lengths are kept
    glm = SimpleNamespace(model=SimpleNamespace(config="glm-5"), root=tmp_path)
    assert modelconfig.sparse_window(glm) == 2048  # type: ignore[arg-type]  # index_topk of the shipped GLM-5
    config = {"architectures": ["DeepseekV32ForCausalLM"], "index_topk": 4096}
    (tmp_path / "wide.json").write_text(json.dumps(config))
    wide = SimpleNamespace(model=SimpleNamespace(config="wide.json"), root=tmp_path)
    assert modelconfig.sparse_window(wide) == 4096  # type: ignore[arg-type]
    (tmp_path / "dense.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    dense = SimpleNamespace(model=SimpleNamespace(config="dense.json"), root=tmp_path)
    assert modelconfig.sparse_window(dense) is None  # type: ignore[arg-type]
    argv = soak.argv(SoakSettings(), port=30000, seconds=5, api_key_file=None)
    assert argv[argv.index("--lengths") + 1] == "1024,2304"


def test_the_shipped_stacks_soak_crosses_the_window() -> None:
    """The shipped stacks set no soak lengths: resolved per profile, they cross the model's window (GLM-5's
    index_topk 2048; the CPU stack's default window 2048)."""
    for name in ("profiles.yaml", "profiles.cpu.yaml"):
        stack = loader.load_stack(ROOT / name)
        assert stack.settings.soak.lengths is None, name
        profile = next(iter(stack.profiles))
        resolved = soak.for_profile(stack, profile)
        assert resolved.lengths == [1024, 2304] and resolved.stall_after_s is not None, name


def test_every_catalog_failure_class_fails_the_row() -> None:
    assert {"hang", "nan", "garbage", "illegal_memory", "oom", "warmup_failed", "crash"} <= soak.FAILING
    assert not {"healthy", "starting", "ok", "error", "failed"} & soak.FAILING
    healthy = Outcome("healthy", "healthcheck", "ok")
    assert soak.row_verdict(healthy, {"verdict": "error", "reason": "no result"}) is healthy
    assert soak.row_verdict(healthy, {"verdict": "oom", "reason": "r"}) == Outcome("oom", "soak", "soak: r")


def test_a_client_without_a_result_is_an_error_not_a_verdict() -> None:
    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 124, "", "timed out after 60 s")

    record = soak.measure(
        SoakSettings(), "c1", port=1, seconds=1, api_key_file="/run/secrets/api_key", run=run
    )
    assert record["verdict"] == "error" and "exit 124" in record["reason"]
    assert record["verdict"] not in soak.FAILING
    assert soak.words({"verdict": "hang", "reason": "3 requests in flight, no token for 11 s"}).startswith(
        "hang: 3"
    )


def test_rows_carry_short_and_long_scores_and_the_long_context_fact() -> None:
    from bwstack.sweep import report
    from bwstack.sweep.runner import probe_scores

    line = (
        "healthy: sampled decode ok (8 tokens, finish length, min logprob -7.16); passage gettysburg-1 score "
        "-0.021 nats/token over 63 tokens (baseline -0.020, margin 1); long context (2304 tokens) score -0.410 "
        "nats/token over 1152 tokens (baseline -0.400, margin 1); attention_backend=torch_native"
    )
    evidence = {"health": {"last": [{"output": "unhealthy: starting: x"}, {"output": line}]}}
    assert probe_scores(evidence) == {"short": -0.021, "long": -0.41, "long_tokens": 2304}
    # the serve wrapper's readiness probe (a full pass) reports both in the server log; Docker's light probes
    # that follow carry no scores, so the row takes them from the readiness line the judge read
    judge = Judge(60, now=0.0)
    judge.feed(LogLine("[2026-12-03 16:00:00] The server is fired up and ready to roll!"), 1.0)
    judge.feed(HealthChange("healthy"), 2.0)
    assert judge.poll(2.0)  # decided healthy before the readiness line arrived
    judge.feed(LogLine(verdict.marker(verdict.readiness_message(line))), 3.0)
    assert judge.readiness == line
    light = {"health": {"last": [{"output": "healthy: light probe ok"}]}}
    assert probe_scores({**light, "readiness": judge.readiness}) == {
        "short": -0.021, "long": -0.41, "long_tokens": 2304
    }  # fmt: skip
    assert probe_scores(light) == {"short": None, "long": None, "long_tokens": None}
    assert verdict.parse_readiness("bwstack-serve: something else") is None
    rows = {
        "dense": {"verdict": "healthy", "model": "m", "scores": {"short": -0.02, "long": -2.9, "long_tokens": 2304}},
        "sparse": {"verdict": "healthy", "model": "m", "scores": {"short": -0.02, "long": -0.4, "long_tokens": 2304}},
        "other": {"verdict": "nan", "model": "m", "scores": {"long": -9.0}},
    }  # fmt: skip
    facts = report.long_facts({"results": rows})  # type: ignore[arg-type]
    assert facts == {"dense": "healthy, long context -2.50 nats/token vs sparse"}
    assert report.score_words(rows["dense"]["scores"]) == "short -0.020, long (2304 tokens) -2.900 nats/token"
