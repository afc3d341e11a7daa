"""Every doctor check, table-driven: pass, warn, fail (and skip) against recorded hosts with one thing changed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from bwstack.host.doctor.checks import judge, no_gpu_headline
from bwstack.host.doctor.command import collect
from bwstack.host.doctor.facts import (
    Check,
    Expectations,
    RawHost,
    min_driver_branch,
    parse_docker_info,
    parse_gpus,
    parse_topology,
    parse_version,
)
from bwstack.host.doctor.gpu import arch_coverage
from bwstack.host.doctor.probe import CommandResult, FixtureProbe, FsStats
from support.stack import TESTS

FIXTURES = TESTS / "fixtures" / "doctor"
GIB = 1024**3

SM120 = Expectations(
    variant="v0.5.23-cu130",
    cuda_toolkit="13.0",
    gpu_archs=("sm120",),
    torch_cuda_arch_list="12.0a",
    tp_size=8,
    model="nvidia/GLM-5-NVFP4",
    weights_gb=371,
    mem_fraction=0.85,
    custom_all_reduce_off=True,
    source="profiles.yaml stack.variant",
)

_HOSTS: dict[str, RawHost] = {}


def host(name: str) -> RawHost:
    if name not in _HOSTS:
        _HOSTS[name] = collect(FixtureProbe(FIXTURES / name))
    return _HOSTS[name]


def ok(argv: tuple[str, ...], stdout: str) -> CommandResult:
    return CommandResult(argv, returncode=0, stdout=stdout)


SMI = ("nvidia-smi",)
CORPUS = TESTS / "healthchecks" / "corpus"
DMESG_DENIED = CommandResult(
    ("dmesg",), returncode=1, stderr="dmesg: read kernel buffer failed: Operation not permitted\n"
)
#: the driver's load line (NVIDIA/NVSentinel#155's dmesg) and the 2026 H2 GSP hang's Xid 119 line
#: (NVIDIA/open-gpu-kernel-modules#1111, reference sm120-2026h2.md section 2) as journalctl -k prints them
NVRM_LOADED = (
    "[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  "
    "(dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025\n"
)
XID_119 = (
    "Sep 02 11:40:12 gpu-node-3 kernel: NVRM: Xid (PCI:0000:01:00): 119, pid=31337, name=python3, Timeout "
    "after 45s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c "
    "0x4).\n"
    "Sep 02 11:41:02 gpu-node-3 kernel: NVRM: Xid (PCI:0000:01:00): 175, pid=31337, name=python3, Ch 00000008\n"
)


def corpus(prefix: str) -> str:
    """The text of the corpus log whose name starts with ``prefix`` (real dmesg pasted in a public issue)."""
    (path,) = CORPUS.glob(f"{prefix}_*.log")
    return path.read_text(encoding="utf-8")


RTX_ROW = "NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, {driver}, 97887, 00000000:{bus:02X}:00.0\n"


def rtx_rows(count: int = 8, driver: str = "595.58.03") -> str:
    return "".join(RTX_ROW.format(driver=driver, bus=16 * i + 1) for i in range(count))


def with_smi(stdout: str) -> Callable[[RawHost], RawHost]:
    return lambda raw: dataclasses.replace(raw, nvidia_smi=ok(SMI, stdout))


def with_docker(**fields: Any) -> Callable[[RawHost], RawHost]:
    """Edit fields of the recorded docker info JSON (None removes a key)."""

    def edit(raw: RawHost) -> RawHost:
        data = json.loads(raw.docker_info.stdout)
        for key, value in fields.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        return dataclasses.replace(raw, docker_info=ok(("docker", "info"), json.dumps(data)))

    return edit


def same(raw: RawHost) -> RawHost:
    return raw


NOT_FOUND = CommandResult(SMI, problem="not found")
DRIVER_DOWN = CommandResult(
    SMI,
    returncode=9,
    stdout="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running.\n",
)
NO_DEVICES = CommandResult(SMI, returncode=6, stdout="No devices were found\n")
DAEMON_DOWN = CommandResult(
    ("docker", "info"),
    returncode=1,
    stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
)
COMPOSE_NOT_A_COMMAND = CommandResult(
    ("docker", "compose", "version"), returncode=1, stderr="docker: 'compose' is not a docker command.\n"
)
COMPOSE_GONE = CommandResult(("docker-compose", "version"), problem="not found")


def replace(**fields: Any) -> Callable[[RawHost], RawHost]:
    return lambda raw: dataclasses.replace(raw, **fields)


def expect(**fields: Any) -> Expectations:
    return dataclasses.replace(SM120, **fields)


# (check id, host, change to the host, expectations, status, text in detail)
CASES: list[tuple[str, str, Callable[[RawHost], RawHost], Expectations, str, str]] = [
    # stack / variant
    ("variant", "rtx-pro-6000-8x", same, SM120, "pass", "v0.5.23-cu130 (CUDA 13.0, sm120"),
    (
        "variant",
        "rtx-pro-6000-8x",
        same,
        Expectations(problem="profiles.yaml not found"),
        "warn",
        "not found",
    ),
    # NVIDIA driver vs the variant's CUDA toolkit
    ("driver", "rtx-pro-6000-8x", same, SM120, "pass", "595.58.03 (R595) >= R580 for CUDA 13.0"),
    ("driver", "rtx-pro-6000-8x", with_smi(rtx_rows(driver="580.95.05")), SM120, "pass", "R580"),
    ("driver", "rtx-pro-6000-8x", with_smi(rtx_rows(driver="575.64.03")), SM120, "fail", "older than R580"),
    (
        "driver",
        "rtx-pro-6000-8x",
        with_smi(rtx_rows(driver="575.64.03")),
        expect(cuda_toolkit="12.9"),
        "pass",
        "",
    ),
    (
        "driver",
        "rtx-pro-6000-8x",
        with_smi(rtx_rows(driver="570.195.03")),
        expect(cuda_toolkit="12.9"),
        "fail",
        "R575",
    ),
    (
        "driver",
        "rtx-pro-6000-8x",
        with_smi(rtx_rows(driver="570.195.03")),
        expect(cuda_toolkit="12.8"),
        "pass",
        "",
    ),
    (
        "driver",
        "rtx-pro-6000-8x",
        with_smi(rtx_rows(driver="565.57.01")),
        Expectations(),
        "fail",
        "Blackwell",
    ),
    ("driver", "rtx-pro-6000-8x", with_smi(rtx_rows(driver="[N/A]")), SM120, "warn", "unrecognised"),
    ("driver", "h200-8x", same, SM120, "fail", "570.133.20 (R570) is older than R580"),
    ("driver", "no-nvidia", same, SM120, "fail", "nvidia-smi not found"),
    ("driver", "rtx-pro-6000-8x", replace(nvidia_smi=DRIVER_DOWN), SM120, "fail", "couldn't communicate"),
    ("driver", "rtx-pro-6000-8x", replace(nvidia_smi=NO_DEVICES), SM120, "fail", "No devices were found"),
    (
        "driver",
        "rtx-pro-6000-8x",
        replace(nvidia_smi=CommandResult(SMI, problem="timed out after 20 s")),
        SM120,
        "fail",
        "timed out",
    ),
    ("driver", "rtx-pro-6000-8x", with_smi(""), SM120, "fail", "lists no GPU"),
    ("driver", "rtx-pro-6000-8x", with_smi("garbage\n"), SM120, "fail", "cannot read nvidia-smi output"),
    # GPU arch vs [cuda] gpu_archs and torch_cuda_arch_list
    ("gpu_arch", "rtx-pro-6000-8x", same, SM120, "pass", "sm120 (compute capability 12.0)"),
    ("gpu_arch", "b200-8x", same, SM120, "fail", "NVIDIA B200 is sm100"),
    ("gpu_arch", "h200-8x", same, SM120, "fail", "NVIDIA H200 is sm90"),
    ("gpu_arch", "b200-8x", same, expect(gpu_archs=("sm100",), torch_cuda_arch_list="10.0a"), "pass", ""),
    (
        "gpu_arch",
        "rtx-pro-6000-8x",
        with_smi("NVIDIA GB10, 12.1, 580.95.05, 122502, 0000000F:01:00.0\n"),
        SM120,
        "fail",
        "sm121",
    ),
    (
        "gpu_arch",
        "rtx-pro-6000-8x",
        same,
        expect(torch_cuda_arch_list="9.0;10.0"),
        "warn",
        "has no code for 12.0",
    ),
    ("gpu_arch", "rtx-pro-6000-8x", same, expect(torch_cuda_arch_list="10.0+PTX"), "warn", "PTX JIT"),
    (
        "gpu_arch",
        "rtx-pro-6000-8x",
        with_smi(
            rtx_rows(4)
            + "NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 12.0, 595.58.03, 97887, 00000000:C1:00.0\n"
        ),
        SM120,
        "warn",
        "mixed GPU models",
    ),
    (
        "gpu_arch",
        "rtx-pro-6000-8x",
        with_smi("NVIDIA RTX PRO 6000 Blackwell Server Edition, [N/A], 595.58.03, 97887, 00000000:01:00.0\n"),
        SM120,
        "pass",
        "compute capability 12.0",
    ),
    (
        "gpu_arch",
        "rtx-pro-6000-8x",
        with_smi("Some Future GPU, [N/A], 700.1, 1000, 00000000:01:00.0\n"),
        SM120,
        "warn",
        "compute capability unknown",
    ),
    ("gpu_arch", "rtx-pro-6000-8x", same, Expectations(), "skip", "8x NVIDIA RTX PRO 6000"),
    ("gpu_arch", "no-nvidia", same, SM120, "skip", "no NVIDIA GPU"),
    # GPU count vs tp_size (no warn state)
    ("gpu_count", "rtx-pro-6000-8x", same, SM120, "pass", "8 GPU(s) for tp_size 8"),
    (
        "gpu_count",
        "rtx-pro-6000-8x",
        with_smi(rtx_rows(4)),
        SM120,
        "fail",
        "needs 8 GPUs on one host; this host has 4",
    ),
    ("gpu_count", "rtx-pro-6000-8x", same, expect(tp_size=None), "skip", "no tp_size"),
    ("gpu_count", "no-nvidia", same, SM120, "skip", "no NVIDIA GPU"),
    # GPU memory vs weights / tp (warn only)
    ("gpu_memory", "rtx-pro-6000-8x", same, SM120, "pass", "43.2 GiB per GPU"),
    ("gpu_memory", "rtx-pro-6000-8x", same, expect(tp_size=2), "warn", "no room for the KV cache"),
    ("gpu_memory", "h200-8x", same, expect(tp_size=2), "warn", "no room"),
    (
        "gpu_memory",
        "rtx-pro-6000-8x",
        same,
        expect(weights_gb=None, model="org/Other-Model"),
        "pass",
        "assumed",
    ),
    (
        "gpu_memory",
        "rtx-pro-6000-8x",
        same,
        expect(weights_gb=None, model="nvidia/GLM-5.2-NVFP4"),
        "pass",
        "≈433 GB",
    ),
    (
        "gpu_memory",
        "rtx-pro-6000-8x",
        with_smi(RTX_ROW.replace("97887", "[N/A]").format(driver="595.58.03", bus=1)),
        SM120,
        "warn",
        "no memory.total",
    ),
    ("gpu_memory", "no-nvidia", same, SM120, "skip", "no NVIDIA GPU"),
    # Docker Engine
    ("docker_engine", "rtx-pro-6000-8x", same, SM120, "pass", "Engine 28.5.1"),
    ("docker_engine", "no-nvidia", same, SM120, "pass", "not enabled"),
    (
        "docker_engine",
        "no-nvidia",
        same,
        expect(start_interval=True),
        "warn",
        "ignores healthcheck start_interval",
    ),
    ("docker_engine", "h200-8x", same, expect(start_interval=True), "pass", "start_interval supported"),
    ("docker_engine", "rtx-pro-6000-8x", with_docker(ServerVersion="18.09.7"), SM120, "fail", "no --gpus"),
    ("docker_engine", "rtx-pro-6000-8x", with_docker(ServerVersion="nightly"), SM120, "warn", "unrecognised"),
    (
        "docker_engine",
        "rtx-pro-6000-8x",
        with_docker(SecurityOptions=["name=seccomp,profile=builtin", "name=rootless"]),
        SM120,
        "pass",
        "(rootless)",
    ),
    (
        "docker_engine",
        "rtx-pro-6000-8x",
        replace(docker_info=CommandResult(("docker",), problem="not found")),
        SM120,
        "fail",
        "docker CLI not found",
    ),
    ("docker_engine", "rtx-pro-6000-8x", replace(docker_info=DAEMON_DOWN), SM120, "fail", "Cannot connect"),
    (
        "docker_engine",
        "rtx-pro-6000-8x",
        replace(
            docker_info=CommandResult(
                ("docker",),
                returncode=1,
                stdout='{"ServerErrors":["permission denied while trying to connect"],"ServerVersion":""}',
            )
        ),
        SM120,
        "fail",
        "Docker daemon not reachable: permission denied",
    ),
    (
        "docker_engine",
        "rtx-pro-6000-8x",
        replace(docker_info=ok(("docker",), "{not json")),
        SM120,
        "fail",
        "not JSON",
    ),
    # NVIDIA container runtime / CDI
    ("gpu_runtime", "rtx-pro-6000-8x", same, SM120, "pass", "runtime nvidia registered"),
    ("gpu_runtime", "h200-8x", same, SM120, "pass", "(the default)"),
    ("gpu_runtime", "b200-8x", same, SM120, "pass", "CDI devices: nvidia.com/gpu=0"),
    (
        "gpu_runtime",
        "h200-8x",
        with_docker(Runtimes={"runc": {"path": "runc"}}, DefaultRuntime="runc"),
        SM120,
        "warn",
        "does not list CDI devices",
    ),
    ("gpu_runtime", "no-nvidia", same, SM120, "fail", "containers cannot see the GPUs"),
    (
        "gpu_runtime",
        "b200-8x",
        with_docker(DiscoveredDevices=[{"Source": "cdi", "ID": "vendor.com/fpga=0"}]),
        SM120,
        "fail",
        "no nvidia runtime",
    ),
    (
        "gpu_runtime",
        "rtx-pro-6000-8x",
        replace(docker_info=DAEMON_DOWN),
        SM120,
        "skip",
        "docker info unavailable",
    ),
    # Docker Compose
    ("compose", "rtx-pro-6000-8x", same, SM120, "pass", "docker compose 2.40.3"),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(compose=ok(("docker",), "Docker Compose version v2.17.3\n")),
        expect(start_interval=True),
        "warn",
        "2.17.3 < 2.20.2",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(compose=ok(("docker",), "Docker Compose version v2.17.3\n")),
        SM120,
        "pass",
        "not enabled",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(compose=ok(("docker",), "Docker Compose version 2.26.1-4\n")),
        SM120,
        "pass",
        "docker compose 2.26.1",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(
            compose=COMPOSE_NOT_A_COMMAND,
            compose_standalone=ok(("docker-compose",), "docker-compose version 1.29.2, build 5becea4c\n"),
        ),
        SM120,
        "warn",
        "docker-compose 1.29.2 is Compose v1",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(
            compose=COMPOSE_NOT_A_COMMAND,
            compose_standalone=ok(("docker-compose",), "docker-compose version 1.25.0, build unknown\n"),
        ),
        SM120,
        "fail",
        "before 1.28",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(
            compose=COMPOSE_NOT_A_COMMAND,
            compose_standalone=ok(("docker-compose",), "Docker Compose version v2.24.6\n"),
        ),
        SM120,
        "pass",
        "docker-compose 2.24.6",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(compose=COMPOSE_NOT_A_COMMAND, compose_standalone=COMPOSE_GONE),
        SM120,
        "fail",
        "'compose' is not a docker command",
    ),
    (
        "compose",
        "rtx-pro-6000-8x",
        replace(compose=CommandResult(("docker",), problem="not found"), compose_standalone=COMPOSE_GONE),
        SM120,
        "fail",
        "docker CLI not found",
    ),
    # /dev/shm
    ("shm", "rtx-pro-6000-8x", same, SM120, "pass", "503.8 GiB; services use ipc: host"),
    ("shm", "no-nvidia", same, SM120, "warn", "23.5 GiB < 32.0 GiB"),
    (
        "shm",
        "rtx-pro-6000-8x",
        replace(shm=FsStats(64 * 1024**2, 64 * 1024**2)),
        SM120,
        "fail",
        "0.1 GiB: too small",
    ),
    ("shm", "rtx-pro-6000-8x", replace(shm=None), SM120, "warn", "cannot read"),
    # memlock
    ("memlock", "rtx-pro-6000-8x", same, SM120, "pass", "unlimited"),
    ("memlock", "h200-8x", same, SM120, "pass", "8192 KiB in this shell; services set ulimits memlock: -1"),
    (
        "memlock",
        "h200-8x",
        with_docker(SecurityOptions=["name=seccomp,profile=builtin", "name=rootless"]),
        SM120,
        "fail",
        "error setting rlimit type 8",
    ),
    (
        "memlock",
        "rtx-pro-6000-8x",
        with_docker(SecurityOptions=["name=rootless"]),
        SM120,
        "pass",
        "unlimited",
    ),
    ("memlock", "h200-8x", replace(docker_info=DAEMON_DOWN), SM120, "warn", "cannot tell"),
    ("memlock", "h200-8x", replace(memlock=None), SM120, "warn", "cannot read"),
    # model cache disk
    ("disk", "rtx-pro-6000-8x", same, SM120, "pass", "5081 GB free under /data/docker"),
    ("disk", "b200-8x", same, SM120, "warn", "150 GB free"),
    ("disk", "b200-8x", replace(data_root_fs=FsStats(10**12, 10 * 10**9)), SM120, "fail", "too little"),
    ("disk", "b200-8x", same, expect(weights_gb=None, model="nvidia/GLM-5.2-NVFP4"), "warn", "≈433 GB"),
    ("disk", "b200-8x", replace(data_root_fs=None), SM120, "warn", "cannot stat /var/lib/docker"),
    ("disk", "rtx-pro-6000-8x", replace(data_root=None), SM120, "skip", "Docker data root unknown"),
    # GPU P2P topology
    ("p2p", "b200-8x", same, SM120, "pass", "NVLink between all 8 GPUs (28x NV18)"),
    ("p2p", "rtx-pro-6000-8x", same, SM120, "pass", "12x NODE, 16x SYS"),
    ("p2p", "rtx-pro-6000-8x", same, expect(custom_all_reduce_off=False), "warn", "peers talk over PCIe"),
    ("p2p", "rtx-pro-6000-8x", same, expect(nccl_p2p_level="SYS"), "pass", "NCCL_P2P_LEVEL=SYS"),
    (
        "p2p",
        "rtx-pro-6000-8x",
        replace(nvidia_topo=CommandResult(("nvidia-smi",), returncode=2, stderr="boom")),
        SM120,
        "warn",
        "cannot read the topology",
    ),
    ("p2p", "rtx-pro-6000-8x", same, expect(tp_size=1), "skip", "single GPU"),
    ("p2p", "rtx-pro-6000-8x", with_smi(rtx_rows(1)), SM120, "skip", "single GPU"),
    ("p2p", "no-nvidia", same, SM120, "skip", "no NVIDIA GPU"),
    # IOMMU
    ("iommu", "rtx-pro-6000-8x", same, SM120, "warn", "IOMMU active (184 groups) without iommu=pt"),
    ("iommu", "rtx-pro-6000-8x", replace(kernel_cmdline="ro quiet iommu=pt"), SM120, "pass", "iommu=pt"),
    ("iommu", "rtx-pro-6000-8x", replace(kernel_cmdline="ro amd_iommu=off"), SM120, "pass", "switched off"),
    ("iommu", "rtx-pro-6000-8x", replace(iommu_groups=0), SM120, "pass", "IOMMU inactive"),
    ("iommu", "rtx-pro-6000-8x", replace(iommu_groups=None), SM120, "warn", "cannot tell"),
    ("iommu", "b200-8x", replace(kernel_cmdline="ro"), SM120, "pass", "NVLink"),
    ("iommu", "h200-8x", same, SM120, "pass", "NVLink"),
    ("iommu", "rtx-pro-6000-8x", same, expect(tp_size=1), "skip", "single GPU"),
    ("iommu", "no-nvidia", same, SM120, "skip", "no NVIDIA GPU"),
    # the kernel log's Xid events (kernel.py), real kernel text: the corpus's dmesg excerpts
    ("kernel_xid", "rtx-pro-6000-8x", same, SM120, "skip", "not readable (dmesg: not found)"),
    ("kernel_xid", "h200-8x", replace(kernel_log=DMESG_DENIED), SM120, "skip", "Operation not permitted"),
    ("kernel_xid", "h200-8x", replace(kernel_log=ok(("dmesg",), NVRM_LOADED)), SM120, "pass", "no Xid"),
    (
        "kernel_xid",
        "h200-8x",
        replace(kernel_log=ok(("dmesg",), corpus("akash244"))),
        SM120,
        "warn",
        "Xid 43",
    ),
    ("kernel_xid", "h200-8x", replace(kernel_log=ok(("dmesg",), corpus("gpud46"))), SM120, "warn", "Xid 109"),
    (
        "kernel_xid",
        "b200-8x",
        replace(kernel_log=ok(("dmesg",), corpus("nvsentinel155"))),
        SM120,
        "fail",
        "x1",
    ),
    ("kernel_xid", "b200-8x", replace(kernel_log=ok(("journalctl",), XID_119)), SM120, "fail", "GSP RPC"),
]


def _check(raw: RawHost, exp: Expectations, check_id: str) -> Check:
    found = [c for c in judge(raw, exp) if c.id == check_id]
    assert len(found) == 1, check_id
    return found[0]


@pytest.mark.parametrize(
    ("check_id", "host_name", "change", "exp", "status", "text"),
    CASES,
    ids=[f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)],
)
def test_check(
    check_id: str,
    host_name: str,
    change: Callable[[RawHost], RawHost],
    exp: Expectations,
    status: str,
    text: str,
) -> None:
    check = _check(change(host(host_name)), exp, check_id)
    assert check.status == status, check
    assert text in check.detail, check
    if status in {"warn", "fail"} and check_id != "gpu_memory":
        assert check.fix, f"{check_id} {status} must say how to fix it"


def test_every_check_reaches_pass_warn_and_fail_where_it_has_them() -> None:
    reached: dict[str, set[str]] = {}
    for check_id, *_rest, status, _text in CASES:
        reached.setdefault(check_id, set()).add(status)
    warn_only = {"gpu_memory", "p2p", "iommu", "variant"}  # advisory: never fail
    no_warn = {"gpu_count"}  # enough GPUs or not
    for check_id, statuses in reached.items():
        wanted = {"pass", "warn", "fail"} - ({"fail"} if check_id in warn_only else set())
        wanted -= {"warn"} if check_id in no_warn else set()
        assert wanted <= statuses, (check_id, statuses)
    assert set(reached) == {c.id for c in judge(host("rtx-pro-6000-8x"), SM120)}


def test_reference_hosts_overall() -> None:
    def failing(name: str) -> list[str]:
        return sorted(c.id for c in judge(host(name), SM120) if c.status == "fail")

    assert failing("rtx-pro-6000-8x") == []
    assert failing("b200-8x") == ["gpu_arch"]
    assert failing("h200-8x") == ["driver", "gpu_arch"]
    assert failing("no-nvidia") == ["driver", "gpu_runtime"]


def test_no_gpu_headline() -> None:
    assert no_gpu_headline(host("rtx-pro-6000-8x")) is None
    headline = no_gpu_headline(host("no-nvidia"))
    assert headline is not None and headline.startswith("no NVIDIA GPU or driver on this host")
    down = dataclasses.replace(host("rtx-pro-6000-8x"), nvidia_smi=DRIVER_DOWN)
    assert "couldn't communicate" in (no_gpu_headline(down) or "")


# --- parsers ---------------------------------------------------------------------------------------------


def test_parse_gpus_reads_the_query_csv() -> None:
    gpus = parse_gpus((FIXTURES / "b200-8x" / "nvidia-smi.csv").read_text())
    assert len(gpus) == 8
    assert gpus[0].name == "NVIDIA B200" and gpus[0].arch == "sm100" and gpus[0].memory_mib == 183359
    assert gpus[7].bus_id == "00000000:DF:00.0" and gpus[0].driver == "580.82.07"
    with pytest.raises(ValueError, match="unexpected nvidia-smi row"):
        parse_gpus("NVIDIA B200, 10.0\n")


@pytest.mark.parametrize(
    ("host_name", "pairs"), [("rtx-pro-6000-8x", {"NODE": 12, "SYS": 16}), ("h200-8x", {"NV18": 28})]
)
def test_parse_topology_reads_only_the_gpu_matrix(host_name: str, pairs: dict[str, int]) -> None:
    topo = parse_topology((FIXTURES / host_name / "nvidia-smi-topo-m.txt").read_text())
    assert topo.gpus == tuple(f"GPU{i}" for i in range(8))
    counted: dict[str, int] = {}
    for link in topo.pairs():
        counted[link] = counted.get(link, 0) + 1
    assert counted == pairs
    assert topo.links[(0, 4)] == topo.links[(4, 0)]


def test_parse_topology_of_a_two_gpu_box() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t0-63\t0\t\tN/A\nGPU1\tPHB\t X \t0-63\t0\t\tN/A\n"
    assert parse_topology(text).pairs() == ["PHB"]


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("20.10.24+dfsg1", (20, 10, 24)),
        ("28.5.1", (28, 5, 1)),
        ("Docker Compose version v2.40.3", (2, 40, 3)),
        ("docker-compose version 1.29.2, build 5becea4c", (1, 29, 2)),
        ("13.0", (13, 0, 0)),
        ("dev", None),
    ],
)
def test_parse_version(text: str, version: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("toolkit", "branch"),
    [("12.8", 570), ("12.9", 575), ("13.0", 580), ("13.1", 580), ("12.4", 525), ("11.8", None), (None, None)],
)
def test_min_driver_branch(toolkit: str | None, branch: int | None) -> None:
    assert min_driver_branch(toolkit) == branch


@pytest.mark.parametrize(
    ("cap", "arch_list", "coverage"),
    [
        ((12, 0), "12.0a", "native"),
        ((12, 1), "12.0a", "none"),
        ((12, 1), "12.0f", "native"),
        ((12, 1), "12.0", "native"),
        ((10, 3), "9.0a;10.0a", "none"),
        ((10, 0), "9.0a;10.0a", "native"),
        ((12, 0), "9.0 10.0+PTX", "ptx"),
        ((9, 0), "10.0+PTX", "none"),
        ((12, 0), None, "none"),
    ],
)
def test_arch_coverage(cap: tuple[int, int], arch_list: str | None, coverage: str) -> None:
    assert arch_coverage(cap, arch_list) == coverage


def test_parse_docker_info_fields() -> None:
    info = parse_docker_info((FIXTURES / "b200-8x" / "docker-info.json").read_text())
    assert info.server_version == "28.5.1" and info.root_dir == "/var/lib/docker"
    assert info.cdi_devices is not None and "nvidia.com/gpu=all" in info.cdi_devices
    assert "nvidia" not in info.runtimes and not info.rootless
    old = parse_docker_info((FIXTURES / "h200-8x" / "docker-info.json").read_text())
    assert old.cdi_devices is None and old.default_runtime == "nvidia"
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_docker_info("[]")
