"""Docker and Compose helpers shared by the end-to-end tests (``tests/integration`` and ``tests/testinfra``).

Patterned on jupyter/docker-stacks' test utilities: :func:`wait_until` polls a predicate on a monotonic clock,
:class:`TrackedContainer` wraps one container (state, health, health log, logs, forced removal), and
:class:`StandinCompose` is one throw-away compose project of CPU stand-in services rendered by
``bwstack.render.compose.render_compose`` into a scratch folder.

Host adjustments live in separate override files, so the rendered file itself differs from the committed
``compose.yaml`` only in image and environment:

- ``compose.ports.yaml`` publishes each service on an ephemeral loopback port (``127.0.0.1::30000``) instead of
  the fixed one, so the services of one project, and parallel test sessions, never collide on a host port;
- ``compose.nogpu.yaml`` removes each service's GPU reservation (``bwstack.sweep.run.gpu_reservation_reset``, the
  stand-in sweep's own override), so any engine runs the services: no NVIDIA runtime or hook on the host;
- ``compose.host.yaml`` (only where the engine refuses ``ulimits: memlock: -1``, as rootless or nested Docker
  does) is ``bwstack.sweep.run.memlock_reset``'s override, the same one the stand-in sweep uses.

Import as ``support.dockerstack`` (``tests/`` is on ``sys.path``) so both test folders share one module and
so one stand-in image build per session (:func:`standin_images` is cached).
"""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bwstack import classify, launch
from bwstack.files import atomic_write
from bwstack.host.dockercompose import Project
from bwstack.render import compose
from bwstack.stack import loader, schema
from bwstack.sweep import run as sweep_run
from bwstack.sweep.judge import last_line
from bwstack.sweep.run import (
    STANDIN_OVERRIDE,
    engine_allows_unlimited_memlock,
    gpu_reservation_reset,
)
from bwstack.sweep.streams import docker_client
from support.stack import ROOT, copy_stack

#: label on the containers this test suite starts outside compose (throw-away image checks)
TEST_LABEL = "io.bwstack.test"
#: healthcheck timing for the stand-in: 1 s probes, a generous per-probe budget for a loaded 2-core runner
FAST_HC_ENV = {
    "BWSTACK_HC_INTERVAL": "1s",
    "BWSTACK_HC_TIMEOUT": "20s",
    "BWSTACK_HC_START_PERIOD": "30s",
    "BWSTACK_HC_CHECK_TIMEOUT": "15",
}
LOAD_SECONDS = "0.5"
WAIT_TIMEOUT_S = 120
UP_FLAGS = ("--detach", "--wait", "--wait-timeout", str(WAIT_TIMEOUT_S), "--no-build", "--pull", "never")


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI; CalledProcessError carries stderr when ``check`` and it fails."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def wait_until(predicate: Callable[[], bool], *, timeout: float, interval: float = 0.5) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def unique_name(prefix: str) -> str:
    """A compose project / container name no other test session uses."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


class TrackedContainer:
    """One container by id: its state, health and health log, logs; removed by :meth:`remove`."""

    def __init__(self, container_id: str) -> None:
        self.id = container_id

    def inspect(self) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(docker("inspect", self.id).stdout)
        return data[0]

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = self.inspect()["State"]
        return state

    def health(self) -> str:
        """``starting`` / ``healthy`` / ``unhealthy``, or ``none`` without a healthcheck."""
        return str((self.state().get("Health") or {}).get("Status", "none"))

    def health_log(self) -> list[str]:
        """The last output line of every probe Docker kept (the last five), oldest first."""
        entries = (self.state().get("Health") or {}).get("Log") or []
        return [last_line(str(entry.get("Output") or "")) for entry in entries]

    def verdict(self) -> str:
        """The class of the newest probe that decided something (``starting`` probes skipped); '' if none."""
        for line in reversed(self.health_log()):
            found = classify.probe_class(line)
            if found is not None and found != "starting":
                return found
        return ""

    def logs(self) -> str:
        result = docker("logs", self.id, check=False)
        return result.stdout + result.stderr

    def remove(self) -> None:
        docker("rm", "--force", "--volumes", self.id, check=False)


# --- the engine -----------------------------------------------------------------------------------------------


def skip_or_fail(reason: str) -> None:
    """Skip on a developer machine, fail under CI (the Docker tests must run there)."""
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def _local_image_ids(refs: Sequence[str]) -> dict[str, str]:
    found = {}
    for ref in refs:
        result = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False)
        if result.returncode == 0:
            found[ref] = result.stdout.strip()
    return found


def _remove_if_dangling(image_id: str) -> None:
    """Remove an image our rebuild left without a tag (never forced: a container may still use it)."""
    tags = docker("image", "inspect", "--format", "{{json .RepoTags}}", image_id, check=False)
    if tags.returncode == 0 and json.loads(tags.stdout or "null") in (None, []):
        docker("image", "rm", image_id, check=False)


def repo_stack() -> schema.Stack:
    return loader.load_stack(ROOT / "profiles.yaml")


#: ports for a test stack's server: above SGLang's own pick for its NCCL/gloo port (22000-29999,
#: get_free_port_below_ephemeral) and below the kernel's ephemeral range (32768+), from which SGLang 0.5.23 takes
#: its dist-init port at start (engine.py, get_free_port): a server port in that range can be taken by the
#: server's own TCPStore before uvicorn binds it ("[Errno 98] ... address already in use", seen once in CI)
TEST_PORTS = (30200, 32700)


def free_port() -> int:
    """A port free on every address, from :data:`TEST_PORTS` (random start, then in turn)."""
    low, high = TEST_PORTS
    start = random.randrange(low, high)
    for offset in range(high - low):
        port = low + (start - low + offset) % (high - low)
        try:
            with socket.socket() as sock:
                sock.bind(("0.0.0.0", port))  # only probing that nothing holds it, on any address
        except OSError:
            continue
        return port
    raise AssertionError(f"no free port in {low}-{high}")


def edited_stack(root: Path, edit: Callable[[Any], None], file: str = "profiles.yaml") -> schema.Stack:
    """A scratch copy of the stack in ``root`` with ``edit`` applied to its profiles file (round-trip YAML,
    comments kept), rendered like ``bwstack render`` (compose file + versions.json), then loaded."""
    from ruamel.yaml import YAML

    path = copy_stack(root).parent / file
    yaml = YAML()
    data = yaml.load(path.read_text(encoding="utf-8"))
    edit(data)
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    stack = loader.load_stack(path)
    compose.write_outputs(compose.render_outputs(stack))
    return stack


@cache
def standin_images() -> dict[str, str]:
    """variant -> stand-in image ref for every variant the shipped profiles use; built once per session.

    An image that a rebuild replaces (new code or revision) is removed when nothing else tags it, so the
    suite leaves no dangling image of its own behind.
    """
    from bwstack.build.standin_image import STANDIN_REPO, ensure_standin_image

    stack = repo_stack()
    variants = sorted({stack.variant_name_for(name) for name in stack.profiles})
    before = _local_image_ids([f"{STANDIN_REPO}:{v}" for v in variants])
    images = {v: ensure_standin_image(stack, variant=v, echo=lambda _m: None) for v in variants}
    after = _local_image_ids(list(images.values()))
    for ref, old in before.items():
        if after.get(ref) != old:
            _remove_if_dangling(old)
    return images


@cache
def engine_refuses_memlock(image: str) -> bool:
    """Whether this engine cannot grant ``ulimits: memlock: -1`` (rootless or nested Docker)."""
    return not engine_allows_unlimited_memlock(docker_client(), image)


# --- compose projects of stand-in services --------------------------------------------------------------------


def project_ids(kind: str, project: str) -> list[str]:
    """Containers (any state), networks or volumes carrying the compose project label."""
    argv = {
        "container": ["ps", "--all", "--quiet"],
        "network": ["network", "ls", "--quiet"],
        "volume": ["volume", "ls", "--quiet"],
    }[kind]
    return docker(*argv, "--filter", f"label=com.docker.compose.project={project}").stdout.split()


def leftovers(project: str) -> dict[str, list[str]]:
    found = {kind: project_ids(kind, project) for kind in ("container", "network", "volume")}
    return {kind: ids for kind, ids in found.items() if ids}


def force_clean(project: str) -> None:
    """Remove whatever the project left (finalizers: also after a failed test)."""
    removers = {
        "container": ["rm", "--force", "--volumes"],
        "network": ["network", "rm"],
        "volume": ["volume", "rm", "--force"],
    }
    for kind, ids in leftovers(project).items():
        docker(*removers[kind], *ids, check=False, timeout=300)


def ports_override(names: Sequence[str], port: int) -> str:
    """Publish each service on an ephemeral loopback host port instead of the fixed one."""
    lines = ["# bwstack tests: ephemeral host ports, so parallel sessions never collide", "services:"]
    for name in names:
        lines += [f"  {json.dumps(name)}:", "    ports: !override", f'      - "127.0.0.1::{port}"']
    return "\n".join(lines) + "\n"


#: stand-in fault -> the class the healthcheck must report; these end the server (fail-fast or a crash)
EXITING_FAULTS = {
    "nan": "nan",
    "device_assert": "nan",  # the multinomial device assert's root cause is the NaN (catalog: nan first)
    "assertion": "assertion",
    "unsupported_arch": "unsupported_arch",
    "oom": "oom",
    "override": "backend_override",
}
#: faults that leave the server running
RUNNING_FAULTS = {"hang": "timeout", "slow_start": "healthy"}


def fault_plan(stack: schema.Stack) -> tuple[dict[str, str], dict[str, str]]:
    """One fault per profile (profile -> fault, profile -> expected class) for a single compose cycle.

    Exiting faults go to known-bad profiles first: those render ``restart: "no"``, so their container stays
    exited; the rest exercise the restart policy of a profile expected healthy.
    """
    names = [n for n, p in stack.profiles.items() if p.known_bad]
    names += [n for n, p in stack.profiles.items() if not p.known_bad]
    expected = {**EXITING_FAULTS, **RUNNING_FAULTS}
    assert len(names) >= len(expected), f"{len(names)} profiles cannot carry {len(expected)} faults"
    faults = dict(zip(names, expected, strict=False))
    return faults, {name: expected[fault] for name, fault in faults.items()}


#: slow_start: a load long enough to see, well inside the 30 s start period
SLOW_LOAD_S = 3.0


def fault_cycle_env(stack: schema.Stack, faults: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The environment of the fault cycle: the fault, plus the load time it needs."""
    extra: dict[str, dict[str, str]] = {}
    for name, fault in faults.items():
        if fault == "slow_start":
            extra[name] = {"BWSTACK_STANDIN_LOAD_SECONDS": f"{SLOW_LOAD_S:g}"}
    return standin_env(stack, faults, extra)


def standin_env(
    stack: schema.Stack, faults: Mapping[str, str], extra: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, dict[str, str]]:
    """Per profile: the stand-in fault, the arch the profile targets and a short simulated load."""
    env = {}
    for name, fault in faults.items():
        env[name] = {
            "BWSTACK_STANDIN_FAULT": fault,
            "BWSTACK_STANDIN_ARCH": stack.arch_for(name),
            "BWSTACK_STANDIN_LOAD_SECONDS": LOAD_SECONDS,
            **((extra or {}).get(name) or {}),
        }
    return env


@dataclass(frozen=True)
class Up:
    """One ``docker compose up -d --wait`` of one service."""

    service: str
    returncode: int
    output: str
    seconds: float
    health_log: tuple[str, ...]  # when ``up`` returned: the probe that decided it is the last entry


@dataclass(frozen=True)
class StandinCompose:
    """A compose project of stand-in services: rendered file + host overrides in ``root``, a unique name."""

    stack: schema.Stack
    root: Path
    name: str
    files: tuple[Path, ...]

    @classmethod
    def create(
        cls,
        stack: schema.Stack,
        root: Path,
        *,
        name: str,
        images: Mapping[str, str],
        env_by_profile: Mapping[str, Mapping[str, str]],
        memlock_reset: bool,
    ) -> StandinCompose:
        """Render the services (image and environment overridden) and the host overrides into ``root``;
        ``memlock_reset``: add the override for engines that refuse ``memlock: -1``."""
        root.mkdir(parents=True, exist_ok=True)
        main = root / "compose.standin.yaml"
        overrides = compose.Overrides(image_by_variant=dict(images), env_by_profile=env_by_profile)
        atomic_write(main, compose.render_compose(stack, overrides))
        files = [main, root / "compose.ports.yaml", root / STANDIN_OVERRIDE]
        atomic_write(files[1], ports_override(list(stack.profiles), stack.settings.port))
        atomic_write(files[2], gpu_reservation_reset(list(stack.profiles)))
        if memlock_reset:
            files.append(root / "compose.host.yaml")
            atomic_write(files[-1], sweep_run.memlock_reset(list(stack.profiles)))
        for secret in launch.SECRETS:
            path = root / stack.settings.secrets_dir / secret
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_text("", encoding="utf-8")
        return cls(stack=stack, root=root, name=name, files=tuple(files))

    def rerendered(
        self, *, images: Mapping[str, str], env_by_profile: Mapping[str, Mapping[str, str]], filename: str
    ) -> StandinCompose:
        """The same project (name, folder, host overrides) with the services rendered again into ``filename``."""
        path = self.root / filename
        overrides = compose.Overrides(image_by_variant=dict(images), env_by_profile=env_by_profile)
        atomic_write(path, compose.render_compose(self.stack, overrides))
        return replace(self, files=(path, *self.files[1:]))

    def project(self, env: Mapping[str, str] | None = None) -> Project:
        return Project(
            files=self.files, name=self.name, workdir=self.root, env={**FAST_HC_ENV, **(env or {})}
        )

    def create_all(self, env: Mapping[str, str] | None = None) -> None:
        """Create every service's container, the network and the volumes, so that ``up`` may run in parallel
        (concurrent compose runs would each create the project network: Docker 20.10 allows duplicates).

        One service of each image is created first, alone: Docker fills a fresh named volume (the image's JIT
        cache) from the image when the first container that mounts it is created, and several containers
        created at once race on that copy ('failed to mkdir .../_data/tvm-ffi: file exists', seen in a CI run
        of this module); once filled, a volume is only mounted."""
        project = self.project(env)
        create = ["create", "--no-build", "--pull", "never"]
        first_of_image: dict[str, str] = {}
        for name in self.stack.profiles:
            first_of_image.setdefault(self.stack.variant_name_for(name), name)
        for name in first_of_image.values():
            project.run([*create, name], profiles=[name], capture=True, timeout=300, check=True)
        project.run(create, profiles=["*"], capture=True, timeout=300, check=True)

    def up(self, service: str, env: Mapping[str, str] | None = None) -> Up:
        """``docker compose --profile S up -d --wait S``: its exit status, output and wall time."""
        started = time.monotonic()
        result = self.project(env).run(
            ["up", *UP_FLAGS, service],
            profiles=[service],
            capture=True,
            timeout=WAIT_TIMEOUT_S + 120,
        )
        seconds = time.monotonic() - started
        output = (result.stdout or "") + (result.stderr or "")
        return Up(service, result.returncode, output, seconds, tuple(self.container(service).health_log()))

    def container(self, service: str) -> TrackedContainer:
        for row in self.project().containers():
            if row.get("Service") == service:
                return TrackedContainer(str(row.get("ID") or row.get("Id")))
        raise AssertionError(f"no container for service {service} in project {self.name}")

    def services(self) -> list[str]:
        return sorted(str(row.get("Service")) for row in self.project().containers())

    def down(self) -> int:
        result = self.project().run(
            ["down", "--remove-orphans", "--volumes"], profiles=["*"], capture=True, timeout=300
        )
        return result.returncode
