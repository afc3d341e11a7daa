"""Docker events as the engine sends them (recorded shapes), through the sweep's Runner, without Docker.

The queue is filled the way the event/log threads fill it; the container's health log grows the way
``docker inspect`` shows it after each healthcheck run.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from bwstack.host.dockercompose import Project
from bwstack.stack import schema
from bwstack.sweep.display import Display
from bwstack.sweep.judge import Judge
from bwstack.sweep.plan import Options
from bwstack.sweep.runner import Runner, Watch
from bwstack.sweep.streams import Streams, effective_from, health_probes

CID = "c0ffee" * 10 + "abcd"


def _event(action: str, cid: str = CID, **attributes: str) -> dict[str, Any]:
    return {
        "Type": "container",
        "Action": action,
        "id": cid,
        "status": action,
        "Actor": {"ID": cid, "Attributes": {"com.docker.compose.service": "x", **attributes}},
    }


def _health_entry(n: int, code: int, output: str) -> dict[str, Any]:
    return {
        "Start": f"2026-01-01T00:00:{n:02d}.1Z",
        "End": f"2026-01-01T00:00:{n:02d}.5Z",
        "ExitCode": code,
        "Output": output + "\n",
    }


class FakeApi:
    """``client.api.inspect_container``: the health log as it stood after each recorded healthcheck run."""

    def __init__(self, logs: list[list[dict[str, Any]]], final: dict[str, Any]) -> None:
        self.logs = logs
        self.final = final
        self.calls = 0

    def inspect_container(self, cid: str) -> dict[str, Any]:
        assert cid == CID
        log = self.logs[min(self.calls, len(self.logs) - 1)]
        self.calls += 1
        return {
            "State": {
                **self.final,
                "Health": {"Status": self.final.get("HealthStatus", "starting"), "Log": log},
            }
        }


class FakeClient:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


class FakeContainer:
    id = CID


class RecordedStreams(Streams):
    """A Streams whose queue holds a recorded session; helper fetches run inline."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        super().__init__(client=None)
        for item in items:
            self.queue.put(item)

    def fetch_later(self, what: str, func: Any) -> None:
        self.queue.put((what, func()))


class RecordedRunner(Runner):
    def __init__(self, stack: schema.Stack, client: FakeClient, info: dict[str, Any] | None) -> None:
        display = Display(Console(file=io.StringIO(), force_terminal=False), total=1)
        options = Options(fast=False, standin=True, timeout_s=60.0, keep=False, load_seconds=None)
        project = Project(files=(), name="p", workdir=Path("."))
        super().__init__(stack, project, client, options, display)
        self.info = info
        self.asked = 0

    def server_info(self) -> dict[str, Any] | None:
        self.asked += 1
        return self.info


def _watch(runner: RecordedRunner, items: list[tuple[str, Any]], name: str) -> Watch:
    judge = Judge(600.0, now=time.monotonic(), settle_s=5.0, drain_s=3.0, confirm=3)
    watch = Watch(name, judge, RecordedStreams(items), container=FakeContainer())
    runner.follow(watch)
    return watch


STARTING = "unhealthy: starting: connection refused: the server is not listening yet (loading)"
HEALTHY = (
    "healthy: sampled decode ok (8 tokens, finish length, min logprob -1.90); attention_backend=flashinfer"
)
INFO = {
    "attention_backend": "flashinfer",
    "nsa_decode_backend": "flashmla_kv",
    "kv_cache_dtype": "bfloat16",
    "moe_runner_backend": "flashinfer_cutlass",
    "fp4_gemm_backend": "flashinfer_cutlass",
    "tp_size": 8,
    "version": "0.5.9",
}


def test_healthy_session(stack: schema.Stack) -> None:
    logs = [[_health_entry(1, 1, STARTING)], [_health_entry(1, 1, STARTING), _health_entry(2, 0, HEALTHY)]]
    api = FakeApi(logs, {"Status": "running", "Running": True, "HealthStatus": "healthy"})
    runner = RecordedRunner(stack, FakeClient(api), INFO)
    items: list[tuple[str, Any]] = [
        ("docker", _event("create", "0ld" * 20)),  # an earlier container of the same service: ignored
        ("docker", _event("die", "0ld" * 20, exitCode="1")),
        ("docker", _event("create")),
        ("docker", _event("start")),
        ("log", "bwstack-serve: starting python3 -m sglang.launch_server --model-path nvidia/GLM-5-NVFP4"),
        ("docker", _event("exec_create: python3 /opt/bwstack/healthchecks/warmup.py")),
        ("docker", _event("exec_start: python3 /opt/bwstack/healthchecks/warmup.py")),
        ("docker", _event("exec_die", exitCode="1")),
        ("log", "The server is fired up and ready to roll!"),
        ("docker", _event("exec_die", exitCode="0")),
        ("docker", _event("health_status: healthy")),
        ("docker", _event("die", exitCode="0")),  # never read: decided before
    ]
    watch = _watch(runner, items, "dense-fi-bf16")
    verdict = watch.judge.verdict()
    assert (verdict.cls, verdict.decided_by) == ("healthy", "healthcheck")
    assert [p.output.strip() for p in watch.judge.probes] == [STARTING, HEALTHY]
    assert not watch.judge.exited
    evidence = runner.evidence(watch)
    assert watch.info == INFO and runner.asked == 1  # the answer queued behind the verdict is used
    assert evidence["effective"] == {
        "attention_backend": "flashinfer",
        "dsa_decode_backend": "flashmla_kv",
        "kv_cache_dtype": "bfloat16",
        "moe_runner_backend": "flashinfer_cutlass",
        "fp4_gemm_backend": "flashinfer_cutlass",
        "tp_size": "8",
    }
    assert evidence["server_version"] == "0.5.9"
    assert evidence["requested"]["kv_cache_dtype"] == "bf16" and evidence["requested"]["tp_size"] == "8"
    assert evidence["exit_code"] is None and evidence["health"]["status"] == "healthy"
    assert evidence["health"]["probes"] == 2  # the final inspect adds no duplicate


def test_crash_session_takes_the_exit_code_and_the_root_cause(stack: schema.Stack) -> None:
    logs = [[_health_entry(1, 1, STARTING)]]
    api = FakeApi(logs, {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": False})
    runner = RecordedRunner(stack, FakeClient(api), None)
    items: list[tuple[str, Any]] = [
        ("docker", _event("start")),
        ("docker", _event("exec_die", exitCode="1")),
        ("log", "[2026-03-02 11:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):"),
        ("log", "    assert not self.nsa_kv_cache_store_fp8"),
        ("log", "AssertionError"),
        ("docker", _event("die", exitCode="137")),
        ("log", "bwstack-serve: server crashed: exit status 137 (killed by SIGKILL)"),
        ("logend", None),
    ]
    watch = _watch(runner, items, "dense-triton-auto")
    verdict = watch.judge.verdict()
    assert (verdict.cls, verdict.decided_by, verdict.reason) == (
        "assertion",
        "log",
        "assert not self.nsa_kv_cache_store_fp8",
    )
    evidence = runner.evidence(watch)
    assert evidence["exit_code"] == 137 and evidence["oom_killed"] is False
    assert evidence["effective"] is None
    assert evidence["log_match"]["line"] == 2 and evidence["log_tail"][-1].startswith(
        "bwstack-serve: server crashed"
    )
    row = runner.row("dense-triton-auto", verdict, evidence, "2026-01-01T00:00:00Z", 3.21)
    assert row["match"] is True and row["fault"] == "assertion" and row["expect"] == "assertion"


def test_oom_event_marks_the_exit(stack: schema.Stack) -> None:
    api = FakeApi([[]], {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": True})
    runner = RecordedRunner(stack, FakeClient(api), None)
    items: list[tuple[str, Any]] = [
        ("docker", _event("oom")),
        ("docker", _event("die", exitCode="137")),
        ("logend", None),
    ]
    watch = _watch(runner, items, "dense-fi-bf16")
    assert (watch.judge.verdict().cls, watch.judge.verdict().decided_by) == ("oom", "exit")


def test_health_probes_and_effective_backends_parsing() -> None:
    attrs = {"State": {"Health": {"Log": [_health_entry(3, 0, HEALTHY)]}}}
    [(key, probe)] = health_probes(attrs)
    assert key.endswith(".5Z") and probe.verdict_class == "healthy" and probe.at == "2026-01-01 00:00:03"
    assert health_probes({"State": {}}) == []
    found = effective_from(
        {
            "attention_backend": "dsa",
            "dsa_prefill_backend": "flashinfer_sparse_mla",
            "nsa_prefill_backend": "old",
            "fp4_gemm_runner_backend": "cutlass",
            "fp4_gemm_backend": "x",
            "tp_size": 8,
            "moe_runner_backend": None,
        }
    )
    assert found == {
        "attention_backend": "dsa",
        "dsa_prefill_backend": "flashinfer_sparse_mla",
        "fp4_gemm_backend": "cutlass",
        "tp_size": "8",
    }
