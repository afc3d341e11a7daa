"""``bwstack up PROFILE`` and ``bwstack down`` on a scratch copy of the stack whose image is the stand-in.

The copy differs from the shipped stack only where a test needs it: a unique project name, a free port, its
own image repository (the stand-in images tagged there, so the fresh render runs them), short healthcheck
timings, a short simulated load for every profile and, on one known-bad profile, the stand-in fault that
imitates its expected class. ``bwstack up`` then runs exactly as shipped: fresh-render check, secret files,
one profile at a time, progress, the healthcheck's reason on failure.

The compose project gets the stand-in sweep's own overrides (``stackproject.project_for`` is wrapped for that): the
GPU reservations removed (``compose.nogpu.yaml``), so any engine runs it, and, where the engine refuses
``ulimits: memlock: -1`` (rootless or nested Docker), the same ``memlock: !reset`` override; the commands' own
logic is untouched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bwstack import cli, launch
from bwstack.files import atomic_write
from bwstack.host import stackproject
from bwstack.host.dockercompose import Project
from bwstack.ops import updown
from bwstack.stack import schema
from bwstack.sweep.plan import standin_fault
from bwstack.sweep.run import STANDIN_OVERRIDE, gpu_reservation_reset, memlock_reset
from support import dockerstack

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@dataclass(frozen=True)
class CliStack:
    stack: schema.Stack
    healthy: str
    bad: str

    @property
    def profiles_file(self) -> Path:
        return self.stack.path

    @property
    def project(self) -> str:
        return self.stack.settings.project


def _pick_profiles(stack: schema.Stack) -> tuple[str, str]:
    default = stack.settings.variant
    healthy = next(
        n for n, p in stack.profiles.items() if not p.known_bad and (p.variant or default) == default
    )
    bad = next(n for n, p in stack.profiles.items() if p.known_bad)
    return healthy, bad


def _edit(project: str, repo: str, port: int) -> Any:
    shipped = dockerstack.repo_stack()
    _, bad = _pick_profiles(shipped)
    fault = standin_fault(shipped, bad)

    def edit(data: Any) -> None:
        settings = data["stack"]
        settings.update({"project": project, "image_repo": repo, "port": port})
        settings["healthcheck"].update(
            {"interval": "1s", "timeout": "20s", "start_period": "30s", "check_timeout": 15}
        )
        data["model"]["env"] = {"BWSTACK_STANDIN_LOAD_SECONDS": dockerstack.LOAD_SECONDS}
        data["profiles"][bad]["env"] = {"BWSTACK_STANDIN_FAULT": fault}

    return edit


@pytest.fixture(scope="module")
def cli_stack(standin_refs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliStack]:
    project = dockerstack.unique_name("bwcli")
    repo = f"bwstack-test/{project}"
    stack = dockerstack.edited_stack(
        tmp_path_factory.mktemp("cli-stack"), _edit(project, repo, dockerstack.free_port())
    )
    tags = [launch.image_ref(stack, variant) for variant in sorted(stack.variants_used())]
    try:
        for variant, tag in zip(sorted(stack.variants_used()), tags, strict=True):
            dockerstack.docker("tag", standin_refs[variant], tag)
        yield CliStack(stack, *_pick_profiles(stack))
    finally:
        dockerstack.force_clean(project)
        dockerstack.docker("image", "rm", *tags, check=False)  # only the tags: the images stay cached


@pytest.fixture()
def engine_adjusted(
    cli_stack: CliStack, standin_refs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Add the stand-in's overrides to the commands' compose project: no GPU reservation; memlock if needed."""
    names = list(cli_stack.stack.profiles)
    nogpu = cli_stack.stack.root / STANDIN_OVERRIDE
    atomic_write(nogpu, gpu_reservation_reset(names))
    extra = [nogpu]
    if dockerstack.engine_refuses_memlock(next(iter(standin_refs.values()))):
        extra.append(cli_stack.stack.root / "compose.host.yaml")
        atomic_write(extra[-1], memlock_reset(names))
    shipped = stackproject.project_for

    def project_for(stack: schema.Stack, compose_file: Path | None = None, env: Any = None) -> Project:
        project = shipped(stack, compose_file, env)
        return dataclasses.replace(project, files=(*project.files, *extra))

    monkeypatch.setattr(updown, "project_for", project_for)


def bwstack(*args: str) -> Result:
    result = CliRunner().invoke(cli.main, list(args), catch_exceptions=False)
    return result


def services(cli_stack: CliStack) -> list[str]:
    rows = stackproject.project_for(cli_stack.stack).containers()
    return sorted(str(row.get("Service")) for row in rows)


@pytest.mark.usefixtures("engine_adjusted")
def test_up_down_cycle(cli_stack: CliStack) -> None:
    file = str(cli_stack.profiles_file)
    healthy, bad = cli_stack.healthy, cli_stack.bad
    expect = cli_stack.stack.profile(bad).expect

    refused = bwstack("up", "-f", file, bad)
    assert refused.exit_code == 2, refused.output
    assert refused.stdout == ""
    lines = [line for line in refused.stderr.splitlines() if not line.startswith("bwstack: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("bwstack: ") and "known to fail" in lines[0], lines
    assert "--force" in lines[0] and f"profiles.{bad}.expect" in lines[0]
    assert services(cli_stack) == []

    # the stand-in loads no weights: skip the model-cache check (tests/fetch covers the refusal)
    started = bwstack("up", "-f", file, healthy, "--timeout", "120", "--skip-model-check")
    assert started.exit_code == 0, started.output
    assert "created empty secret file" in started.stdout
    # progress ends with the healthcheck's own verdict line
    assert re.search(rf"^{re.escape(healthy)}: healthy after \d+ s: healthy: ", started.stdout, re.M), (
        started.stdout
    )
    assert services(cli_stack) == [healthy]

    forced = bwstack("up", "-f", file, bad, "--force", "--timeout", "120", "--skip-model-check")
    assert forced.exit_code == 1, forced.output
    assert f"warning: starting known-bad profile {bad}" in forced.stderr
    assert f"stopped {healthy} (one profile at a time)" in forced.stdout
    assert f"{bad}: unhealthy" in forced.stdout
    assert f"healthcheck: unhealthy: {expect}: " in forced.stdout, forced.stdout
    # what to try next, from the class, the expectations and the predictions (modelcard-fi-auto: nan)
    assert "next to try: dense-fi-bf16: nan on sm120 points at kv_cache_dtype" in forced.stdout, forced.stdout
    assert services(cli_stack) == [bad]  # switching left no stale container

    stopped = bwstack("down", "-f", file, "--volumes")
    assert stopped.exit_code == 0, stopped.output
    assert dockerstack.leftovers(cli_stack.project) == {}
