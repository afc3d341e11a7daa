"""``bwstack doctor``: host preflight before the first ``bwstack up``.

It works out what the selected image variant needs (CUDA toolkit and GPU archs from ``images/<v>/pins.toml``,
the largest ``tp_size`` from profiles.yaml), asks the host through a
:class:`~bwstack.host.doctor.probe.HostProbe`,
judges with :mod:`bwstack.host.doctor.checks`, and prints one table (or JSON). Exit status 0 when nothing
fails (warnings allowed), 1 when a check fails; a host without an NVIDIA GPU gets one clear sentence and exit
1.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bwstack import launch, textlayout
from bwstack.host import enginekind, modelcache, secretfiles
from bwstack.host.doctor import image as image_check
from bwstack.host.doctor.checks import judge, no_gpu_headline
from bwstack.host.doctor.facts import Check, Expectations, RawHost, docker_of, docker_root_dir
from bwstack.host.doctor.host import check_model_cache, check_secrets
from bwstack.host.doctor.kernel import read_kernel_log
from bwstack.host.doctor.probe import CommandResult, HostProbe, default_probe
from bwstack.host.modelcache import CacheStatus
from bwstack.stack import loader, pins, schema
from healthchecks import imagelayout

Echo = Callable[..., Any]

SCHEMA = "bwstack.doctor/1"
NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=name,compute_cap,driver_version,memory.total,pci.bus_id",
    "--format=csv,noheader,nounits",
)
NVIDIA_TOPO = ("nvidia-smi", "topo", "-m")
DOCKER_INFO = ("docker", "info", "--format", "{{json .}}")
COMPOSE_V2 = ("docker", "compose", "version")
COMPOSE_STANDALONE = ("docker-compose", "version")
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
SHM_PATH = "/dev/shm"  # noqa: S108 - measured, never written
STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


# --- what the variant and profiles need ------------------------------------------------------------------


def _uses_flag(stack: schema.StackFile, flag: str) -> bool:
    """True when every profile gets ``flag`` (from model.extra_args or its own extra_args)."""
    if flag in stack.model.extra_args:
        return True
    return all(flag in profile.extra_args for profile in stack.profiles.values())


def _env_everywhere(stack: schema.StackFile, name: str) -> str | None:
    """The value of env ``name`` when every profile gets it (model.env or its own env)."""
    if name in stack.model.env:
        return str(stack.model.env[name])
    values = {profile.env.get(name) for profile in stack.profiles.values()}
    return str(values.pop()) if len(values) == 1 and None not in values else None


def _from_stack(profiles_file: Path, variant: str | None) -> tuple[str, dict[str, Any]]:
    # shape and types only: a host preflight must not depend on the variants' parser snapshots
    stack, _lines = loader.parse_stack_file(profiles_file)
    used = {p.variant or stack.stack.variant for p in stack.profiles.values()}
    chosen = variant or stack.stack.variant
    needs: dict[str, Any] = {
        "tp_size": stack.model.tp_size,
        "model": stack.model.path,
        "weights_gb": stack.model.size_gb,
        "mem_fraction": stack.model.mem_fraction_static,
        "custom_all_reduce_off": _uses_flag(stack, "--disable-custom-all-reduce"),
        "nccl_p2p_level": _env_everywhere(stack, "NCCL_P2P_LEVEL"),
        "start_interval": "start_interval" in stack.stack.compose_features,
        "other_variants": tuple(sorted(used - {chosen})),
        "source": "--variant" if variant else f"{profiles_file.name} stack.variant",
    }
    return chosen, needs


def expectations(profiles_file: Path, variant: str | None) -> Expectations:
    """What the host is judged against; a missing profiles file is a warning in the report, not an error."""
    needs: dict[str, Any] = {"source": "--variant"}
    if profiles_file.is_file():
        variant, needs = _from_stack(profiles_file, variant)
    elif variant is None:
        return Expectations(problem=f"{profiles_file} not found")
    assert variant is not None  # from --variant or the schema's required stack.variant
    pinned = pins.load_variant(profiles_file.parent / "images", variant)
    return Expectations(
        variant=variant,
        cuda_toolkit=pinned.cuda_toolkit,
        gpu_archs=pinned.gpu_archs,
        torch_cuda_arch_list=pinned.torch_cuda_arch_list,
        **needs,
    )


# --- asking the host -------------------------------------------------------------------------------------


def collect(probe: HostProbe) -> RawHost:
    """Run every probe doctor needs; commands that cannot help are not run (and say so)."""
    smi = probe.run("nvidia_smi", NVIDIA_SMI_QUERY)
    topo = probe.run("nvidia_topo", NVIDIA_TOPO) if smi.ok else CommandResult(NVIDIA_TOPO, problem="not run")
    info = probe.run("docker_info", DOCKER_INFO)
    compose = probe.run("compose", COMPOSE_V2)
    standalone = (
        CommandResult(COMPOSE_STANDALONE, problem="not run")
        if compose.ok
        else probe.run("compose_standalone", COMPOSE_STANDALONE)
    )
    root = docker_root_dir(info)
    return RawHost(
        nvidia_smi=smi,
        nvidia_topo=topo,
        docker_info=info,
        compose=compose,
        compose_standalone=standalone,
        shm=probe.fs_stats(SHM_PATH),
        memlock=probe.memlock(),
        data_root=root,
        data_root_fs=probe.fs_stats(root) if root else None,
        kernel_cmdline=probe.read_text("/proc/cmdline"),
        iommu_groups=probe.count_entries(IOMMU_GROUPS),
        kernel_log=read_kernel_log(probe),
    )


def model_cache_status(profiles_file: Path, probe: HostProbe) -> CacheStatus | None:
    """What the services' model cache holds for the stack's model (None: nothing to fetch)."""
    if not profiles_file.is_file():
        return None
    stack, _lines = loader.parse_stack_file(profiles_file)
    repo, revision, settings = stack.model.path, stack.model.revision, stack.stack
    if repo.startswith("/"):
        return None
    if settings.model_cache_path is not None:
        root = (profiles_file.resolve().parent / settings.model_cache_path).resolve()
        return modelcache.status(modelcache.Location(root, "stack.model_cache_path"), repo, revision)
    name = f"{settings.project}_{settings.model_cache}"
    volume = probe.run("model_volume", ("docker", "volume", "inspect", "--format", "{{.Mountpoint}}", name))
    if volume.ok and volume.stdout.strip():
        image = imagelayout.image_ref(settings.image_repo, settings.variant)
        location = modelcache.Location(Path(volume.stdout.strip()), f"volume {name}", name, image)
        return modelcache.status(location, repo, revision)
    if volume.problem is None and "no such volume" in volume.stderr.lower():
        return CacheStatus(state="missing", repo=repo, revision=revision, location=None)
    why = volume.problem or volume.stderr.strip()[:120] or "no answer"
    return CacheStatus(
        state="unknown",
        repo=repo,
        revision=revision,
        location=None,
        detail=f"docker volume inspect {name}: {why}",
    )


def secret_states(profiles_file: Path, uid: int = imagelayout.UID) -> list[secretfiles.SecretState] | None:
    """The secret files the stack mounts, as the serving user (host ``uid``) will find them (None: no
    profiles file)."""
    if not profiles_file.is_file():
        return None
    stack, _lines = loader.parse_stack_file(profiles_file)
    folder = (profiles_file.resolve().parent / stack.stack.secrets_dir).resolve()
    return [
        secretfiles.state_of(name, folder / name, uid)
        for name in launch.SECRETS
        if getattr(stack.stack, name)
    ]


# --- output ----------------------------------------------------------------------------------------------


def summary_line(checks: list[Check], exp: Expectations, headline: str | None) -> str:
    """One line: the verdict and the counts."""
    counts = Counter(c.status for c in checks)
    against = f" against {exp.variant}" if exp.variant else ""
    tally = ", ".join(f"{counts[s]} {s}" for s in ("fail", "warn", "pass", "skip"))
    if headline is not None:
        return f"bwstack doctor: NOT READY: no NVIDIA GPU or driver on this host ({tally})"
    verdict = "NOT READY: fix the failed checks" if counts["fail"] else "ready"
    return f"bwstack doctor{against}: {verdict} ({tally})"


def render_table(checks: list[Check], width: int, color: bool) -> str:
    """The checks as text no wider than ``width``: per group, one row per check (status, check, detail wrapped
    under its column) and the fix on its own line below."""
    import click

    lines = ["bwstack doctor"]
    groups: dict[str, list[Check]] = {}
    for check in checks:
        groups.setdefault(check.group, []).append(check)
    titles = max((len(c.title) for c in checks), default=0)
    for group, members in groups.items():
        lines.append(group)
        for check in members:
            rows = [["", check.status.upper().ljust(4), check.title.ljust(titles), check.detail]]
            if check.fix:
                rows.append(["", "", "".ljust(titles), f"fix: {check.fix}"])
            body = textlayout.table(rows, width, wrap_last=True)
            if color and body:
                status = check.status.upper()
                style = STATUS_STYLE[check.status]
                styled = click.style(status, fg=style.split()[-1], bold="bold" in style, dim=style == "dim")
                body[0] = body[0].replace(status, styled, 1)
            lines.extend(body)
    return "\n".join(lines) + "\n"


def report_json(checks: list[Check], exp: Expectations, headline: str | None, status: int) -> dict[str, Any]:
    """The ``--json`` document."""
    counts = Counter(c.status for c in checks)
    return {
        "schema": SCHEMA,
        "variant": exp.variant,
        "headline": headline,
        "exit_status": status,
        "summary": {s: counts[s] for s in ("pass", "warn", "fail", "skip")},
        "checks": [asdict(c) for c in checks],
    }


def run_doctor(
    profiles_file: Path,
    *,
    variant: str | None,
    as_json: bool,
    echo: Echo,
    probe: HostProbe | None = None,
    image: str | None = None,
) -> int:
    """Check this host (or the one in BWSTACK_DOCTOR_FIXTURE), print the report, return the exit status.
    With ``image`` (a variant): the built image's self-check instead (:mod:`bwstack.host.doctor.image`)."""
    if image is not None:
        return image_check.run_image_check(loader.load_stack(profiles_file), image, echo=echo)
    exp = expectations(profiles_file, variant)
    probe = probe or default_probe()
    raw = collect(probe)
    checks = judge(raw, exp)
    after_disk = next((i + 1 for i, c in enumerate(checks) if c.id == "disk"), len(checks))
    checks.insert(after_disk, check_model_cache(model_cache_status(profiles_file, probe)))
    docker, _why = docker_of(raw)
    kind = enginekind.kind_of(docker.security_options if docker is not None else frozenset())
    checks.insert(after_disk + 1, check_secrets(secret_states(profiles_file, kind.serving_uid), kind.needs()))
    headline = no_gpu_headline(raw)
    status = 1 if headline is not None or any(c.status == "fail" for c in checks) else 0
    if as_json:
        echo(json.dumps(report_json(checks, exp, headline, status), indent=2))
        return status
    if headline is not None:
        echo(f"bwstack doctor: {headline}")
    width = textlayout.terminal_width()
    echo(render_table(checks, width, color=sys.stdout.isatty()), nl=False)
    echo(summary_line(checks, exp, headline))
    return status
