"""The quick start's image steps as a real non-root member of the ``docker`` group (``support.anyuser``), in the
user's own checkout: ``bwstack lock --inspect VARIANT`` and ``bwstack build --variant VARIANT`` as written, on a
variant whose base lives in a registry (Debian's docker-registry on 127.0.0.1 holds the real CPU base of
v0.5.23-cpu; a CPU variant naming a registry base takes the GPU variants' path: pulled by digest).

Everything made here (the user and its home, the registry and its storage, the image tags and the build-stage
tag) is removed at the end.
"""

from __future__ import annotations

import json
import pwd
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from bwstack.build import cpubase
from bwstack.build.dockerbuild import STAGE_REPO
from bwstack.stack import loader, pins
from support import anyuser
from support.anyuser import Operator, as_user
from support.dockerstack import docker
from support.registry import (
    CPU_REGISTRY_VARIANT,
    CPU_SOURCE,
    need_registry,
    push_cpu_base,
    registry,
    registry_variant,
)
from support.stack import ROOT, copy_stack, edit_yaml

pytestmark = [pytest.mark.docker, pytest.mark.slow]


#: the README's quick start before `lock --inspect`, verbatim but for its comments
QUICK_START_BEFORE = (
    "python3 -m venv .venv && .venv/bin/pip install -e .",
    ".venv/bin/bwstack list --arch sm120",
    "install -m 600 /dev/null secrets/hf_token",
)


def _no_traceback(done: Any) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]


def test_a_non_root_operator_inspects_and_builds_a_registry_variant(
    operator: Operator, tmp_path: Path
) -> None:
    need_registry()
    root = ROOT
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert all(f"\n{line}  " in readme or f"\n{line} " in readme for line in QUICK_START_BEFORE)
    local_base = cpubase.ensure_base(
        root, pins.load_variant(root / "images", CPU_SOURCE), echo=lambda _m: None
    )
    checkout = operator.home / "bwstack"
    checkout.mkdir()
    stack_file = copy_stack(checkout)
    anyuser.copy_source(checkout)
    image_repo = f"bwstack-test/nr{uuid.uuid4().hex[:10]}"
    edit_yaml(stack_file, lambda data: data["stack"].update({"image_repo": image_repo}))
    target = f"{image_repo}:{CPU_REGISTRY_VARIANT}"
    made = [target, f"{STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', target)}"]
    # doctor --image mounts the stack's own volumes (the shipped project's JIT cache of this variant): the ones
    # the test made go at the end, any the machine had before stay
    project = loader.load_stack(stack_file).settings.project
    volumes_before = set(_project_volumes(project))
    try:
        with registry(tmp_path / "reg") as reg:
            remote, digest = push_cpu_base(reg, local_base, made)
            registry_variant(checkout, reg.host)
            operator.own(checkout)

            # the quick start, line by line as written, in the user's own checkout (the CPU variant for VARIANT)
            for line in QUICK_START_BEFORE:
                done = as_user(operator, ["sh", "-c", line], {}, checkout)
                _no_traceback(done)
                assert done.returncode == 0, (line, done.stdout[-2000:] + done.stderr[-2000:])
            bwstack = str(checkout / ".venv" / "bin" / "bwstack")
            inspected = as_user(operator, [bwstack, "lock", "--inspect", CPU_REGISTRY_VARIANT], {}, checkout)
            _no_traceback(inspected)
            assert inspected.returncode == 0, inspected.stdout + inspected.stderr
            pins_path = f"{checkout}/images/{CPU_REGISTRY_VARIANT}/pins.toml"
            assert f"inspect: [base] digest {digest} written to {pins_path}" in inspected.stdout
            assert "contradicts" not in inspected.stdout
            variant = pins.load_variant(checkout / "images", CPU_REGISTRY_VARIANT)
            assert variant.base_digest == digest

            built = as_user(operator, [bwstack, "build", "--variant", CPU_REGISTRY_VARIANT], {}, checkout,
                            timeout=1500)  # fmt: skip
            _no_traceback(built)
            assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
            assert f"base: {remote}@{digest} (the tag still names it)" in built.stderr
            image = json.loads(docker("image", "inspect", "--format", "{{json .}}", target).stdout)
            labels = image["Config"]["Labels"]
            assert labels["org.opencontainers.image.base.name"] == f"{remote}@{digest}"
            # the build's self-check reads the secret as up leaves it: the 0600 file granted to uid 10001
            granted = f"bwstack: {checkout}/secrets/hf_token: readable for the serving user (uid 10001) by an ACL entry"
            assert granted in built.stderr, built.stderr[-2000:]
            assert "bwstack selfcheck: ok (" in built.stderr
            checked = as_user(operator, [bwstack, "doctor", "--image", CPU_REGISTRY_VARIANT], {}, checkout)
            _no_traceback(checked)
            assert checked.returncode == 0, checked.stdout + checked.stderr
            assert "bwstack selfcheck: ok (" in checked.stdout
            # nothing the user's commands wrote belongs to anyone else
            uid = pwd.getpwnam(operator.name).pw_uid
            foreign = [str(p) for p in [operator.home, *operator.home.rglob("*")] if p.lstat().st_uid != uid]
            assert foreign == [], foreign[:10]
    finally:
        for ref in made:
            docker("rmi", ref, check=False)
        for volume in set(_project_volumes(project)) - volumes_before:
            docker("volume", "rm", volume, check=False)


def _project_volumes(project: str) -> list[str]:
    """The named volumes Compose labels with ``project``."""
    listed = docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}")
    return listed.stdout.split()
