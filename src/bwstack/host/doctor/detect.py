"""This host's GPUs in one record (arch and count), from the doctor's ``nvidia-smi`` query: what
``bwstack up`` chooses a profile for and what ``sweep --bench`` labels its figures with."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bwstack.host.doctor.command import NVIDIA_SMI_QUERY
from bwstack.host.doctor.facts import gpus_from
from bwstack.host.doctor.probe import HostProbe


@dataclass(frozen=True)
class Host:
    """The GPUs this host has: ``arch`` None with ``problem`` set when there is no usable NVIDIA GPU."""

    arch: str | None
    count: int
    summary: str
    problem: str | None = None


def detect_host(probe: HostProbe) -> Host:
    """The host's GPU arch and count, from the doctor's nvidia-smi query."""
    gpus, problem = gpus_from(probe.run("nvidia_smi", NVIDIA_SMI_QUERY))
    if problem is not None:
        return Host(None, 0, f"no NVIDIA GPU ({problem})", problem)
    kinds = Counter((g.name, g.arch or "sm?") for g in gpus)
    summary = ", ".join(f"{count}x {name} ({arch})" for (name, arch), count in kinds.items())
    archs = {g.arch for g in gpus}
    if None in archs:
        return Host(None, len(gpus), summary, "nvidia-smi reports no compute capability for a GPU")
    if len(archs) > 1:
        return Host(None, len(gpus), summary, f"GPUs of several archs ({', '.join(sorted(map(str, archs)))})")
    return Host(str(archs.pop()), len(gpus), summary)
