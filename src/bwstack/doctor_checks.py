"""The judgements of ``bwstack doctor``: pure functions from raw host text to pass / warn / fail with a fix.

Input is a :class:`RawHost` (what :mod:`bwstack.doctor_probe` recorded) and the :class:`Expectations` of the
image variant (CUDA toolkit, GPU archs, largest tp_size). Nothing here runs a command or reads a file, so each
threshold below is tested table-driven against recorded outputs. Sources of the thresholds:

- driver branch per CUDA toolkit: NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" table and
  docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html: 12.8 ships R570,
  12.9 R575, 13.x needs R580 (sm120-backends.md §9).
- healthcheck ``start_interval``: Docker Engine >= 25.0 (API 1.44) and Compose >= 2.20.2 (docker/compose
  PR #11360); GPU device reservations and profiles: Compose >= 1.28 (conventions.md §1); ``--gpus``: Engine
  >= 19.03.
- PCIe-only GPU peers: ``--disable-custom-all-reduce`` and ``NCCL_P2P_LEVEL=SYS`` in the public 8x RTX PRO
  6000 recipes (sm120-backends.md §6A/§6B); IOMMU/ACS in the P2P path as a cause of NCCL hangs:
  NVIDIA/nccl#199 and NCCL's troubleshooting guide ("PCI Access Control Services"); ``iommu=pt`` in
  voipmonitor/rtx6kpro.
- rootless Docker cannot grant ``ulimits: memlock: -1``: "error setting rlimit type 8: operation not
  permitted" (onyx-dot-app/onyx PR #9277, elastic/start-local#66).
- /dev/shm: SGLang's docker docs run with ``--shm-size 32g`` or ``--ipc=host``.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from bwstack.doctor_probe import CommandResult, FsStats
from bwstack.modelcache import CacheStatus

Status = Literal["pass", "warn", "fail", "skip"]

GIB = 1024**3
MIB = 1024**2
GB = 1000**3

SHM_FAIL_BYTES = 1 * GIB
SHM_WANT_BYTES = 32 * GIB
DISK_MARGIN_BYTES = 100 * GB  # serving image, JIT caches (FlashInfer, DeepGEMM, Triton), a second checkpoint
DISK_FAIL_BYTES = 20 * GB
MEM_FRACTION = 0.85  # --mem-fraction-static of the public recipes (0.85-0.9): weights must fit well inside it
ENGINE_MIN = (19, 3, 0)  # docker run --gpus
ENGINE_START_INTERVAL = (25, 0, 0)
COMPOSE_START_INTERVAL = (2, 20, 2)
COMPOSE_V1_MIN = (1, 28, 0)

# Approximate checkpoint size on disk (GB): lukealonso/GLM-5-NVFP4 ~410 GB, nvidia/GLM-5.2-NVFP4 ~433 GB
# (sm120-backends.md §5). Matched against the last part of the model id, longest prefix first.
MODEL_WEIGHTS_GB = {"glm-5-nvfp4": 410, "glm-5.2-nvfp4": 433}
DEFAULT_MODEL = "glm-5-nvfp4"

# Compute capability by product name, for drivers whose nvidia-smi prints [N/A] for compute_cap.
KNOWN_GPUS = (
    ("RTX PRO 6000 Blackwell", (12, 0)),
    ("RTX 5090", (12, 0)),
    ("GB10", (12, 1)),
    ("B300", (10, 3)),
    ("B200", (10, 0)),
    ("H200", (9, 0)),
    ("H100", (9, 0)),
)


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


def _known_cap(name: str) -> tuple[int, int] | None:
    for needle, cap in KNOWN_GPUS:
        if needle.lower() in name.lower():
            return cap
    return None


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
                compute_cap=_cap(cap) or _known_cap(name),
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


# --- helpers ---------------------------------------------------------------------------------------------


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.1f} GiB"


def _gb(num_bytes: float) -> str:
    return f"{num_bytes / GB:.0f} GB"


def _at_least(version: tuple[int, int, int], floor: tuple[int, int, int]) -> bool:
    return version >= floor


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


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


def _gpu_summary(gpus: list[Gpu]) -> str:
    groups = Counter((g.name, g.arch or "sm?") for g in gpus)
    return ", ".join(f"{count}x {name} ({arch})" for (name, arch), count in groups.items())


def _weights(exp: Expectations) -> tuple[int, str, bool]:
    """Checkpoint size in GB (model.size_gb, else a known model), its name, and whether it is assumed."""
    model = exp.model
    if exp.weights_gb is not None:
        return exp.weights_gb, model or "model", False
    tail = (model or "").rstrip("/").rsplit("/", 1)[-1].lower()
    for key in sorted(MODEL_WEIGHTS_GB, key=len, reverse=True):
        if tail.startswith(key):
            return MODEL_WEIGHTS_GB[key], model or key, False
    return MODEL_WEIGHTS_GB[DEFAULT_MODEL], "GLM-5-NVFP4", True


def _skip(check_id: str, group: str, title: str, why: str) -> Check:
    return Check(check_id, group, title, "skip", why)


# --- the checks ------------------------------------------------------------------------------------------

G_STACK, G_GPU, G_DOCKER, G_HOST, G_MULTI = "stack", "gpu", "docker", "host", "multi-gpu"


def check_variant(exp: Expectations) -> Check:
    """Which variant the host is judged against."""
    title = "image variant"
    if exp.variant is None:
        return Check(
            "variant",
            G_STACK,
            title,
            "warn",
            f"no variant: {exp.problem or 'none selected'}; GPU checks use the Blackwell minimums",
            "run in the folder with profiles.yaml, pass -f FILE, or --variant NAME",
        )
    archs = ", ".join(exp.gpu_archs) or "?"
    arch_list = exp.torch_cuda_arch_list or "?"
    parts = [f"{exp.variant} (CUDA {exp.cuda_toolkit or '?'}, {archs}, TORCH_CUDA_ARCH_LIST {arch_list})"]
    if exp.tp_size is not None:
        parts.append(f"largest tp_size {exp.tp_size}")
    if exp.source:
        parts.append(f"from {exp.source}")
    if exp.other_variants:
        parts.append(f"profiles also use {', '.join(exp.other_variants)} (check with --variant)")
    return Check("variant", G_STACK, title, "pass", "; ".join(parts))


def check_driver(raw: RawHost, exp: Expectations) -> Check:
    """NVIDIA driver branch against the variant's CUDA toolkit."""
    title = "NVIDIA driver"
    need = min_driver_branch(exp.cuda_toolkit)
    target = f"CUDA {exp.cuda_toolkit}" if need is not None else "Blackwell (CUDA 12.8)"
    need = need or 570
    install = f"install NVIDIA driver R{need} or newer (docs.nvidia.com/datacenter/tesla/drivers)"
    gpus, why = gpus_of(raw)
    if why is not None:
        fix = (
            install
            if raw.nvidia_smi.problem == "not found"
            else "load the driver: reboot, check `dmesg | grep -i nvrm`"
        )
        return Check("driver", G_GPU, title, "fail", why, fix)
    versions = sorted({g.driver for g in gpus})
    branch = driver_branch(versions[0])
    if branch is None:
        return Check("driver", G_GPU, title, "warn", f"unrecognised driver version {versions[0]!r}", install)
    if branch < need:
        return Check(
            "driver",
            G_GPU,
            title,
            "fail",
            f"driver {versions[0]} (R{branch}) is older than R{need}, the minimum for {target}",
            install,
        )
    return Check("driver", G_GPU, title, "pass", f"driver {versions[0]} (R{branch}) >= R{need} for {target}")


def _arch_list(text: str | None) -> list[tuple[int, int, str]]:
    """``"9.0a;10.0+PTX 12.0f"`` -> [(9, 0, 'a'), (10, 0, '+PTX'), (12, 0, 'f')]."""
    entries: list[tuple[int, int, str]] = []
    for token in re.split(r"[;,\s]+", text or ""):
        match = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", token.strip())
        if match:
            entries.append(
                (int(match.group(1)), int(match.group(2)), match.group(3) + (match.group(4) or ""))
            )
    return entries


def arch_coverage(cap: tuple[int, int], arch_list: str | None) -> Literal["native", "ptx", "none"]:
    """Whether TORCH_CUDA_ARCH_LIST has code for ``cap``: native, only by PTX JIT, or none.

    ``12.0a`` runs on exactly 12.0; ``12.0f`` and plain ``12.0`` on 12.x with x >= 0; ``+PTX`` on anything
    newer.
    """
    best: Literal["native", "ptx", "none"] = "none"
    for major, minor, suffix in _arch_list(arch_list):
        exact = suffix.startswith("a")
        if (major, minor) == cap or (not exact and major == cap[0] and minor <= cap[1]):
            return "native"
        if suffix.endswith("+PTX") and (major, minor) <= cap:
            best = "ptx"
    return best


def _judge_one_arch(gpu: Gpu, exp: Expectations) -> tuple[Status, str]:
    if gpu.compute_cap is None or gpu.arch is None:
        return "warn", f"{gpu.name}: compute capability unknown"
    cap = f"{gpu.compute_cap[0]}.{gpu.compute_cap[1]}"
    if gpu.arch not in exp.gpu_archs:
        return (
            "fail",
            f"{gpu.name} is {gpu.arch} (compute capability {cap}); "
            f"{exp.variant} targets {', '.join(exp.gpu_archs)}",
        )
    coverage = arch_coverage(gpu.compute_cap, exp.torch_cuda_arch_list)
    if coverage == "native":
        return "pass", f"{gpu.name}: {gpu.arch} (compute capability {cap}) is in {exp.variant}'s gpu_archs"
    if coverage == "ptx":
        return (
            "warn",
            f"{gpu.name}: TORCH_CUDA_ARCH_LIST {exp.torch_cuda_arch_list} reaches {cap} only by PTX JIT",
        )
    return "warn", f"{gpu.name}: TORCH_CUDA_ARCH_LIST {exp.torch_cuda_arch_list!r} has no code for {cap}"


def check_gpu_arch(raw: RawHost, exp: Expectations) -> Check:
    """GPU model and compute capability against the variant's arch list."""
    title = "GPU arch"
    gpus, why = gpus_of(raw)
    if why is not None:
        return _skip("gpu_arch", G_GPU, title, "no NVIDIA GPU detected")
    if not exp.gpu_archs:
        return _skip("gpu_arch", G_GPU, title, f"{_gpu_summary(gpus)}; no variant to compare against")
    verdicts = {_judge_one_arch(g, exp) for g in gpus}
    rank = {"fail": 0, "warn": 1, "pass": 2}
    status, _ = min(verdicts, key=lambda v: rank[v[0]])
    detail = "; ".join(sorted(text for _, text in verdicts))
    if len({g.name for g in gpus}) > 1:
        status = "fail" if status == "fail" else "warn"
        detail = f"mixed GPU models ({_gpu_summary(gpus)}); {detail}"
    fix = {
        "fail": "use a variant whose pins.toml [cuda] gpu_archs lists this GPU, "
        f"or a host with {', '.join(exp.gpu_archs)} GPUs",
        "warn": "add the GPU's arch to [cuda] torch_cuda_arch_list in pins.toml and rebuild, "
        "or keep one GPU model per host",
        "pass": "",
    }[status]
    return Check("gpu_arch", G_GPU, title, status, detail, fix)


def check_gpu_count(raw: RawHost, exp: Expectations) -> Check:
    """GPU count against the largest tp_size."""
    title = "GPU count"
    gpus, why = gpus_of(raw)
    if why is not None:
        return _skip("gpu_count", G_GPU, title, "no NVIDIA GPU detected")
    if exp.tp_size is None:
        return _skip("gpu_count", G_GPU, title, f"{len(gpus)} GPU(s); no tp_size known")
    if len(gpus) < exp.tp_size:
        return Check(
            "gpu_count",
            G_GPU,
            title,
            "fail",
            f"tp_size {exp.tp_size} needs {exp.tp_size} GPUs on one host; this host has {len(gpus)}",
            "lower tp_size in profiles.yaml, or spread it over nodes (bwstack render --target k8s --nodes N)",
        )
    return Check("gpu_count", G_GPU, title, "pass", f"{len(gpus)} GPU(s) for tp_size {exp.tp_size}")


def check_gpu_memory(raw: RawHost, exp: Expectations) -> Check:
    """Per-GPU memory against the model's weights split over tp_size (warn only)."""
    title = "GPU memory"
    gpus, why = gpus_of(raw)
    if why is not None:
        return _skip("gpu_memory", G_GPU, title, "no NVIDIA GPU detected")
    sizes = [g.memory_mib for g in gpus if g.memory_mib is not None]
    if not sizes:
        return Check("gpu_memory", G_GPU, title, "warn", "nvidia-smi reports no memory.total", "")
    tp = exp.tp_size or len(gpus)
    weights_gb, name, assumed = _weights(exp)
    fraction = exp.mem_fraction or MEM_FRACTION
    per_gpu = weights_gb * GB / tp
    smallest = min(sizes) * MIB
    usable = smallest * fraction
    what = f"{name} ≈{weights_gb} GB" + (" (assumed; set model.size_gb)" if assumed else "")
    detail = f"{what} over tp {tp} = {_gib(per_gpu)} per GPU; smallest GPU has {_gib(smallest)}"
    if per_gpu > usable:
        return Check(
            "gpu_memory",
            G_GPU,
            title,
            "warn",
            f"{detail}: more than {fraction:.0%} of it, no room for the KV cache",
            "raise tp_size or use GPUs with more memory",
        )
    left = _gib(usable - per_gpu)
    return Check("gpu_memory", G_GPU, title, "pass", f"{detail}; {left} left for KV cache at {fraction:g}")


def _docker(raw: RawHost) -> tuple[DockerInfo | None, str | None]:
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


def check_docker_engine(raw: RawHost, exp: Expectations) -> Check:
    """Docker Engine reachable and recent enough (``start_interval`` needs 25.0 when the stack enables it)."""
    title = "Docker Engine"
    info, why = _docker(raw)
    if info is None:
        fix = "install Docker Engine >= 25 (docs.docker.com/engine/install)"
        if why and "not found" not in why:
            fix = "start dockerd (sudo systemctl start docker) or add your user to the docker group"
        return Check("docker_engine", G_DOCKER, title, "fail", why or "docker info failed", fix)
    version = parse_version(info.server_version)
    upgrade = "upgrade Docker Engine to >= 25 (docs.docker.com/engine/install)"
    text = f"Engine {info.server_version}" + (" (rootless)" if info.rootless else "")
    if version is None:
        return Check(
            "docker_engine", G_DOCKER, title, "warn", f"unrecognised version {info.server_version!r}", upgrade
        )
    if not _at_least(version, ENGINE_MIN):
        return Check("docker_engine", G_DOCKER, title, "fail", f"{text}: no --gpus before 19.03", upgrade)
    if _at_least(version, ENGINE_START_INTERVAL):
        return Check(
            "docker_engine", G_DOCKER, title, "pass", f"{text}; healthcheck start_interval supported"
        )
    if exp.start_interval:
        return Check(
            "docker_engine",
            G_DOCKER,
            title,
            "warn",
            f"{text} < 25.0 ignores healthcheck start_interval (stack.compose_features): health turns green "
            "up to one interval late",
            upgrade + ", or drop start_interval from stack.compose_features",
        )
    return Check(
        "docker_engine", G_DOCKER, title, "pass", f"{text}; start_interval would need >= 25.0 (not enabled)"
    )


def check_gpu_runtime(raw: RawHost) -> Check:
    """The NVIDIA container runtime or CDI devices in docker info."""
    title = "NVIDIA container runtime"
    info, _why = _docker(raw)
    if info is None:
        return _skip("gpu_runtime", G_DOCKER, title, "docker info unavailable")
    toolkit_fix = (
        "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker` "
        "and `sudo systemctl restart docker`"
    )
    gpus = [d for d in info.cdi_devices or () if d.startswith("nvidia.com/gpu")]
    if "nvidia" in info.runtimes:
        default = (
            " (the default)"
            if info.default_runtime == "nvidia"
            else f"; default runtime {info.default_runtime}"
        )
        extra = f"; CDI devices: {len(gpus)} nvidia.com/gpu" if gpus else ""
        return Check("gpu_runtime", G_DOCKER, title, "pass", f"runtime nvidia registered{default}{extra}")
    if gpus:
        return Check(
            "gpu_runtime",
            G_DOCKER,
            title,
            "pass",
            f"CDI devices: {', '.join(gpus[:3])}{' …' if len(gpus) > 3 else ''}",
        )
    if info.cdi_spec_dirs and info.cdi_devices is None:
        return Check(
            "gpu_runtime",
            G_DOCKER,
            title,
            "warn",
            f"no nvidia runtime; CDI is on ({', '.join(info.cdi_spec_dirs)}) but this engine does not "
            "list CDI devices, so nvidia.com/gpu cannot be confirmed",
            "check `nvidia-ctk cdi list` shows nvidia.com/gpu, or " + toolkit_fix,
        )
    return Check(
        "gpu_runtime",
        G_DOCKER,
        title,
        "fail",
        f"no nvidia runtime (runtimes: {', '.join(info.runtimes) or 'none'}) and no nvidia.com/gpu CDI "
        "device: containers cannot see the GPUs",
        toolkit_fix,
    )


def _compose_version(result: CommandResult) -> tuple[int, int, int] | None:
    if not result.ok:
        return None
    return parse_version(result.stdout)


def check_compose(raw: RawHost, exp: Expectations) -> Check:
    """Compose v2 present (v1: warn from 1.28, fail before); >= 2.20.2 when start_interval is on."""
    title = "Docker Compose"
    install = "install the Compose v2 plugin >= 2.20.2 (package docker-compose-plugin)"
    version = _compose_version(raw.compose)
    how = "docker compose"
    if version is None:
        version, how = _compose_version(raw.compose_standalone), "docker-compose"
    if version is None:
        why = raw.compose.failure_text() if raw.compose.problem != "not found" else "docker CLI not found"
        return Check("compose", G_DOCKER, title, "fail", f"no Docker Compose ({why})", install)
    text = f"{how} {_dotted(version)}"
    if version[0] < 2 and not _at_least(version, COMPOSE_V1_MIN):
        return Check(
            "compose",
            G_DOCKER,
            title,
            "fail",
            f"{text}: no profiles or GPU reservations before 1.28",
            install,
        )
    if version[0] < 2:
        return Check(
            "compose",
            G_DOCKER,
            title,
            "warn",
            f"{text} is Compose v1 (end of life July 2023): no `up --wait`",
            install,
        )
    if _at_least(version, COMPOSE_START_INTERVAL):
        return Check("compose", G_DOCKER, title, "pass", f"{text} (v2; start_interval supported)")
    if exp.start_interval:
        return Check(
            "compose",
            G_DOCKER,
            title,
            "warn",
            f"{text} < 2.20.2 does not pass on healthcheck start_interval (stack.compose_features)",
            install,
        )
    return Check(
        "compose", G_DOCKER, title, "pass", f"{text} (v2; start_interval would need >= 2.20.2, not enabled)"
    )


def check_shm(raw: RawHost) -> Check:
    """Shared memory size: the services run with ipc: host, so this host tmpfs is what NCCL gets."""
    title = "/dev/shm"  # noqa: S108 - a label
    moot = "services use ipc: host, so containers share this /dev/shm and shm_size does not apply"
    grow = "grow it: `sudo mount -o remount,size=64G /dev/shm` (and persist in /etc/fstab)"
    if raw.shm is None:
        return Check("shm", G_HOST, title, "warn", f"cannot read /dev/shm; {moot}", grow)
    size = raw.shm.size_bytes
    if size < SHM_FAIL_BYTES:
        return Check(
            "shm",
            G_HOST,
            title,
            "fail",
            f"{_gib(size)}: too small for NCCL's shared-memory transport; {moot}",
            grow,
        )
    if size < SHM_WANT_BYTES:
        return Check("shm", G_HOST, title, "warn", f"{_gib(size)} < {_gib(SHM_WANT_BYTES)}; {moot}", grow)
    return Check("shm", G_HOST, title, "pass", f"{_gib(size)}; {moot}")


def check_memlock(raw: RawHost) -> Check:
    """memlock: services ask for ``ulimits: memlock: -1``; rootless Docker cannot grant it."""
    title = "memlock limit"
    info, _why = _docker(raw)
    asks = "services set ulimits memlock: -1"
    if raw.memlock == "unlimited":
        return Check("memlock", G_HOST, title, "pass", f"unlimited; {asks}")
    if raw.memlock is None:
        return Check(
            "memlock", G_HOST, title, "warn", f"cannot read the memlock limit; {asks}", "run `ulimit -l`"
        )
    here = f"{raw.memlock} KiB in this shell"
    if info is not None and info.rootless:
        return Check(
            "memlock",
            G_HOST,
            title,
            "fail",
            f"{here} and rootless Docker: memlock -1 fails with 'error setting rlimit type 8: operation not "
            "permitted' (onyx-dot-app/onyx PR #9277)",
            "use rootful Docker, or raise the rootless user's hard memlock limit to unlimited "
            "(LimitMEMLOCK=infinity)",
        )
    if info is None:
        return Check(
            "memlock",
            G_HOST,
            title,
            "warn",
            f"{here}; Docker unavailable, so cannot tell whether the container limit can be raised",
            "set `* - memlock unlimited` in /etc/security/limits.conf",
        )
    return Check("memlock", G_HOST, title, "pass", f"{here}; {asks}, which rootful Docker grants")


def check_disk(raw: RawHost, exp: Expectations) -> Check:
    """Free space where the model cache volume lives (the Docker data root)."""
    title = "model cache disk"
    if raw.data_root is None:
        return _skip("disk", G_HOST, title, "Docker data root unknown (docker info unavailable)")
    if raw.data_root_fs is None:
        return Check(
            "disk", G_HOST, title, "warn", f"cannot stat {raw.data_root}", "check free space with `df -h`"
        )
    weights_gb, name, assumed = _weights(exp)
    need = weights_gb * GB + DISK_MARGIN_BYTES
    free = raw.data_root_fs.free_bytes
    what = f"{name} ≈{weights_gb} GB" + (" (assumed)" if assumed else "")
    detail = f"{_gb(free)} free under {raw.data_root}; {what} + {_gb(DISK_MARGIN_BYTES)} margin wanted"
    fix = "free space, or move the Docker data root (daemon.json data-root) to a larger disk"
    if free < DISK_FAIL_BYTES:
        return Check("disk", G_HOST, title, "fail", f"{detail}: too little to pull the serving image", fix)
    if free < need:
        return Check("disk", G_HOST, title, "warn", f"{detail} (fine if the model is already cached)", fix)
    return Check("disk", G_HOST, title, "pass", detail)


def check_model_cache(found: CacheStatus | None) -> Check:
    """The model in the services' cache: present (verified by `bwstack fetch`), partial or missing."""
    title = "model cache"
    if found is None:
        return _skip(
            "model_cache", G_HOST, title, "no Hub model to fetch (no profiles file, or a local path)"
        )
    if found.state == "present":
        return Check("model_cache", G_HOST, title, "pass", found.words())
    if found.state == "unknown":
        return _skip("model_cache", G_HOST, title, found.detail)
    fix = "bwstack fetch (resumable); `bwstack up` refuses to start until the model is fetched"
    return Check("model_cache", G_HOST, title, "warn", found.words(), fix)


def _multi_gpu(raw: RawHost, exp: Expectations, check_id: str, title: str) -> Check | None:
    """The skip verdict shared by the P2P and IOMMU checks, or None when peers matter."""
    gpus, why = gpus_of(raw)
    if why is not None:
        return _skip(check_id, G_MULTI, title, "no NVIDIA GPU detected")
    if len(gpus) < 2 or (exp.tp_size is not None and exp.tp_size < 2):
        return _skip(check_id, G_MULTI, title, "single GPU (or tp_size 1): no GPU-to-GPU traffic")
    return None


def _topology(raw: RawHost) -> Topology | None:
    if not raw.nvidia_topo.ok:
        return None
    topo = parse_topology(raw.nvidia_topo.stdout)
    return topo if len(topo.gpus) >= 2 else None


def check_p2p(raw: RawHost, exp: Expectations) -> Check:
    """GPU peer links from nvidia-smi topo -m; PCIe-only boxes want custom all-reduce off (§6A/§6B)."""
    title = "GPU P2P topology"
    skipped = _multi_gpu(raw, exp, "p2p", title)
    if skipped is not None:
        return skipped
    topo = _topology(raw)
    if topo is None:
        why = raw.nvidia_topo.failure_text()
        return Check(
            "p2p", G_MULTI, title, "warn", f"cannot read the topology ({why})", "run `nvidia-smi topo -m`"
        )
    pairs = Counter(topo.pairs())
    listing = ", ".join(f"{count}x {link}" for link, count in sorted(pairs.items()))
    if all(is_nvlink(link) for link in pairs):
        return Check("p2p", G_MULTI, title, "pass", f"NVLink between all {len(topo.gpus)} GPUs ({listing})")
    detail = f"GPU pairs without NVLink ({listing}): peers talk over PCIe"
    level = f"; NCCL_P2P_LEVEL={exp.nccl_p2p_level}" if exp.nccl_p2p_level else ""
    if exp.custom_all_reduce_off:
        return Check(
            "p2p", G_MULTI, title, "pass", f"{detail}; every profile has --disable-custom-all-reduce{level}"
        )
    return Check(
        "p2p",
        G_MULTI,
        title,
        "warn",
        detail,
        "add --disable-custom-all-reduce to model.extra_args (and NCCL_P2P_LEVEL=SYS to model.env), "
        "as the 8x RTX PRO 6000 recipes do",
    )


def check_iommu(raw: RawHost, exp: Expectations) -> Check:
    """IOMMU translation in the PCIe peer path: a known cause of NCCL P2P hangs."""
    title = "IOMMU"
    skipped = _multi_gpu(raw, exp, "iommu", title)
    if skipped is not None:
        return skipped
    topo = _topology(raw)
    if topo is not None and all(is_nvlink(link) for link in topo.pairs()):
        return Check("iommu", G_MULTI, title, "pass", "GPU peers use NVLink, not PCIe")
    tokens = set((raw.kernel_cmdline or "").split())
    if "iommu=pt" in tokens:
        return Check("iommu", G_MULTI, title, "pass", "iommu=pt on the kernel command line")
    if tokens & {"iommu=off", "intel_iommu=off", "amd_iommu=off"}:
        return Check("iommu", G_MULTI, title, "pass", "IOMMU switched off on the kernel command line")
    if raw.iommu_groups == 0:
        return Check("iommu", G_MULTI, title, "pass", "IOMMU inactive (no IOMMU groups)")
    fix = (
        "if NCCL hangs or P2P is slow: add iommu=pt to GRUB_CMDLINE_LINUX and reboot, or turn off "
        "ACS / IOMMU in the BIOS (NVIDIA/nccl#199); NCCL_P2P_DISABLE=1 confirms the cause"
    )
    if raw.iommu_groups is None:
        return Check(
            "iommu",
            G_MULTI,
            title,
            "warn",
            "cannot tell whether the IOMMU is active (/sys/kernel/iommu_groups unreadable)",
            fix,
        )
    return Check(
        "iommu",
        G_MULTI,
        title,
        "warn",
        f"IOMMU active ({raw.iommu_groups} groups) without iommu=pt: PCIe peer traffic is translated",
        fix,
    )


def judge(raw: RawHost, exp: Expectations) -> list[Check]:
    """Every check, in report order."""
    return [
        check_variant(exp),
        check_driver(raw, exp),
        check_gpu_arch(raw, exp),
        check_gpu_count(raw, exp),
        check_gpu_memory(raw, exp),
        check_docker_engine(raw, exp),
        check_gpu_runtime(raw),
        check_compose(raw, exp),
        check_shm(raw),
        check_memlock(raw),
        check_disk(raw, exp),
        check_p2p(raw, exp),
        check_iommu(raw, exp),
    ]


def no_gpu_headline(raw: RawHost) -> str | None:
    """The one-sentence verdict for a host without a usable NVIDIA GPU, else None."""
    _gpus, why = gpus_of(raw)
    if why is None:
        return None
    return f"no NVIDIA GPU or driver on this host ({why}); bwstack serves only on NVIDIA GPUs"
