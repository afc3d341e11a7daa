"""The host facts a bundle records (doctor.record) from doctor's recorded hosts: GPUs, arch, driver, topology
words, kernel; the CUDA version from plain nvidia-smi's banner where one is recorded; a stable host_id."""

from __future__ import annotations

import shutil
from pathlib import Path

from bwstack.host.doctor.probe import FixtureProbe
from bwstack.host.doctor.record import host_facts, summary
from support.stack import TESTS

HOSTS = TESTS / "fixtures" / "doctor"


def test_a_pcie_blackwell_host() -> None:
    facts = host_facts(FixtureProbe(HOSTS / "rtx-pro-6000-8x"))
    assert facts["gpu_count"] == 8 and facts["gpu_arch"] == "sm120"
    assert facts["driver"] == "595.58.03" and facts["cuda"] is None  # no banner recorded: not guessed
    assert facts["topology"] == "PCIe only (NODE, SYS)"
    assert facts["kernel"] == "6.8.0-87-generic" and facts["hostname"] == "g4-rtxpro-01"
    assert summary(facts).startswith(
        "8x NVIDIA RTX PRO 6000 Blackwell Server Edition (sm120), driver 595.58.03"
    )


def test_an_nvlink_host_and_a_host_without_gpus() -> None:
    b200 = host_facts(FixtureProbe(HOSTS / "b200-8x"))
    assert b200["topology"] == "NVLink (NV18) between all 8 GPUs" and b200["gpu_arch"] == "sm100"
    none = host_facts(FixtureProbe(HOSTS / "no-nvidia"))
    assert none["gpu_count"] == 0 and none["gpus"] == [] and none["topology"] is None
    assert none["no_gpu"] == "nvidia-smi not found: no NVIDIA driver is installed"
    assert len({b200["host_id"], none["host_id"]}) == 2
    assert host_facts(FixtureProbe(HOSTS / "no-nvidia"))["host_id"] == none["host_id"]  # stable per engine


def test_the_cuda_version_comes_from_the_banner(tmp_path: Path) -> None:
    host = tmp_path / "host"
    shutil.copytree(HOSTS / "rtx-pro-6000-8x", host)
    (host / "nvidia-smi-banner.txt").write_text(
        "| NVIDIA-SMI 595.58.03              Driver Version: 595.58.03      CUDA Version: 13.1     |\n",
        encoding="utf-8",
    )
    with (host / "host.toml").open("a", encoding="utf-8") as fh:
        fh.write('\n[commands.nvidia_smi_banner]\nstdout = "nvidia-smi-banner.txt"\n')
    assert host_facts(FixtureProbe(host))["cuda"] == "13.1"
