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

import pytest

from bwstack import report
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
    assert result.returncode == 0 and result.stdout == "choice: dense-fi-bf16: named on the command line\n"


def _names() -> list[str]:
    from bwstack import model

    return list(model.load_stack(ROOT / "profiles.yaml").profiles)


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
