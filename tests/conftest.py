"""Shared test fixtures: the repository root, the stack (a scratch copy or the repository's own), a scratch
``$BWSTACK_CACHE``, and the Docker requirement.

Every fixture used by more than one test module lives here (or in the conftest.py of the one folder that uses it);
the repository root is ``support.stack.ROOT``. ``tests/design/test_tests_tidy.py`` keeps it that way.

Tests that need Docker use the ``docker_engine`` fixture: without a reachable engine and Compose v2 they skip on
a developer machine and FAIL when the CI environment variable is set, so CI can never pass with them skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwstack.stack import loader, schema
from support import anyuser
from support.dockercheck import docker_problem
from support.stack import ROOT, copy_stack


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture()
def stack_copy(tmp_path: Path) -> Path:
    """Path of profiles.yaml in a scratch copy of the stack."""
    return copy_stack(tmp_path)


@pytest.fixture()
def stack(stack_copy: Path) -> schema.Stack:
    """The stack loaded from a scratch copy (one per test)."""
    return loader.load_stack(stack_copy)


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory) -> schema.Stack:
    """The stack loaded from a scratch copy made once per test module (for modules that only read it)."""
    return loader.load_stack(copy_stack(tmp_path_factory.mktemp("stack")))


@pytest.fixture(scope="module")
def repo_stack() -> schema.Stack:
    """The repository's own profiles.yaml, loaded once per test module (read, never written)."""
    return loader.load_stack(ROOT / "profiles.yaml")


@pytest.fixture()
def scratch_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$BWSTACK_CACHE`` pointed at an empty folder of this test, so no cached result of this machine counts."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("BWSTACK_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Require a Docker engine and Compose v2: skip locally, fail under CI."""
    problem = docker_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"Docker is required in CI: {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def python_image(docker_engine: None) -> str:
    """A local image with python3 (the stand-in's Debian rootfs, built without a registry when missing)."""
    from bwstack.build import rootfs

    return rootfs.ensure_rootfs(echo=lambda _message: None)


@pytest.fixture(scope="session")
def standin_refs(docker_engine: None) -> dict[str, str]:
    """variant -> stand-in serving image, built once per session (tests/integration and tests/testinfra).

    The services run with ``compose.nogpu.yaml``: any engine will do.
    """
    from support import dockerstack

    return dockerstack.standin_images()


@pytest.fixture(scope="session")
def real_sglang_python() -> Path:
    """The host venv of the CPU variant's closure (real SGLang without Docker), built once per session."""
    from support.realsglang import venv_python

    return venv_python()


@pytest.fixture(scope="session", autouse=True)
def _prune_build_leftovers() -> Iterator[None]:
    """After the session: drop untagged bwstack images that rebuilds left behind (containers using them are gone)."""
    yield
    if shutil.which("docker") and docker_problem() is None:
        from bwstack.build import dockerbuild

        dockerbuild.prune_build_leftovers()


@pytest.fixture(scope="module")
def operator(docker_engine: None) -> Iterator[anyuser.Operator]:
    """A real non-root member of the ``docker`` group with bwstack installed (``support.anyuser``), removed
    after the module."""
    yield from anyuser.made_operator()
