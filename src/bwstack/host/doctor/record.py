"""The host facts a sweep bundle records: what doctor reads, as one JSON object, judging nothing.

GPU model, count, arch, driver and memory (``nvidia-smi --query-gpu``), the driver's CUDA version (plain
``nvidia-smi``'s banner; null where not recorded), the GPU-to-GPU links (``nvidia-smi topo -m``), kernel, OS,
CPUs, memory and Engine version (``docker info``), Compose's version. The probe is doctor's
(:func:`bwstack.host.doctor.probe.default_probe`: ``BWSTACK_DOCTOR_FIXTURE`` answers from a recorded host).
``host_id`` names the host without naming it: a digest of the Docker engine's random ID (else of the host
name), so bundles of one host merge as one host even when ``--redact-host`` drops its name.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from collections import Counter
from typing import Any

from bwstack.host.doctor.command import collect
from bwstack.host.doctor.facts import gpus_from, is_nvlink, parse_topology, parse_version
from bwstack.host.doctor.probe import HostProbe

SCHEMA = "bwstack.host-facts/1"


def _docker_fields(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def topology_words(text: str) -> str | None:
    """``NVLink (NV18) between all 8 GPUs`` / ``PCIe only (NODE, SYS)``; None without a matrix."""
    topo = parse_topology(text)
    pairs = topo.pairs()
    if not pairs:
        return None
    links = Counter(pairs)
    kinds = ", ".join(sorted(links))
    if all(is_nvlink(link) for link in links):
        return f"NVLink ({kinds}) between all {len(topo.gpus)} GPUs"
    if not any(is_nvlink(link) for link in links):
        return f"PCIe only ({kinds})"
    return f"mixed NVLink and PCIe ({kinds})"


def host_facts(probe: HostProbe) -> dict[str, Any]:
    """Everything a bundle says about the host it was made on."""
    raw = collect(probe)
    gpus, no_gpu = gpus_from(raw.nvidia_smi)
    docker = _docker_fields(raw.docker_info.stdout) if raw.docker_info.ok else {}
    engine_id = str(docker.get("ID") or "")
    name = str(docker.get("Name") or platform.node())
    compose = parse_version(raw.compose.stdout) if raw.compose.ok else None
    archs = sorted({g.arch for g in gpus if g.arch})
    banner = probe.run("nvidia_smi_banner", ("nvidia-smi",)) if gpus else None
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", banner.stdout) if banner and banner.ok else None
    return {
        "schema": SCHEMA,
        "host_id": "host-" + hashlib.sha256((engine_id or name).encode()).hexdigest()[:10],
        "hostname": name,
        "gpus": [
            {
                "name": g.name,
                "arch": g.arch,
                "driver": g.driver,
                "memory_mib": g.memory_mib,
                "bus_id": g.bus_id,
            }
            for g in gpus
        ],
        "gpu_count": len(gpus),
        "gpu_model": " + ".join(sorted({g.name for g in gpus})) or None,
        "gpu_arch": " + ".join(archs) or None,
        "driver": " + ".join(sorted({g.driver for g in gpus})) or None,
        "cuda": cuda.group(1) if cuda else None,
        "no_gpu": no_gpu,
        "topology": topology_words(raw.nvidia_topo.stdout) if raw.nvidia_topo.ok else None,
        "kernel": str(docker.get("KernelVersion") or platform.release()),
        "os": docker.get("OperatingSystem"),
        "cpu_arch": docker.get("Architecture") or platform.machine(),
        "cpus": docker.get("NCPU"),
        "memory_bytes": docker.get("MemTotal"),
        "docker": docker.get("ServerVersion"),
        "compose": ".".join(str(n) for n in compose) if compose else None,
        "kernel_cmdline": (raw.kernel_cmdline or "").strip() or None,
        "iommu_groups": raw.iommu_groups,
    }


def summary(facts: dict[str, Any]) -> str:
    """One line: ``8x <GPU> (sm120), driver 595.58.03, PCIe only (…), kernel 6.8``, or the CPUs."""
    if facts.get("gpu_count"):
        words = [f"{facts['gpu_count']}x {facts.get('gpu_model')} ({facts.get('gpu_arch')})"]
        words.append(f"driver {facts.get('driver')}")
        if facts.get("topology"):
            words.append(str(facts["topology"]))
    else:
        words = [f"no GPU, {facts.get('cpus') or '?'} CPUs ({facts.get('cpu_arch') or '?'})"]
    words.append(f"kernel {facts.get('kernel')}")
    return ", ".join(words)
