"""``bwstack build`` of a variant whose base is locked by digest, against Debian's docker-registry on 127.0.0.1:
``bwstack lock`` writes the registry's digest, the build runs ``FROM name@digest``, and a tag re-pushed after
locking refuses the next build with one line (``--locked`` builds the locked digest; a registry that cannot be
asked is said and the locked digest built).

The variant is a CPU one whose ``[base] image`` names the registry, so the code path is the GPU variants' (pull by
digest; no local base made). The Docker test pushes the real CPU base of v0.5.23-cpu and builds the real
Dockerfile on it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bwstack.build import cpubase, rootfs
from bwstack.build.dockerbuild import STAGE_REPO
from bwstack.stack import pins
from support.dockerstack import docker
from support.registry import CPU_BASE_REPO as REPO
from support.registry import CPU_BASE_TAG as TAG
from support.registry import CPU_REGISTRY_VARIANT as NAME
from support.registry import CPU_SOURCE as SOURCE
from support.registry import (
    free_port,
    need_registry,
    push_cpu_base,
    registry,
    registry_variant,
)
from support.stack import copy_stack

CLI = [sys.executable, "-m", "bwstack.cli"]


def _bwstack(stack: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "-f", str(stack), *args], capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def _base_arg(done: subprocess.CompletedProcess[str]) -> str:
    match = re.search(r"--build-arg BASE_IMAGE=(\S+)", done.stdout)
    assert match, done.stdout + done.stderr
    return match.group(1)


def test_build_by_digest_and_a_moved_tag_refused(tmp_path: Path) -> None:
    need_registry()
    stack = copy_stack(tmp_path)
    with registry(tmp_path / "reg") as reg:
        pushed = reg.push(REPO, TAG, "first")
        registry_variant(stack.parent, reg.host)
        locked = _bwstack(stack, "lock", "--variant", NAME, "--no-python")
        assert locked.returncode == 0, locked.stdout + locked.stderr
        assert f"digest: {reg.host}/{REPO}:{TAG}@{pushed}" in locked.stdout
        variant = pins.load_variant(stack.parent / "images", NAME)
        assert variant.base_digest == pushed and variant.base_pulled

        built = _bwstack(stack, "build", "--variant", NAME, "--dry-run")
        assert built.returncode == 0, built.stdout + built.stderr
        assert _base_arg(built) == f"{reg.host}/{REPO}:{TAG}@{pushed}"
        assert "(the tag still names it)" in built.stderr

        moved_to = reg.push(REPO, TAG, "second")  # the tag now names another image
        assert moved_to != pushed
        refused = _bwstack(stack, "build", "--variant", NAME, "--dry-run")
        assert refused.returncode == 1
        assert refused.stdout == ""
        assert refused.stderr.splitlines() == [
            f"bwstack: images/{NAME}/pins.toml: base: {reg.host}/{REPO}:{TAG} moved: locked {pushed}, registry "
            f"now {moved_to}; run 'bwstack lock --variant {NAME}' to take the new base, or build the locked "
            "digest with 'bwstack build --locked'"
        ]

        kept = _bwstack(stack, "build", "--variant", NAME, "--dry-run", "--locked")
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert _base_arg(kept) == f"{reg.host}/{REPO}:{TAG}@{pushed}"

        relocked = _bwstack(stack, "lock", "--variant", NAME, "--no-python")
        assert relocked.returncode == 0
        taken = _bwstack(stack, "build", "--variant", NAME, "--dry-run")
        assert taken.returncode == 0 and _base_arg(taken) == f"{reg.host}/{REPO}:{TAG}@{moved_to}"

    offline = _bwstack(stack, "build", "--variant", NAME, "--dry-run")  # the registry is stopped
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert f"base: {reg.host}/{REPO}:{TAG} not checked (registry unreachable" in offline.stderr
    assert _base_arg(offline) == f"{reg.host}/{REPO}:{TAG}@{moved_to}"


def test_a_local_cpu_base_is_not_pulled(tmp_path: Path) -> None:
    stack = copy_stack(tmp_path)
    variant = pins.load_variant(stack.parent / "images", SOURCE)
    assert not variant.base_pulled
    done = _bwstack(stack, "lock", "--variant", SOURCE, "--no-python")
    assert (
        done.returncode == 0 and "digest: none (bwstack/cpu-base:v0.5.23-cpu is made locally" in done.stdout
    )
    assert free_port()  # nothing listens for it: no registry is asked


@pytest.mark.docker
@pytest.mark.slow
def test_docker_builds_from_the_locked_digest_and_refuses_a_retagged_base(
    docker_engine: None, tmp_path: Path
) -> None:
    """The real CPU base of v0.5.23-cpu (made or found up to date by bwstack's own code) pushed with
    ``docker push`` to the local registry, locked, the real Dockerfile built on ``name@digest``; then another
    image pushed under the same tag refuses the next build."""
    need_registry()
    stack = copy_stack(tmp_path)
    root = stack.parent
    local_base = cpubase.ensure_base(root, pins.load_variant(root / "images", SOURCE), echo=lambda _m: None)
    target = f"bwstack/test-by-digest:{uuid.uuid4().hex[:12]}"
    made: list[str] = [target]
    try:
        with registry(tmp_path / "reg") as reg:
            remote, pushed_digest = push_cpu_base(reg, local_base, made)
            registry_variant(root, reg.host)
            locked = _bwstack(stack, "lock", "--variant", NAME, "--no-python")
            assert locked.returncode == 0, locked.stdout + locked.stderr
            assert pins.load_variant(root / "images", NAME).base_digest == pushed_digest

            built = _bwstack(stack, "build", "--variant", NAME, "--tag", target)
            assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
            assert f"base: {remote}@{pushed_digest} (the tag still names it)" in built.stderr
            assert "cpu base" not in built.stdout  # pulled by digest, no local base made
            inspect = json.loads(docker("image", "inspect", "--format", "{{json .}}", target).stdout)
            base_inspect = json.loads(docker("image", "inspect", "--format", "{{json .}}", remote).stdout)
            assert (
                inspect["Config"]["Labels"]["org.opencontainers.image.base.name"]
                == f"{remote}@{pushed_digest}"
            )
            base_layers = base_inspect["RootFS"]["Layers"]
            assert inspect["RootFS"]["Layers"][: len(base_layers)] == base_layers  # built on that very base
            assert f"{reg.host}/{REPO}@{pushed_digest}" in base_inspect["RepoDigests"]

            docker("tag", rootfs.ROOTFS_IMAGE, remote)  # another image under the same tag
            moved = docker("push", remote, timeout=600)
            moved_to = re.search(r"digest: (sha256:[0-9a-f]{64})", moved.stdout)
            assert moved_to and moved_to.group(1) != pushed_digest, moved.stdout
            made.append(f"{reg.host}/{REPO}@{moved_to.group(1)}")
            refused = _bwstack(stack, "build", "--variant", NAME, "--tag", target)
            assert refused.returncode == 1
            assert refused.stderr.splitlines() == [
                f"bwstack: images/{NAME}/pins.toml: base: {remote} moved: locked {pushed_digest}, registry now "
                f"{moved_to.group(1)}; run 'bwstack lock --variant {NAME}' to take the new base, or build the "
                "locked digest with 'bwstack build --locked'"
            ]
    finally:
        for ref in made:
            docker("rmi", ref, check=False)
        docker("rmi", f"{STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', target)}", check=False)
