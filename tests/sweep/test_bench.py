"""The bench step's host side (:mod:`bwstack.sweep.bench`): which client runs, the ``docker exec`` argv it builds from
the stack's ``bench`` settings, how each client's output becomes a row's ``speed``, the host label, and the
words the report and ``bwstack list`` print. ``docker exec`` is a recording fake here; the real one runs in
tests/sweep/test_cpu_stack.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bwstack import launch
from bwstack.stack import loader, schema
from bwstack.sweep import bench
from healthchecks import imagelayout
from support.stack import ROOT

CPU_STACK = ROOT / "profiles.cpu.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "doctor"

#: the result line shape sglang.bench_serving 0.5.23 appends to --output-file (keys read in its
#: benchmark/serving.py; values of one made-up run)
SGLANG_LINE = {
    "backend": "sglang",
    "dataset_name": "random-ids",
    "duration": 12.5,
    "completed": 16,
    "total_output_tokens": 512,
    "request_throughput": 1.28,
    "output_throughput": 40.96,
    "median_ttft_ms": 210.0,
    "p99_ttft_ms": 480.5,
    "median_itl_ms": 31.25,
    "mean_itl_ms": 33.0,
}


@dataclass
class FakeDocker:
    """Answers ``docker exec`` argv lists by the command they run; records every call and its timeout."""

    imports: bool = False
    own: dict[str, object] = field(default_factory=dict)
    sglang: dict[str, object] = field(default_factory=dict)
    calls: list[tuple[list[str], float]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append((argv, timeout))
        assert argv[:2] == ["docker", "exec"], argv
        inner = argv[3:]
        if inner == bench.probe_argv():
            if self.imports:
                return subprocess.CompletedProcess(argv, 0, "", "")
            err = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'datasets'\n"
            return subprocess.CompletedProcess(argv, 1, "", err)
        if inner[:2] == ["python3", bench.OWN_CLIENT]:
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.own) + "\n", "")
        if inner[:1] == ["timeout"]:
            return subprocess.CompletedProcess(argv, 0, "============ Serving Benchmark Result ====\n", "")
        if inner[:1] == ["cat"]:
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.sglang) + "\n", "")
        if inner[:2] == ["rm", "-f"]:
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(f"unexpected docker exec: {argv}")

    def ran(self, predicate: Callable[[list[str]], bool]) -> list[list[str]]:
        return [argv[3:] for argv, _ in self.calls if predicate(argv[3:])]


@pytest.fixture(scope="module")
def cpu_profiles() -> schema.Stack:
    return loader.load_stack(CPU_STACK)


OWN_RESULT = {
    "client": "bwstack bench_client",
    "completed": 16,
    "failed": 0,
    "timed_out": False,
    "duration_s": 4.0,
    "input_tokens": 1024,
    "output_tokens": 512,
    "output_tokens_per_s": 128.0,
    "requests_per_s": 4.0,
    "ttft_ms_p50": 120.0,
    "ttft_ms_p99": 300.0,
    "itl_ms_p50": 25.0,
    "errors": [],
}


def test_the_image_without_sglangs_client_runs_ours_with_the_stack_settings(
    cpu_profiles: schema.Stack,
) -> None:
    docker = FakeDocker(imports=False, own=OWN_RESULT)
    step = bench.Bench(cpu_profiles, standin=False, run=docker, host="CPU: test, 2 cores")
    speed = step.measure("cpu-torch-native", "c0ffee", "sha256:img")
    settings = cpu_profiles.settings.bench
    own = docker.ran(lambda a: a[:2] == ["python3", bench.OWN_CLIENT])
    assert own == [
        [
            "python3", bench.OWN_CLIENT, "--url", f"http://127.0.0.1:{cpu_profiles.settings.port}",
            "--num-prompts", str(settings.num_prompts), "--input-len", str(settings.input_len),
            "--output-len", str(settings.output_len), "--concurrency", str(settings.concurrency),
            "--time-limit", str(settings.time_limit_s),
        ]
    ]  # fmt: skip
    limits = [t for argv, t in docker.calls if argv[3:5] == ["python3", bench.OWN_CLIENT]]
    assert limits == [settings.time_limit_s + bench.EXEC_GRACE_S]
    assert speed["client"] == bench.OWN_CLIENT_NAME
    assert speed["client_note"] == (
        "sglang.bench_serving does not import in this image: ModuleNotFoundError: No module named 'datasets'"
    )
    assert {key: speed[key] for key in bench.FIGURES} == {
        "output_tokens_per_s": 128.0,
        "requests_per_s": 4.0,
        "ttft_ms_p50": 120.0,
        "ttft_ms_p99": 300.0,
        "itl_ms_p50": 25.0,
    }
    assert speed["settings"] == settings.model_dump()
    assert speed["host"] == "CPU: test, 2 cores" and speed["standin"] is False
    assert "error" not in speed and speed["bench_s"] >= 0
    # a second profile on the same image does not ask again
    step.measure("cpu-torch-native", "c0ffee2", "sha256:img")
    assert len(docker.ran(lambda a: a == bench.probe_argv())) == 1


def test_an_image_with_sglangs_client_runs_bench_serving_with_random_ids(cpu_profiles: schema.Stack) -> None:
    docker = FakeDocker(imports=True, sglang=SGLANG_LINE)
    speed = bench.Bench(cpu_profiles, standin=False, run=docker, host="h").measure(
        "cpu-torch-native", "c", "i"
    )
    (argv,) = docker.ran(lambda a: a[:1] == ["timeout"])
    settings = cpu_profiles.settings.bench
    assert argv[:8] == ["timeout", "-s", "KILL", str(settings.time_limit_s), "python3", "-m",
                        "sglang.bench_serving", "--backend"]  # fmt: skip
    flags = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}
    tokenizer = launch.model_path_in_container(cpu_profiles, "cpu-torch-native")
    assert flags["--dataset-name"] == "random-ids"  # "random" would download ShareGPT
    assert flags["--tokenizer"] == tokenizer == f"{imagelayout.HF_HOME}/tiny"
    assert flags["--num-prompts"] == str(settings.num_prompts)
    assert flags["--max-concurrency"] == str(settings.concurrency)
    assert flags["--random-input-len"] == str(settings.input_len)
    assert flags["--random-output-len"] == str(settings.output_len)
    assert flags["--random-range-ratio"] == "1"  # every request exactly input_len / output_len
    assert "--disable-tqdm" in argv and flags["--ready-check-timeout-sec"] == "0"
    output = flags["--output-file"]
    assert docker.ran(lambda a: a[:1] == ["cat"]) == [["cat", output]]
    assert docker.ran(lambda a: a[:1] == ["rm"]) == [["rm", "-f", output]]
    assert speed["client"] == "sglang.bench_serving" and speed["client_note"] is None
    assert speed["output_tokens_per_s"] == 40.96 and speed["ttft_ms_p99"] == 480.5
    assert speed["itl_ms_p50"] == 31.25 and speed["requests_per_s"] == 1.28
    assert (speed["completed"], speed["failed"]) == (16, settings.num_prompts - 16)


def test_an_api_key_keeps_sglangs_client_out(stack: schema.Stack) -> None:
    stack.settings = stack.settings.model_copy(update={"api_key": True})
    docker = FakeDocker(imports=True, own=OWN_RESULT)
    speed = bench.Bench(stack, standin=False, run=docker, host="h").measure("dense-fi-bf16", "c", "i")
    assert docker.ran(lambda a: a == bench.probe_argv()) == []
    (own,) = docker.ran(lambda a: a[:2] == ["python3", bench.OWN_CLIENT])
    assert own[-2:] == ["--api-key-file", f"{imagelayout.SECRETS_DIR}/api_key"]
    assert "stack.api_key" in speed["client_note"]


def test_nothing_completed_is_an_error_without_figures(cpu_profiles: schema.Stack) -> None:
    failed = {**OWN_RESULT, "completed": 0, "failed": 16, "output_tokens_per_s": None, "requests_per_s": None,
              "errors": ["RuntimeError: HTTP 503: overloaded"]}  # fmt: skip
    speed = bench.Bench(cpu_profiles, standin=False, run=FakeDocker(own=failed), host="h").measure(
        "x", "c", "i"
    )
    assert not any(key in speed for key in bench.FIGURES)
    assert (
        speed["error"]
        == "no request completed within the time limit; first error: RuntimeError: HTTP 503: overloaded"
    )
    assert not bench.has_figures(speed)
    assert bench.short_words(speed) == "bench failed"
    assert bench.speed_words(speed).startswith("bench failed: no request completed")


def test_a_client_that_prints_nothing_is_an_error(cpu_profiles: schema.Stack) -> None:
    def silent(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 137, "", "killed")

    speed = bench.Bench(cpu_profiles, standin=False, run=silent, host="h").measure("x", "c", "i")
    assert speed["error"].startswith("bench_client printed no result (exit 137: killed)")


def test_run_host_turns_a_timeout_into_status_124() -> None:
    done = bench.run_host(["sleep", "5"], 0.2)
    assert done.returncode == 124 and "timed out" in done.stderr


def test_cpu_label_reads_the_model_name(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD   EPYC 9654 96-Core Processor\nflags\t\t: fpu\n")
    assert bench.cpu_label(info, cores=4) == "CPU: AMD EPYC 9654 96-Core Processor, 4 cores"
    assert bench.cpu_label(tmp_path / "missing", cores=2) == "CPU: unknown model, 2 cores"


def test_host_labels_never_pass_a_cpu_figure_for_a_gpu_one(
    cpu_profiles: schema.Stack, repo_stack: schema.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bench.host_label(cpu_profiles, standin=False).endswith("(real SGLang, no GPU)")
    assert bench.host_label(cpu_profiles, standin=False).startswith("CPU: ")
    standin = bench.host_label(repo_stack, standin=True)
    assert standin.startswith("stand-in server (CPU imitation of SGLang; not a GPU figure) on CPU: ")
    monkeypatch.setenv("BWSTACK_DOCTOR_FIXTURE", str(FIXTURES / "rtx-pro-6000-8x"))
    assert bench.host_label(repo_stack, standin=False) == (
        "GPU: 8x NVIDIA RTX PRO 6000 Blackwell Server Edition (sm120)"
    )
    monkeypatch.setenv("BWSTACK_DOCTOR_FIXTURE", str(FIXTURES / "no-nvidia"))
    assert bench.host_label(repo_stack, standin=False).startswith("GPU: no NVIDIA GPU (")


def test_speed_words_carry_figures_load_client_and_host(cpu_profiles: schema.Stack) -> None:
    speed = bench.record(
        {**OWN_RESULT, "timed_out": True},
        settings=cpu_profiles.settings.bench,
        client=bench.OWN_CLIENT_NAME,
        why_client=None,
        host="CPU: X, 2 cores (real SGLang, no GPU)",
        standin=False,
        bench_s=5.0,
    )
    assert bench.short_words(speed) == "128 tok/s"
    words = bench.speed_words(speed)
    assert words.startswith("128 output tok/s, 4 req/s, TTFT p50 120 ms / p99 300 ms, ITL p50 25 ms; ")
    assert "16 completed, 0 failed (time limit reached: completed requests only)" in words
    assert "16 requests of 64 in / 32 out tokens, 4 at once" in words
    assert words.endswith("bwstack bench_client; on CPU: X, 2 cores (real SGLang, no GPU))")
    assert bench.short_words(None) == "" and bench.speed_words(None) == ""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (json.dumps({**SGLANG_LINE, "output_throughput": None}), "the client reported no output rate"),
        (json.dumps({**SGLANG_LINE, "completed": "sixteen"}), "no request completed within the time limit"),
        ("not json at all\n", "sglang.bench_serving wrote no result"),
    ],
)
def test_odd_sglang_results_are_errors_not_figures(cpu_profiles: schema.Stack, text: str, error: str) -> None:
    settings = cpu_profiles.settings.bench
    figures = bench.parse_sglang(text, settings)
    speed = bench.record(
        figures,
        settings=settings,
        client=bench.SGLANG_CLIENT,
        why_client=None,
        host="h",
        standin=False,
        bench_s=1,
    )
    assert speed["error"] == error and not bench.has_figures(speed)
    assert not any(key in speed for key in bench.FIGURES)
