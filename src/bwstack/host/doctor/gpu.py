"""``bwstack doctor``'s GPU checks: driver branch, GPU arch, GPU count and memory, and the peer links.

Pure functions from a :class:`~bwstack.host.doctor.facts.RawHost` and the variant's
:class:`~bwstack.host.doctor.facts.Expectations` to a :class:`~bwstack.host.doctor.facts.Check`. Sources of
the
thresholds:

- driver branch per CUDA toolkit: NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" table and
  docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html: 12.8 ships R570,
  12.9 R575, 13.x needs R580 (sm120-backends.md §9).
- PCIe-only GPU peers: ``--disable-custom-all-reduce`` and ``NCCL_P2P_LEVEL=SYS`` in the public 8x RTX PRO
  6000 recipes (sm120-backends.md §6A/§6B); IOMMU/ACS in the P2P path as a cause of NCCL hangs:
  NVIDIA/nccl#199 and NCCL's troubleshooting guide ("PCI Access Control Services"); ``iommu=pt`` in
  voipmonitor/rtx6kpro.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from bwstack.host.doctor.facts import (
    G_GPU,
    G_MULTI,
    GB,
    MIB,
    Check,
    Expectations,
    Gpu,
    RawHost,
    Status,
    Topology,
    driver_branch,
    gpus_of,
    in_gib,
    is_nvlink,
    min_driver_branch,
    parse_topology,
    skipped,
    weights_of,
)

MEM_FRACTION = 0.85  # --mem-fraction-static of the public recipes (0.85-0.9): weights must fit well inside it


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


def _gpu_summary(gpus: list[Gpu]) -> str:
    groups = Counter((g.name, g.arch or "sm?") for g in gpus)
    return ", ".join(f"{count}x {name} ({arch})" for (name, arch), count in groups.items())


def check_gpu_arch(raw: RawHost, exp: Expectations) -> Check:
    """GPU model and compute capability against the variant's arch list."""
    title = "GPU arch"
    gpus, why = gpus_of(raw)
    if why is not None:
        return skipped("gpu_arch", G_GPU, title, "no NVIDIA GPU detected")
    if not exp.gpu_archs:
        return skipped("gpu_arch", G_GPU, title, f"{_gpu_summary(gpus)}; no variant to compare against")
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
        return skipped("gpu_count", G_GPU, title, "no NVIDIA GPU detected")
    if exp.tp_size is None:
        return skipped("gpu_count", G_GPU, title, f"{len(gpus)} GPU(s); no tp_size known")
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
        return skipped("gpu_memory", G_GPU, title, "no NVIDIA GPU detected")
    sizes = [g.memory_mib for g in gpus if g.memory_mib is not None]
    if not sizes:
        return Check("gpu_memory", G_GPU, title, "warn", "nvidia-smi reports no memory.total", "")
    tp = exp.tp_size or len(gpus)
    weights_gb, name, assumed = weights_of(exp)
    fraction = exp.mem_fraction or MEM_FRACTION
    per_gpu = weights_gb * GB / tp
    smallest = min(sizes) * MIB
    usable = smallest * fraction
    what = f"{name} ≈{weights_gb} GB" + (" (assumed; set model.size_gb)" if assumed else "")
    detail = f"{what} over tp {tp} = {in_gib(per_gpu)} per GPU; smallest GPU has {in_gib(smallest)}"
    if per_gpu > usable:
        return Check(
            "gpu_memory",
            G_GPU,
            title,
            "warn",
            f"{detail}: more than {fraction:.0%} of it, no room for the KV cache",
            "raise tp_size or use GPUs with more memory",
        )
    left = in_gib(usable - per_gpu)
    return Check("gpu_memory", G_GPU, title, "pass", f"{detail}; {left} left for KV cache at {fraction:g}")


def _multi_gpu(raw: RawHost, exp: Expectations, check_id: str, title: str) -> Check | None:
    """The skip verdict shared by the P2P and IOMMU checks, or None when peers matter."""
    gpus, why = gpus_of(raw)
    if why is not None:
        return skipped(check_id, G_MULTI, title, "no NVIDIA GPU detected")
    if len(gpus) < 2 or (exp.tp_size is not None and exp.tp_size < 2):
        return skipped(check_id, G_MULTI, title, "single GPU (or tp_size 1): no GPU-to-GPU traffic")
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
