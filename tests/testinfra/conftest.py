"""Fixtures for the pytest-testinfra checks (``docker://`` backend) of the stand-in serving image.

- ``image_target`` (one per variant): a throw-away container of the built image with ``sleep infinity`` as
  entrypoint and no healthcheck, the jupyter/docker-stacks way of looking inside an image;
- ``service``: one profile started by Compose from a scratch copy of the stack with ``api_key: true`` and
  compose secret files holding a known fake HF token and API key, waited for ``healthy``.

Both are removed at the end, also after a failure. The stand-in images come from
the session fixture ``standin_refs`` of tests/conftest.py (one build per session, shared with tests/integration).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import testinfra
from support import dockerstack
from support.dockerstack import StandinCompose, TrackedContainer
from support.infra_targets import Service, Target

VARIANTS = sorted(dockerstack.repo_stack().variants_used())


@pytest.fixture(scope="module", params=VARIANTS)
def image_target(request: pytest.FixtureRequest, standin_refs: dict[str, str]) -> Iterator[Target]:
    variant = str(request.param)
    image = standin_refs[variant]
    name = dockerstack.unique_name("bwstack-testinfra-")
    started = dockerstack.docker(
        "run",
        "--detach",
        "--name",
        name,
        "--label",
        f"{dockerstack.TEST_LABEL}=testinfra",
        "--no-healthcheck",
        "--network",
        "none",
        "--entrypoint",
        "sleep",
        image,
        "infinity",
    )
    container = TrackedContainer(started.stdout.strip())
    try:
        yield Target(variant, image, container, testinfra.get_host("docker://" + container.id))
    finally:
        container.remove()


def _enable_api_key(data: Any) -> None:
    data["stack"]["api_key"] = True


@pytest.fixture(scope="module")
def service(standin_refs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("testinfra-stack")
    stack = dockerstack.edited_stack(root, _enable_api_key)
    default = stack.settings.variant
    profile = next(
        n for n, p in stack.profiles.items() if not p.known_bad and (p.variant or default) == default
    )
    hf_token, api_key = f"hf_bwstackFake{uuid.uuid4().hex}", f"sk-bwstack-fake-{uuid.uuid4().hex}"
    secrets = root / stack.settings.secrets_dir
    secrets.mkdir(parents=True, exist_ok=True)
    (secrets / "hf_token").write_text(hf_token + "\n", encoding="utf-8")
    (secrets / "api_key").write_text(api_key + "\n", encoding="utf-8")
    compose = StandinCompose.create(
        stack,
        root,
        name=dockerstack.unique_name("bwinfra"),
        images=standin_refs,
        env_by_profile=dockerstack.standin_env(stack, {profile: "none"}),
        memlock_reset=dockerstack.engine_refuses_memlock(standin_refs[default]),
    )
    try:
        up = compose.up(profile)
        assert up.returncode == 0, up.output[-2000:]
        container = compose.container(profile)
        host = testinfra.get_host("docker://" + container.id)
        yield Service(
            default, standin_refs[default], container, host, stack, profile, compose, hf_token, api_key
        )
    finally:
        dockerstack.force_clean(compose.name)
