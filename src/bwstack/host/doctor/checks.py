"""The judgements of ``bwstack doctor``: every check in report order, and the no-GPU headline.

Input is a :class:`~bwstack.host.doctor.facts.RawHost` (what :mod:`bwstack.host.doctor.probe` recorded) and
the :class:`~bwstack.host.doctor.facts.Expectations` of the image variant (CUDA toolkit, GPU archs, largest
tp_size). Nothing here or in the check modules (:mod:`~bwstack.host.doctor.gpu`,
:mod:`~bwstack.host.doctor.container`, :mod:`~bwstack.host.doctor.host`) runs a command or reads a file, so
each threshold is tested table-driven against recorded outputs.
"""

from __future__ import annotations

from bwstack.host.doctor.container import check_compose, check_docker_engine, check_gpu_runtime
from bwstack.host.doctor.facts import G_STACK, Check, Expectations, RawHost, gpus_of
from bwstack.host.doctor.gpu import (
    check_driver,
    check_gpu_arch,
    check_gpu_count,
    check_gpu_memory,
    check_iommu,
    check_p2p,
)
from bwstack.host.doctor.host import check_disk, check_memlock, check_shm
from bwstack.host.doctor.kernel import check_kernel_log


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


def judge(raw: RawHost, exp: Expectations) -> list[Check]:
    """Every check, in report order."""
    return [
        check_variant(exp),
        check_driver(raw, exp),
        check_gpu_arch(raw, exp),
        check_gpu_count(raw, exp),
        check_gpu_memory(raw, exp),
        check_kernel_log(raw.kernel_log),
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
