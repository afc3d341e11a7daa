"""What ``bwstack doctor`` knows, as records and parsers: no judgement, no I/O.

The records every check reads (:class:`RawHost`: what :mod:`bwstack.host.doctor.probe` recorded, unparsed;
:class:`Expectations`: what the image variant and profiles.yaml need) and writes (:class:`Check`: one line of
the report); the parsers of ``nvidia-smi --query-gpu``, ``docker info`` and ``nvidia-smi topo -m``; and the
small helpers the check modules share (units, the GPUs and Docker info of a host, a skipped check).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from bwstack.host import enginekind
from bwstack.host.doctor.probe import CommandResult, FsStats
from healthchecks import vocabulary

Status = Literal["pass", "warn", "fail", "skip"]

GIB = 1024**3
MIB = 1024**2
GB = 1000**3

# Approximate checkpoint size on disk (GB): lukealonso/GLM-5-NVFP4 ~410 GB, nvidia/GLM-5.2-NVFP4 ~433 GB
# (sm120-backends.md §5). Matched against the last part of the model id, longest prefix first.
MODEL_WEIGHTS_GB = {"glm-5-nvfp4": 410, "glm-5.2-nvfp4": 433}
DEFAULT_MODEL = "glm-5-nvfp4"

#: the report's groups, in report order
G_STACK, G_GPU, G_DOCKER, G_HOST, G_MULTI = "stack", "gpu", "docker", "host", "multi-gpu"


@dataclass(frozen=True)
class Check:
    """One line of the doctor report."""

    id: str
    group: str
    title: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Expectations:
    """What the selected image variant and profiles.yaml need from the host (all optional)."""

    variant: str | None = None
    cuda_toolkit: str | None = None
    gpu_archs: tuple[str, ...] = ()
    torch_cuda_arch_list: str | None = None
    tp_size: int | None = None
    model: str | None = None
    weights_gb: int | None = None
    mem_fraction: float | None = None
    custom_all_reduce_off: bool = False
    nccl_p2p_level: str | None = None
    start_interval: bool = False
    source: str = ""
    problem: str | None = None
    other_variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class RawHost:
    """Everything doctor learned from the host, unparsed."""

    nvidia_smi: CommandResult
    nvidia_topo: CommandResult
    docker_info: CommandResult
    compose: CommandResult
    compose_standalone: CommandResult
    shm: FsStats | None
    memlock: str | None
    data_root: str | None
    data_root_fs: FsStats | None
    kernel_cmdline: str | None
    iommu_groups: int | None
    kernel_log: CommandResult | None = None  # dmesg / journalctl -k (kernel.read_kernel_log)


# --- parsing ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One row of ``nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,pci.bus_id``."""

    name: str
    compute_cap: tuple[int, int] | None
    driver: str
    memory_mib: int | None
    bus_id: str

    @property
    def arch(self) -> str | None:
        """``sm120`` for compute capability 12.0."""
        if self.compute_cap is None:
            return None
        return f"sm{self.compute_cap[0]}{self.compute_cap[1]}"


def _cap(text: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_gpus(text: str) -> list[Gpu]:
    """Parse the CSV (noheader, nounits); raise ValueError on a row that is not five fields."""
    gpus: list[Gpu] = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 5:
            raise ValueError(f"unexpected nvidia-smi row: {', '.join(row)}")
        name, cap, driver, memory, bus_id = (field.strip() for field in row)
        gpus.append(
            Gpu(
                name=name,
                compute_cap=_cap(cap) or vocabulary.product_capability(name),
                driver=driver,
                memory_mib=int(memory) if memory.isdigit() else None,
                bus_id=bus_id,
            )
        )
    return gpus


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first ``X.Y[.Z]`` in ``text`` (``20.10.24+dfsg1`` -> (20, 10, 24))."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def driver_branch(version: str) -> int | None:
    """The driver branch (``580`` for ``580.95.05``)."""
    match = re.match(r"\s*(\d+)", version)
    return int(match.group(1)) if match else None


def min_driver_branch(toolkit: str | None) -> int | None:
    """The oldest driver branch for a CUDA toolkit's images: R570 for 12.8, R575 for 12.9, R580 for 13.x."""
    version = parse_version(toolkit or "")
    if version is None:
        return None
    major, minor, _ = version
    if major >= 13:
        return 580
    if major == 12 and minor >= 9:
        return 575
    if major == 12 and minor == 8:
        return 570
    if major == 12:
        return 525  # CUDA 12.x minor-version compatibility floor; such images cannot target Blackwell anyway
    return None


@dataclass(frozen=True)
class DockerInfo:
    """The fields of ``docker info --format '{{json .}}'`` that doctor reads."""

    server_version: str
    runtimes: tuple[str, ...]
    default_runtime: str
    cdi_spec_dirs: tuple[str, ...]
    cdi_devices: tuple[str, ...] | None  # None: this engine does not report DiscoveredDevices
    root_dir: str
    server_errors: tuple[str, ...]
    rootless: bool
    #: the engine's security option names (``selinux``, ``rootless``, ``userns`` ...: host/enginekind.py)
    security_options: frozenset[str] = frozenset()


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(item) for item in value)


def parse_docker_info(text: str) -> DockerInfo:
    """Parse the JSON; raise ValueError when it is not a JSON object."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"docker info is not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ValueError("docker info is not a JSON object")
    runtimes = data.get("Runtimes")
    devices = data.get("DiscoveredDevices")
    return DockerInfo(
        server_version=str(data.get("ServerVersion") or ""),
        runtimes=tuple(sorted(runtimes)) if isinstance(runtimes, dict) else (),
        default_runtime=str(data.get("DefaultRuntime") or ""),
        cdi_spec_dirs=_strings(data.get("CDISpecDirs")),
        cdi_devices=None
        if devices is None and "DiscoveredDevices" not in data
        else tuple(str(d.get("ID", "")) for d in devices or [] if isinstance(d, dict)),
        root_dir=str(data.get("DockerRootDir") or ""),
        server_errors=_strings(data.get("ServerErrors")),
        rootless="name=rootless" in _strings(data.get("SecurityOptions")),
        security_options=enginekind.security_options(data),
    )


def docker_root_dir(info: CommandResult) -> str | None:
    """DockerRootDir from a docker info run, if it has one."""
    if not info.ok:
        return None
    try:
        return parse_docker_info(info.stdout).root_dir or None
    except ValueError:
        return None


@dataclass(frozen=True)
class Topology:
    """GPU-to-GPU links from ``nvidia-smi topo -m``: ``links[(i, j)]`` is ``NV18``, ``PIX``, ``SYS``, …"""

    gpus: tuple[str, ...]
    links: dict[tuple[int, int], str]

    def pairs(self) -> list[str]:
        """The link of every unordered GPU pair."""
        n = len(self.gpus)
        return [self.links.get((i, j), "?") for i in range(n) for j in range(i + 1, n)]


def parse_topology(text: str) -> Topology:
    """Parse the GPU matrix of ``nvidia-smi topo -m`` (NIC rows, affinity columns and legend ignored)."""
    header: list[str] = []
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            if rows:
                break
            continue
        if not header and cells[0].startswith("GPU"):
            header = [c for c in cells if re.fullmatch(r"GPU\d+", c)]
            continue
        if header and re.fullmatch(r"GPU\d+", cells[0]):
            rows[cells[0]] = cells[1 : 1 + len(header)]
    links: dict[tuple[int, int], str] = {}
    for i, name in enumerate(header):
        for j, link in enumerate(rows.get(name, [])):
            if i != j:
                links[(i, j)] = link
    return Topology(gpus=tuple(header), links=links)


def is_nvlink(link: str) -> bool:
    """``NV4``, ``NV18``: a bonded set of NVLinks."""
    return re.fullmatch(r"NV\d+", link) is not None


# --- helpers of the checks -------------------------------------------------------------------------------


def in_gib(num_bytes: float) -> str:
    """``34359738368`` -> ``32.0 GiB``."""
    return f"{num_bytes / GIB:.1f} GiB"


def in_gb(num_bytes: float) -> str:
    """``500000000000`` -> ``500 GB``."""
    return f"{num_bytes / GB:.0f} GB"


def gpus_of(raw: RawHost) -> tuple[list[Gpu], str | None]:
    """The GPUs nvidia-smi listed, or why there are none (the no-GPU headline)."""
    return gpus_from(raw.nvidia_smi)


def gpus_from(result: CommandResult) -> tuple[list[Gpu], str | None]:
    """The GPUs in one ``nvidia-smi --query-gpu`` answer, or why there are none."""
    if result.problem == "not found":
        return [], "nvidia-smi not found: no NVIDIA driver is installed"
    if not result.ok:
        return [], f"nvidia-smi failed: {result.failure_text()}"
    try:
        gpus = parse_gpus(result.stdout)
    except ValueError as exc:
        return [], f"cannot read nvidia-smi output: {exc}"
    if not gpus:
        return [], "nvidia-smi lists no GPU"
    return gpus, None


def weights_of(exp: Expectations) -> tuple[int, str, bool]:
    """Checkpoint size in GB (model.size_gb, else a known model), its name, and whether it is assumed."""
    model = exp.model
    if exp.weights_gb is not None:
        return exp.weights_gb, model or "model", False
    tail = (model or "").rstrip("/").rsplit("/", 1)[-1].lower()
    for key in sorted(MODEL_WEIGHTS_GB, key=len, reverse=True):
        if tail.startswith(key):
            return MODEL_WEIGHTS_GB[key], model or key, False
    return MODEL_WEIGHTS_GB[DEFAULT_MODEL], "GLM-5-NVFP4", True


def docker_of(raw: RawHost) -> tuple[DockerInfo | None, str | None]:
    """The host's docker info, or why there is none (CLI missing, daemon not reachable, unreadable)."""
    result = raw.docker_info
    if result.problem == "not found":
        return None, "docker CLI not found"
    if not result.ok and not result.stdout.strip().startswith("{"):
        return None, result.failure_text()
    try:
        info = parse_docker_info(result.stdout)
    except ValueError as exc:
        return None, str(exc)
    if info.server_errors or not info.server_version:
        errors = "; ".join(info.server_errors) or result.failure_text()
        return None, f"Docker daemon not reachable: {' '.join(errors.split())}"
    return info, None


def skipped(check_id: str, group: str, title: str, why: str) -> Check:
    """A check that does not apply to this host, with the reason."""
    return Check(check_id, group, title, "skip", why)
