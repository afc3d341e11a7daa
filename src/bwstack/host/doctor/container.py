"""``bwstack doctor``'s container checks: Docker Engine, the NVIDIA container runtime (or CDI), Compose.

Pure functions from a :class:`~bwstack.host.doctor.facts.RawHost` to a
:class:`~bwstack.host.doctor.facts.Check`.
Sources of the thresholds: healthcheck ``start_interval``: Docker Engine >= 25.0 (API 1.44) and Compose >=
2.20.2 (docker/compose PR #11360); GPU device reservations and profiles: Compose >= 1.28 (conventions.md §1);
``--gpus``: Engine >= 19.03.
"""

from __future__ import annotations

from bwstack.host.doctor.facts import (
    G_DOCKER,
    Check,
    Expectations,
    RawHost,
    docker_of,
    parse_version,
    skipped,
)
from bwstack.host.doctor.probe import CommandResult

ENGINE_MIN = (19, 3, 0)  # docker run --gpus
ENGINE_START_INTERVAL = (25, 0, 0)
COMPOSE_START_INTERVAL = (2, 20, 2)
COMPOSE_V1_MIN = (1, 28, 0)


def _at_least(version: tuple[int, int, int], floor: tuple[int, int, int]) -> bool:
    return version >= floor


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


def check_docker_engine(raw: RawHost, exp: Expectations) -> Check:
    """Docker Engine reachable and recent enough (``start_interval`` needs 25.0 when the stack enables it)."""
    title = "Docker Engine"
    info, why = docker_of(raw)
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
    info, _why = docker_of(raw)
    if info is None:
        return skipped("gpu_runtime", G_DOCKER, title, "docker info unavailable")
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
