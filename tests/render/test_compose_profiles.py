"""Every shipped compose profile end to end in real Docker + Compose v2, on the CPU stand-in.

Two compose cycles of one project (unique name per session, ephemeral host ports):

1. every profile with fault ``none``: ``docker compose --profile P up -d --wait P`` exits 0 and the container
   is ``healthy`` with a ``healthy: …`` probe in ``docker inspect``'s health log;
2. one fault per profile (``dockerstack.fault_plan``): ``up --wait`` exits non-zero and the health log holds
   the fault's class (``device_assert`` is reported by its root cause ``nan``, ``override`` as
   ``backend_override``, ``hang`` as ``timeout``); ``slow_start`` goes healthy after its load.

Then switching profiles with ``bwstack up``'s own logic (``stackproject.stop_other_profiles``) leaves no stale
container, and ``down -v`` leaves no container, network or volume of the project. The ``up`` runs of one cycle
go in parallel (after one serial ``compose create`` of the network and volumes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from bwstack.host import stackproject
from support import dockerstack
from support.dockerstack import StandinCompose, Up

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STACK = dockerstack.repo_stack()
PROFILES = list(STACK.profiles)
FAULTS, EXPECTED = dockerstack.fault_plan(STACK)
#: hang: a short per-probe budget and start period, so three timed-out probes come quickly
HANG_ENV = {"BWSTACK_HC_CHECK_TIMEOUT": "3", "BWSTACK_HC_START_PERIOD": "8s"}
SETTLE_S = 90.0


@dataclass(frozen=True)
class Cycle:
    """One compose cycle: the project as rendered for it and each service's ``up --wait``."""

    compose: StandinCompose
    ups: dict[str, Up]


def _run_cycle(compose: StandinCompose, env_by_service: Mapping[str, Mapping[str, str]]) -> dict[str, Up]:
    compose.create_all()
    services = list(env_by_service)
    with ThreadPoolExecutor(max_workers=len(services)) as pool:
        results = pool.map(lambda s: compose.up(s, env_by_service[s]), services)
        return {up.service: up for up in results}


@pytest.fixture(scope="module")
def project(
    standin_refs: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandinCompose]:
    """Cycle 1's project; removed (containers, network, volumes) at the end, also after a failure."""
    env = dockerstack.standin_env(STACK, {name: "none" for name in PROFILES})
    compose = StandinCompose.create(
        STACK,
        tmp_path_factory.mktemp("compose-profiles"),
        name=dockerstack.unique_name("bwe2e"),
        images=standin_refs,
        env_by_profile=env,
        memlock_reset=dockerstack.engine_refuses_memlock(next(iter(standin_refs.values()))),
    )
    try:
        yield compose
    finally:
        dockerstack.force_clean(compose.name)


@pytest.fixture(scope="module")
def healthy_cycle(project: StandinCompose) -> Cycle:
    return Cycle(project, _run_cycle(project, {name: {} for name in PROFILES}))


@pytest.fixture(scope="module")
def fault_cycle(healthy_cycle: Cycle, standin_refs: dict[str, str]) -> Cycle:
    """Cycle 2: the same project re-rendered with one fault per profile (the containers are recreated)."""
    env = dockerstack.fault_cycle_env(STACK, FAULTS)
    compose = healthy_cycle.compose.rerendered(
        images=standin_refs, env_by_profile=env, filename="compose.faults.yaml"
    )
    runs = {name: HANG_ENV if fault == "hang" else {} for name, fault in FAULTS.items()}
    return Cycle(compose, _run_cycle(compose, runs))


def _explain(compose: StandinCompose, service: str, up: Up | None = None) -> str:
    container = compose.container(service)
    parts = [f"health log: {container.health_log()}", f"state: {container.state().get('Status')}"]
    if up is not None:
        parts.append(f"up (exit {up.returncode}, {up.seconds:.1f} s): {up.output[-600:]}")
    parts.append(f"logs: {container.logs()[-1500:]}")
    return "\n".join(parts)


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_without_fault_is_healthy(healthy_cycle: Cycle, profile: str) -> None:
    up = healthy_cycle.ups[profile]
    assert up.returncode == 0, _explain(healthy_cycle.compose, profile, up)
    container = healthy_cycle.compose.container(profile)
    assert container.health() == "healthy"
    assert container.verdict() == "healthy", _explain(healthy_cycle.compose, profile)
    # the probe that made it healthy ran the deep checks: a sampled decode and the effective config (later
    # light probes may already follow it when `up --wait` returns). The serve wrapper's readiness probe may
    # have run the decode the moment SGLang was ready: Docker's first probe then checks the config and says
    # how long ago that decode passed
    decided = next((entry for entry in up.health_log if entry.startswith("healthy")), "")
    by_readiness = "readiness probe: healthy: sampled decode ok" in container.logs()
    assert decided.startswith("healthy: sampled decode ok") or (
        by_readiness and decided.startswith("healthy: alive, last sampled decode")
    ), up.health_log
    assert f"tp_size={STACK.model.tp_size}" in decided, decided


@pytest.mark.parametrize("profile", list(FAULTS))
def test_fault_is_reported_with_its_class(fault_cycle: Cycle, profile: str) -> None:
    fault, expected = FAULTS[profile], EXPECTED[profile]
    up = fault_cycle.ups[profile]
    container = fault_cycle.compose.container(profile)
    if fault == "slow_start":
        assert up.returncode == 0, _explain(fault_cycle.compose, profile, up)
        assert up.seconds >= dockerstack.SLOW_LOAD_S  # healthy only after the simulated load
        assert container.health() == "healthy" and container.verdict() == "healthy"
        loaded = re.search(r"Load weight end\. elapsed=(\d+\.\d+) s", container.logs())
        assert loaded is not None and float(loaded.group(1)) >= dockerstack.SLOW_LOAD_S
        return
    assert up.returncode != 0, _explain(fault_cycle.compose, profile, up)
    assert "unhealthy" in up.output or "exited" in up.output, up.output[-600:]
    settled = dockerstack.wait_until(
        lambda: container.verdict() == expected and container.health() == "unhealthy", timeout=SETTLE_S
    )
    assert settled, f"{fault}: wanted {expected}\n{_explain(fault_cycle.compose, profile, up)}"


def test_switching_profiles_leaves_no_stale_container(healthy_cycle: Cycle, fault_cycle: Cycle) -> None:
    compose = healthy_cycle.compose  # rendered with fault none everywhere
    before = compose.services()
    assert before == sorted(PROFILES)  # one container per profile after the two cycles
    first, second = [name for name in PROFILES if not STACK.profile(name).known_bad][:2]
    removed = stackproject.stop_other_profiles(compose.project(), first)  # what `bwstack up` does first
    assert sorted(removed) == sorted(set(before) - {first})
    for current, previous in ((first, None), (second, first)):
        if previous is not None:
            assert stackproject.stop_other_profiles(compose.project(), current) == [previous]
        up = compose.up(current)
        assert up.returncode == 0, _explain(compose, current, up)
        assert compose.services() == [current]
        assert len(dockerstack.project_ids("container", compose.name)) == 1


def test_down_volumes_leaves_nothing(fault_cycle: Cycle) -> None:
    compose = fault_cycle.compose
    assert dockerstack.project_ids("volume", compose.name), "the cycles created the named volumes"
    assert dockerstack.project_ids("network", compose.name)
    assert compose.down() == 0
    assert dockerstack.leftovers(compose.name) == {}
