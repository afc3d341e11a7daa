"""The CPU stack's ``up`` as a real non-root member of the ``docker`` group (``support.anyuser``), in the user's
own checkout of the shipped ``profiles.cpu.yaml``: the tiny models are made (the copy model in the stack's CPU
image, as the user's uid: no host venv, nothing downloaded), and the real SGLang server in
``bwstack/sglang:v0.5.23-cpu`` (tests/sweep/test_cpu_stack.py builds it) turns healthy by a sampled decode.

Only the compose project name and the port are set (the engine is shared). Everything made here (the user and
its home, the project's containers, volumes and network) is removed at the end.
"""

from __future__ import annotations

import pwd

import pytest

from support import dockerstack
from support.anyuser import Operator, as_user
from support.stack import copy_stack, edit_yaml

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]

IMAGE = "bwstack/sglang:v0.5.23-cpu"
HEALTHY = "cpu-torch-native"


def test_a_non_root_operator_brings_up_the_cpu_stack(operator: Operator) -> None:
    if dockerstack.docker("image", "inspect", IMAGE, check=False).returncode != 0:
        dockerstack.skip_or_fail(f"no {IMAGE} built here (tests/sweep/test_cpu_stack.py builds it)")
    checkout = operator.home / "bwstack"
    checkout.mkdir()
    copy_stack(checkout)
    project = dockerstack.unique_name("bwnrcpu")
    port = dockerstack.free_port()
    edit_yaml(checkout / "profiles.cpu.yaml", lambda data: data["stack"].update(project=project, port=port))
    operator.own(checkout)
    cli = [str(operator.bwstack), "-f", "profiles.cpu.yaml"]
    try:
        rendered = as_user(
            operator, [*cli, "render"], {}, checkout
        )  # the file was edited: render, as documented
        assert rendered.returncode == 0, rendered.stdout + rendered.stderr
        up = as_user(operator, [*cli, "up", HEALTHY], {}, checkout, timeout=900)
        out = up.stdout + up.stderr
        assert "Traceback" not in out, out[-4000:]
        assert up.returncode == 0, out[-4000:]
        assert "bwstack: tiny-model: building the copy model (an induction circuit)" in up.stdout
        assert f"{HEALTHY}: healthy after" in up.stdout
        ids = dockerstack.project_ids("container", project)
        assert len(ids) == 1
        assert dockerstack.TrackedContainer(ids[0]).health() == "healthy"
        # what up made belongs to the user: the tiny models in its checkout, no venv or wheel in its home
        uid = pwd.getpwnam(operator.name).pw_uid
        models = checkout / ".cache" / "cpu-models"
        assert sorted(p.name for p in models.iterdir()) == ["copy", "tiny", "tiny-nan"]
        foreign = [str(p) for p in [operator.home, *operator.home.rglob("*")] if p.lstat().st_uid != uid]
        assert foreign == [], foreign[:10]
        assert not (operator.home / ".cache" / "bwstack" / "venvs").exists()
        down = as_user(operator, [*cli, "down"], {}, checkout)
        assert down.returncode == 0, down.stdout + down.stderr
        assert dockerstack.project_ids("container", project) == []  # the JIT volume is kept by design
    finally:
        dockerstack.force_clean(project)
