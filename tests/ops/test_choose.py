"""``bwstack up`` without a profile: detect the host's GPUs, filter, rank, explain (``--dry-run``).

Each recorded doctor host (tests/fixtures/doctor/) answers the GPU query through the doctor's own probe hook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bwstack.sweep import report
from support.stack import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "doctor"


def up_dry_run(
    host: Path | None, *args: str, profiles: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("BWSTACK_PROFILE", "BWSTACK_DOCTOR_FIXTURE")}
    environ.update(COLUMNS="80", **env)
    if host is not None:
        environ["BWSTACK_DOCTOR_FIXTURE"] = str(host)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bwstack.cli",
            "up",
            "-f",
            str(profiles or ROOT / "profiles.yaml"),
            "--dry-run",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
    )


def passed_over(stdout: str) -> dict[str, str]:
    """profile -> its reason (continuation lines joined)."""
    rows: dict[str, str] = {}
    current = None
    for line in stdout.split("passed over:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            current, _, reason = line.strip().partition(" ")
            rows[current] = reason.strip()
        elif current is not None:
            rows[current] += " " + line.strip()
    return rows


def test_rtx_pro_6000_host_picks_the_upstream_dsa_profile() -> None:
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == "host: 8x NVIDIA RTX PRO 6000 Blackwell Server Edition (sm120)"
    text = " ".join(result.stdout.split())
    assert (
        "choice: dsa-fi-sparse-fp8: expected and predicted healthy on sm120, 8 of 8 GPUs; "
        "first usable in profiles.yaml order (no measured speed)"
    ) in text
    reasons = passed_over(result.stdout)
    assert set(reasons) == {
        "dense-fi-bf16",
        "dense-triton-bf16",
        "legacy-dense-fi-bf16",
        "modelcard-fi-auto",
        "dense-triton-auto",
        "dsa-trtllm-fp8",
        "dsa-flashmla-fp8",
        "legacy-nsa-default-fp8",
    }
    assert reasons["dense-fi-bf16"] == "usable, after dsa-fi-sparse-fp8 in profiles.yaml order"
    assert reasons["modelcard-fi-auto"].startswith("known to fail on sm120: expect nan (auto KV turns into")
    assert reasons["dsa-trtllm-fp8"].startswith("known to fail on sm120: expect unsupported_arch")


@pytest.mark.parametrize(("host", "arch"), [("b200-8x", "sm100"), ("h200-8x", "sm90")])
def test_hosts_the_images_are_not_built_for_get_no_profile_and_exit_1(host: str, arch: str) -> None:
    result = up_dry_run(FIXTURES / host)
    assert result.returncode == 1, result.stdout
    text = " ".join(result.stdout.split())
    assert f"no usable profile: none of the 9 profiles is expected and predicted healthy on 8x {arch}" in text
    reasons = passed_over(result.stdout)
    assert len(reasons) == 9
    assert reasons["dsa-fi-sparse-fp8"] == (
        f"image variant v0.5.23-cu130 is built for sm120 (pins.toml [cuda] gpu_archs), this host is {arch}"
    )
    assert reasons["legacy-dense-fi-bf16"].startswith("image variant v0.5.9-cu130 is built for sm120")


def test_host_without_nvidia_says_why_and_exits_1() -> None:
    result = up_dry_run(FIXTURES / "no-nvidia")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "host: no NVIDIA GPU (nvidia-smi not found: no NVIDIA driver is installed)",
        "no usable profile: nvidia-smi not found: no NVIDIA driver is installed; bwstack",
        "serves only on NVIDIA GPUs",
    ]


def test_too_few_gpus_for_tp_size(tmp_path: Path) -> None:
    host = tmp_path / "rtx-4x"
    shutil.copytree(FIXTURES / "rtx-pro-6000-8x", host)
    rows = (host / "nvidia-smi.csv").read_text(encoding="utf-8").splitlines()
    (host / "nvidia-smi.csv").write_text("\n".join(rows[:4]) + "\n", encoding="utf-8")
    result = up_dry_run(host)
    assert result.returncode == 1
    reasons = passed_over(result.stdout)
    assert reasons["dsa-fi-sparse-fp8"] == "needs 8 GPUs (model.tp_size), this host has 4"


def test_bwstack_profile_pins_the_choice() -> None:
    result = up_dry_run(FIXTURES / "no-nvidia", BWSTACK_PROFILE="dense-triton-bf16")
    assert result.returncode == 0
    assert "choice: dense-triton-bf16: pinned by BWSTACK_PROFILE" in result.stdout
    bad = up_dry_run(FIXTURES / "rtx-pro-6000-8x", BWSTACK_PROFILE="nope")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert [ln for ln in bad.stderr.splitlines() if "warning" not in ln] == [
        f"bwstack: BWSTACK_PROFILE: unknown profile 'nope' (profiles: {', '.join(_names())})"
    ]


def test_a_named_profile_wins() -> None:
    result = up_dry_run(FIXTURES / "no-nvidia", "dense-fi-bf16")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "choice: dense-fi-bf16: named on the command line"
    # what the shipped evidence recorded for it follows: nothing yet for a GPU profile (evidence/ is CPU only)
    rest = " ".join(" ".join(result.stdout.splitlines()[1:]).split())
    assert rest.startswith("evidence: nothing recorded for dense-fi-bf16 in evidence/")


def _names() -> list[str]:
    from bwstack.stack import loader

    return list(loader.load_stack(ROOT / "profiles.yaml").profiles)


def _speed_report(root: Path, stamp: str, speeds: dict[str, float], *, standin: bool = False) -> None:
    """A results.json row carrying the speed field (no sweep measures it yet: this fixes the reading side)."""
    doc = report.new_document(
        stack={
            "file": "profiles.yaml",
            "project": "bwstack",
            "model": "m",
            "served_name": "m",
            "gpu_arch": "sm120",
            "tp_size": 8,
        },
        mode={"standin": standin, "fast": False, "variant": None, "timeout_s": 600.0},
        variants={},
        plan=list(speeds),
        generated_by="test",
    )
    for name, value in speeds.items():
        report.record(
            doc,
            {"profile": name, "verdict": "healthy", "match": True, "speed": {"output_tokens_per_s": value}},
        )
    out = root / "reports" / stamp
    out.mkdir(parents=True)
    (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")


def test_measured_speed_ranks_first(stack_copy: Path) -> None:
    root = stack_copy.parent
    _speed_report(root, "20260101T000000Z", {"dense-triton-bf16": 900.0, "dense-fi-bf16": 700.0})
    _speed_report(root, "20260201T000000Z", {"dense-fi-bf16": 1200.0})  # newer: wins for dense-fi-bf16
    _speed_report(root, "20260301T000000Z", {"dense-triton-bf16": 5000.0}, standin=True)  # stand-in: ignored
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x", profiles=stack_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert (
        "choice: dense-fi-bf16: expected and predicted healthy on sm120, 8 of 8 GPUs; fastest measured: "
        "1200 output tokens/s (reports/20260201T000000Z)"
    ) in text
    reasons = passed_over(result.stdout)
    assert reasons["dense-triton-bf16"] == "usable, slower: 900 output tokens/s (reports/20260101T000000Z)"
    assert reasons["dsa-fi-sparse-fp8"] == "usable, no measured speed"


def _swept(
    root: Path, folder: str, *, gpu_arch: str, speeds: dict[str, float | None], kind: str = "real"
) -> None:
    """A report as the sweep writes it with --bench: each row's speed made by bench.record (None: the bench
    step completed nothing, so the row has an error and no figures)."""
    from bwstack.stack import schema
    from bwstack.sweep import bench

    settings = schema.BenchSettings(num_prompts=4, input_len=8, output_len=4, concurrency=2, time_limit_s=30)
    doc = _document(gpu_arch, kind, list(speeds))
    for name, rate in speeds.items():
        figures = {"completed": 0, "failed": 4} if rate is None else {
            "output_tokens_per_s": rate, "requests_per_s": 1.0, "ttft_ms_p50": 1.0, "ttft_ms_p99": 2.0,
            "itl_ms_p50": 1.0, "completed": 4, "failed": 0,
        }  # fmt: skip
        speed = bench.record(figures, settings=settings, client=bench.OWN_CLIENT_NAME, why_client=None,
                             host=f"GPU: 8x test ({gpu_arch})", standin=False, bench_s=1.0)  # fmt: skip
        report.record(doc, {"profile": name, "verdict": "healthy", "match": True, "speed": speed})
    _write(root, folder, doc)


def _document(gpu_arch: str, kind: str, plan: list[str]) -> report.Document:
    """A new report of the sweep of ``plan`` on ``gpu_arch`` (``kind`` real or mixed), rows to be recorded."""
    return report.new_document(
        stack={
            "file": "profiles.yaml",
            "project": "bwstack",
            "model": "m",
            "gpu_arch": gpu_arch,
            "tp_size": 8,
        },
        mode={"kind": kind, "standin": None if kind == "mixed" else False, "fast": False, "variant": None},
        variants={},
        plan=plan,
        generated_by="test",
    )


def _write(root: Path, folder: str, doc: report.Document) -> None:
    out = root / "reports" / folder
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")


def test_the_sweeps_own_speed_records_rank_and_nested_parts_count(stack_copy: Path) -> None:
    from bwstack.ops import choose
    from bwstack.stack import loader

    root = stack_copy.parent
    _swept(root, "20260401T000000Z/real", gpu_arch="sm120", speeds={"dense-triton-bf16": 800.0})
    # the combined report of the same run is skipped (its rows are read from the part)
    _swept(root, "20260401T000000Z", gpu_arch="sm120", speeds={"dense-fi-bf16": 9999.0}, kind="mixed")
    _swept(
        root, "20260301T000000Z", gpu_arch="sm120", speeds={"dense-fi-bf16": 700.0, "dsa-fi-sparse-fp8": None}
    )
    _swept(root, "20260501T000000Z", gpu_arch="sm100", speeds={"dsa-fi-sparse-fp8": 5000.0})  # another arch
    found = choose.measured(loader.load_stack(stack_copy), "sm120")
    assert {name: (m.output_tokens_per_s, m.report) for name, m in found.items()} == {
        "dense-triton-bf16": (800.0, "20260401T000000Z/real"),
        "dense-fi-bf16": (700.0, "20260301T000000Z"),
    }
    assert found["dense-triton-bf16"].speed["host"] == "GPU: 8x test (sm120)"
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x", profiles=stack_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "choice: dense-triton-bf16: " in text and "fastest measured: 800 output tokens/s" in text
    reasons = passed_over(result.stdout)
    assert reasons["dense-fi-bf16"] == "usable, slower: 700 output tokens/s (reports/20260301T000000Z)"
    assert reasons["dsa-fi-sparse-fp8"] == "usable, no measured speed"  # its bench completed nothing


def test_list_shows_what_was_measured_with_its_host(stack_copy: Path) -> None:
    root = stack_copy.parent
    _swept(root, "20260401T000000Z", gpu_arch="sm120", speeds={"dense-fi-bf16": 1234.5})
    env = {k: v for k, v in os.environ.items() if k != "BWSTACK_DOCTOR_FIXTURE"}
    run = [sys.executable, "-m", "bwstack.cli", "list", "-f", str(stack_copy)]
    short = subprocess.run(run, capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "120"})
    assert short.returncode == 0, short.stderr
    header = next(line for line in short.stdout.splitlines() if line.startswith("profile"))
    assert header.split()[:3] == ["profile", "expect", "measured"]
    row = next(line for line in short.stdout.splitlines() if line.startswith("dense-fi-bf16 "))
    assert "1234 tok/s" in row
    assert "measured (bwstack sweep --bench) on: GPU: 8x test (sm120)" in " ".join(short.stdout.split())
    wide = subprocess.run([*run, "--wide"], capture_output=True, text=True, timeout=120, env=env)
    assert "measured: 1234 output tok/s, 1 req/s, TTFT p50 1 ms / p99 2 ms" in " ".join(wide.stdout.split())
    data = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120).stdout)
    rows = {row["profile"]: row for row in data["profiles"]}
    assert rows["dense-fi-bf16"]["measured"]["output_tokens_per_s"] == 1234.5
    assert rows["dense-fi-bf16"]["measured"]["report"] == "20260401T000000Z"
    assert rows["dsa-fi-sparse-fp8"]["measured"] is None


def _scored(root: Path, folder: str, rows: dict[str, dict[str, Any]], *, gpu_arch: str = "sm120") -> None:
    """A real report whose healthy rows carry the probes' scores (``scores``: short, long, long_tokens) and,
    where given, a bench speed and a soak record, as the sweep writes them."""
    doc = _document(gpu_arch, "real", list(rows))
    for name, extra in rows.items():
        report.record(doc, {"profile": name, "verdict": "healthy", "match": True, "model": "m", **extra})
    _write(root, folder, doc)


SOAK = {
    "verdict": "ok", "duration_s": 60.0, "requests": 42, "tokens": 5376, "itl_ms_p50": 21.0, "itl_ms_p99": 80.0,
    "stalls": 0, "worst_window": {"start_s": 40, "itl_ms_p99": 95.0},
}  # fmt: skip


def test_a_profile_weaker_at_length_ranks_after_one_that_keeps_its_quality(stack_copy: Path) -> None:
    root = stack_copy.parent
    speed = {"speed": {"output_tokens_per_s": 2000.0}}
    _scored(root, "20260601T000000Z", {
        # faster, but 1.9 nats/token worse on the long-context probe than the sparse profile (margin 1.0)
        "dense-fi-bf16": {**speed, "scores": {"short": -0.02, "long": -2.10, "long_tokens": 4100}},
        "dsa-fi-sparse-fp8": {"scores": {"short": -0.03, "long": -0.20, "long_tokens": 4100}, "soak": SOAK},
        "dense-triton-bf16": {"scores": {"short": -0.02, "long": -0.95, "long_tokens": 4100}},  # within margin
    })  # fmt: skip
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x", profiles=stack_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "choice: dsa-fi-sparse-fp8: " in text, text
    assert "keeps its quality at length (profiles weaker at length rank last)" in text
    reasons = passed_over(result.stdout)
    assert reasons["dense-fi-bf16"] == (
        "usable, weaker at length: long context -1.90 nats/token vs dsa-fi-sparse-fp8 (reports/20260601T000000Z)"
    )
    assert reasons["dense-triton-bf16"] == "usable, after dsa-fi-sparse-fp8 in profiles.yaml order"

    env = {k: v for k, v in os.environ.items() if k != "BWSTACK_DOCTOR_FIXTURE"}
    run = [sys.executable, "-m", "bwstack.cli", "list", "-f", str(stack_copy)]
    short = subprocess.run(run, capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "200"})
    assert short.returncode == 0, short.stderr
    lines = " ".join(short.stdout.split())
    assert "at length and under load (real sweeps; bwstack sweep --soak):" in lines
    assert (
        "dense-fi-bf16: short -0.020, long (4100 tokens) -2.100 nats/token; long context -1.90 nats/token vs "
        "dsa-fi-sparse-fp8 (reports/20260601T000000Z)"
    ) in lines
    assert (
        "dsa-fi-sparse-fp8: short -0.030, long (4100 tokens) -0.200 nats/token; keeps its quality at length; "
        "soak: ok 60 s, 42 req, 5376 tok, ITL p50 21 / p99 80 ms, 0 stalls, worst window @40 s p99 95 ms "
        "(reports/20260601T000000Z)"
    ) in lines
    wide = subprocess.run([*run, "--wide"], capture_output=True, text=True, timeout=120, env=env)
    assert "at length: short -0.020, long (4100 tokens) -2.100" in " ".join(wide.stdout.split())
    data = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120).stdout)
    rows = {row["profile"]: row for row in data["profiles"]}
    assert rows["dense-fi-bf16"]["at_length"]["long_fact"].startswith("healthy, long context -1.90")
    assert rows["dsa-fi-sparse-fp8"]["at_length"]["soak"]["requests"] == 42
    assert rows["legacy-dense-fi-bf16"]["at_length"] is None


def test_stand_in_and_other_arch_scores_never_steer_the_choice_and_bad_scores_are_skipped(
    stack_copy: Path,
) -> None:
    from bwstack.ops import choose
    from bwstack.stack import loader

    root = stack_copy.parent
    weak = {"dense-fi-bf16": {"scores": {"long": -3.0}}, "dsa-fi-sparse-fp8": {"scores": {"long": -0.1}}}
    _scored(root, "20260601T000000Z", weak, gpu_arch="sm100")  # another arch
    _scored(root, "20260602T000000Z", {"dense-fi-bf16": {"scores": {"long": "x"}}, "dsa-fi-sparse-fp8": {}})
    stack = loader.load_stack(stack_copy)
    assert choose.at_length(stack, "sm120") == {}
    found = choose.at_length(stack, "sm100")
    assert found["dense-fi-bf16"].weaker_at_length and not found["dsa-fi-sparse-fp8"].weaker_at_length
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x", profiles=stack_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "weaker at length" not in result.stdout


def _needles(*found: tuple[int, int]) -> dict[str, Any]:
    """A row's ``quality`` as ``sweep --compare-to`` writes it: (length, right) of 8 needles each."""
    return {
        "window": None,
        "answers": None,
        "retrieval": [{"length": n, "right": r, "asked": 8, "accuracy": r / 8} for n, r in found],
    }


def test_a_profile_whose_retrieval_falls_with_length_ranks_after_one_that_holds(stack_copy: Path) -> None:
    """The needle task's accuracy by length (``sweep --compare-to``) steers ``up`` like the long-context fact;
    the figures are the real CPU run's (copying model 8/8 8/8 8/8, its window twin 8/8 4/8 2/8,
    docs/compare.md)."""
    root = stack_copy.parent
    holds = _needles((1024, 8), (2048, 8), (4088, 8))
    falls = _needles((1024, 8), (2048, 4), (4088, 2))
    versus = {"to": "dsa-fi-sparse-fp8", "positions": 3740, "mean_kl": 5.217, "p99_kl": 12.79, "max_kl": 14.47,
              "top1_agreement": 0.3955, "passed": False, "failures": ["mean KL 5.217 > 0.01"], "worst": []}  # fmt: skip
    _scored(root, "20260701T000000Z", {
        "dense-fi-bf16": {"speed": {"output_tokens_per_s": 2000.0}, "quality": {**falls, "compare": versus}},
        "dsa-fi-sparse-fp8": {"quality": {**holds, "reference": True}},
        "dense-triton-bf16": {"quality": holds},  # --retrieval only: no comparison
    })  # fmt: skip
    result = up_dry_run(FIXTURES / "rtx-pro-6000-8x", profiles=stack_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "choice: dsa-fi-sparse-fp8: " in text and "keeps its quality at length" in text, text
    assert passed_over(result.stdout)["dense-fi-bf16"] == (
        "usable, weaker at length: retrieval falls with length: 8/8 at 1024, 4/8 at 2048, 2/8 at 4088 "
        "(reports/20260701T000000Z)"
    )
    env = {k: v for k, v in os.environ.items() if k != "BWSTACK_DOCTOR_FIXTURE"}
    run = [sys.executable, "-m", "bwstack.cli", "list", "-f", str(stack_copy)]
    shown = subprocess.run([*run, "--retrieval"], capture_output=True, text=True, timeout=120,
                           env={**env, "COLUMNS": "200"})  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.split("retrieval by length (newest real sweep", 1)[1].splitlines()[1:]
    cells = {line.split()[0]: line.split() for line in table if line.strip()}
    assert cells["profile"][:6] == ["profile", "@1024", "@2048", "@4088", "retrieval", "compared"]
    assert cells["dense-fi-bf16"][:9] == ["dense-fi-bf16", "8/8", "4/8", "2/8", "falls", "DIVERGES", "vs",
                                          "dsa-fi-sparse-fp8:", "mean"]  # fmt: skip
    assert cells["dsa-fi-sparse-fp8"][:6] == ["dsa-fi-sparse-fp8", "8/8", "8/8", "8/8", "holds", "reference"]
    assert cells["dense-triton-bf16"][:6] == ["dense-triton-bf16", "8/8", "8/8", "8/8", "holds", "-"]
    plain = subprocess.run(run, capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "200"})
    assert "retrieval by length" not in plain.stdout  # only with --retrieval
    data = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120).stdout)
    rows = {row["profile"]: row for row in data["profiles"]}
    assert rows["dense-fi-bf16"]["retrieval"]["report"] == "20260701T000000Z"
    assert rows["legacy-dense-fi-bf16"]["retrieval"] is None
