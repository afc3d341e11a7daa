"""Any operator: root and a real non-root member of the ``docker`` group, made here, run ``fetch``, the
model-state check, ``doctor`` and ``up`` against the stack's named model-cache volume (Docker's volume folder
is root's: ``/var/lib/docker`` is mode 0710).

The user gets bwstack as an operator would (``support.anyuser``). The Hub is ``support.hub`` on
127.0.0.1; ``up`` starts the stand-in image (no GPU: the stand-in sweep's ``compose.nogpu.yaml`` is added to the
project, as tests/ops/test_cli_up_down.py does). Creating the user needs root (CI runs as root). Everything
made here (the user and its home, the venv, volumes, containers, image tags) is removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bwstack import launch
from bwstack.host import cachevolume, modelcache
from bwstack.render import compose
from bwstack.stack import loader, schema
from bwstack.sweep.run import STANDIN_OVERRIDE, gpu_reservation_reset, memlock_reset
from healthchecks import imagelayout
from support import dockerstack
from support.anyuser import Operator, as_user
from support.hub import TEST_REPO as REPO
from support.hub import TEST_TOKEN as TOKEN
from support.hub import Hub, Repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: the model-state check up and the sweep run, as one line of JSON (the user's own interpreter runs it)
STATE = (
    "import json, sys; from pathlib import Path; from bwstack.host import modelcache; "
    "from bwstack.stack import loader; print(json.dumps(modelcache.service_env(loader.load_stack(Path(sys.argv[1])))))"
)
#: `bwstack up` with the stand-in's compose overrides added to the project (the commands' logic untouched)
UP = """
import dataclasses, sys
from pathlib import Path
from bwstack import cli
from bwstack.host import stackproject
from bwstack.ops import updown
extra = [Path(p) for p in sys.argv[1].split(",")]
shipped = stackproject.project_for
def project_for(stack, compose_file=None, env=None):
    project = shipped(stack, compose_file, env)
    return dataclasses.replace(project, files=(*project.files, *extra))
updown.project_for = project_for
cli.main(sys.argv[2:])
"""


def hub_env(hub: Hub) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}


def as_root(argv: list[str], hub: Hub, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(hub_env(hub), HF_HOME=str(cwd / "client-home"))
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd, env=env, check=False)


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert TOKEN not in done.stdout + done.stderr


@pytest.fixture()
def helper_built(docker_engine: None) -> str:
    """A bwstack serving image (python3, huggingface_hub, uid 10001): tests/sweep/test_cpu_stack.py builds it."""
    listed = dockerstack.docker("image", "ls", "--format", "{{.Tag}}", cachevolume.FALLBACK_REPOSITORY)
    if not [tag for tag in listed.stdout.split() if tag != "<none>"]:
        dockerstack.skip_or_fail(f"no {cachevolume.FALLBACK_REPOSITORY} image built here")
    return cachevolume.helper_image(None)


@contextmanager
def user_stack(user: Operator, repo: Repo, *, image_repo: str | None = None) -> Iterator[schema.Stack]:
    """The shipped stack in the user's home, serving the local hub's repo from the named volume, owned by
    the user; its compose project (containers, volumes) removed at the end."""
    project = dockerstack.unique_name("bwnr")

    def edit(data: Any) -> None:
        data["stack"].update({"project": project, "port": dockerstack.free_port()})
        if image_repo is not None:
            data["stack"]["image_repo"] = image_repo
        data["stack"]["healthcheck"].update(
            {"interval": "1s", "timeout": "20s", "start_period": "30s", "check_timeout": 15}
        )
        data["model"].update({"path": REPO, "revision": repo.commit})
        data["model"]["env"] = {"BWSTACK_STANDIN_LOAD_SECONDS": dockerstack.LOAD_SECONDS}

    folder = user.home / project
    folder.mkdir()
    try:
        stack = dockerstack.edited_stack(folder, edit)
        secrets = stack.root / "secrets"
        secrets.mkdir(exist_ok=True)
        (secrets / "hf_token").write_text(TOKEN + "\n")
        (secrets / "hf_token").chmod(0o600)
        subprocess.run(["chown", "-R", f"{user.name}:{user.name}", str(folder)], check=True)
        yield stack
    finally:
        dockerstack.force_clean(project)


def volume_data(stack: schema.Stack) -> Path:
    return modelcache.locate(stack).root


def test_a_root_fetch_is_read_and_refetched_by_a_non_root_operator(
    operator: Operator, helper_built: str, hub: Hub, repo: Repo
) -> None:
    with user_stack(operator, repo) as stack:
        file = str(stack.path)
        fetched = as_root([sys.executable, "-m", "bwstack.cli", "fetch", "-f", file], hub, stack.root)
        assert fetched.returncode == 0, fetched.stderr
        no_traceback(fetched)
        assert f"now belongs to the serving user (uid {imagelayout.UID})" in fetched.stdout
        blocked = as_user(operator, ["ls", str(volume_data(stack))], {}, stack.root)
        assert blocked.returncode != 0, blocked.stdout  # Docker's volume folder is root's: closed to the user
        # the operator's model-state check (what up and the sweep run): complete, so HF_HUB_OFFLINE=1
        state = as_user(operator, [str(operator.python), "-c", STATE, file], {}, stack.root)
        assert state.returncode == 0, state.stderr
        no_traceback(state)
        assert json.loads(state.stdout) == {modelcache.OFFLINE_VAR: "1"}
        # doctor says the same, as the operator
        doctor = as_user(operator, [str(operator.bwstack), "doctor", "-f", file, "--json"], {}, stack.root)
        no_traceback(doctor)
        checks = {c["id"]: c for c in json.loads(doctor.stdout)["checks"]}
        cache = checks["model_cache"]
        assert cache["status"] == "pass", cache
        assert f"{REPO}@{repo.commit[:12]}: 10 files" in cache["detail"]
        # the operator's fetch finds it complete through the helper and downloads nothing
        before = len(hub.requests("cdn"))
        again = as_user(operator, [str(operator.bwstack), "fetch", "-f", file], hub_env(hub), stack.root)
        assert again.returncode == 0, again.stdout + again.stderr
        no_traceback(again)
        assert "through a short-lived container as the serving user (uid 10001)" in again.stdout
        assert f"{REPO}@{repo.commit} complete and verified: 10 files" in again.stdout
        assert len(hub.requests("cdn")) == before


def test_a_non_root_operator_fetches_and_up_starts_offline(
    operator: Operator,
    helper_built: str,
    standin_refs: dict[str, str],
    hub: Hub,
    repo: Repo,
) -> None:
    test_repo = f"bwstack-test/{dockerstack.unique_name('bwnrimg')}"
    with user_stack(operator, repo, image_repo=test_repo) as stack:
        file = str(stack.path)
        # before a fetch, the operator's up refuses in one line, before any container
        healthy = next(n for n, p in stack.profiles.items() if not p.known_bad and not p.variant)
        refused = as_user(operator, [str(operator.bwstack), "up", "-f", file, healthy], {}, stack.root)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        no_traceback(refused)
        assert f"model {REPO} is not fetched: model cache volume" in refused.stderr
        fetched = as_user(operator, [str(operator.bwstack), "fetch", "-f", file], hub_env(hub), stack.root)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        no_traceback(fetched)
        assert "through a short-lived container as the serving user (uid 10001)" in fetched.stdout
        assert f"{REPO}@{repo.commit} complete and verified: 10 files" in fetched.stdout
        # what the helper wrote belongs to the serving user; root's own check reads it directly
        manifest = modelcache.manifest_path(modelcache.locate(stack), REPO, repo.commit)
        assert manifest.stat().st_uid == imagelayout.UID
        assert json.loads(manifest.read_text())["commit"] == repo.commit
        assert modelcache.service_env(loader.load_stack(stack.path)) == {modelcache.OFFLINE_VAR: "1"}
        # up as the operator: the stand-in image under the stack's own tag, no GPU reservation
        tag = launch.image_ref(stack, stack.settings.variant)
        dockerstack.docker("tag", standin_refs[stack.settings.variant], tag)
        try:
            names = list(stack.profiles)
            extra = [stack.root / STANDIN_OVERRIDE]
            extra[0].write_text(gpu_reservation_reset(names))
            if dockerstack.engine_refuses_memlock(tag):
                extra.append(stack.root / "compose.host.yaml")
                extra[-1].write_text(memlock_reset(names))
            compose.write_outputs(compose.render_outputs(stack))
            subprocess.run(["chown", "-R", f"{operator.name}:{operator.name}", str(stack.root)], check=True)
            overrides = ",".join(map(str, extra))
            argv = [str(operator.python), "-c", UP, overrides, "up", "-f", file, healthy, "--timeout", "120"]
            up = as_user(operator, argv, {}, stack.root)
            no_traceback(up)
            assert up.returncode == 0, up.stdout + up.stderr
            assert f"{healthy}: healthy after" in up.stdout
            ids = dockerstack.project_ids("container", stack.settings.project)
            assert len(ids) == 1
            env = dockerstack.TrackedContainer(ids[0]).inspect()["Config"]["Env"]
            assert "HF_HUB_OFFLINE=1" in env
            down = as_user(operator, [str(operator.bwstack), "down", "-f", file], {}, stack.root)
            assert down.returncode == 0, down.stdout + down.stderr
        finally:
            dockerstack.docker("image", "rm", tag, check=False)
