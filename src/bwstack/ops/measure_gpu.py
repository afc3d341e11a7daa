"""One side of ``bwstack upgrade OLD NEW --measure`` on a GPU host: the profile's own rendered compose
service, started the way ``bwstack up`` starts it.

The side's spec is the stack's Compose render with the measured profile moved to the side's variant
(:func:`spec_file`: the same template, so the same GPU reservation, shm, ulimits, IPC, model cache, secrets,
healthcheck and 127.0.0.1 port as ``compose.yaml``), written beside ``compose.yaml`` under a name of its own
and removed afterwards. It runs in the stack's own compose project through :func:`bwstack.ops.updown.up`
(other profiles stopped first: one server on the GPUs at a time; health waited for with up's progress and,
on failure, up's reason and classified log), is asked on the stack's port, and is removed when its phase
ends, also on failure or Ctrl-C.

Before anything starts, this host must be able to: NVIDIA GPUs that nvidia-smi lists and Docker's NVIDIA
runtime (or CDI devices), as ``bwstack doctor`` reads them (:func:`host_problem`); the side's image built;
the model fetched. Each missing piece is one line (exit 2 for this host, exit 1 for what ``up`` refuses).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from bwstack import files, launch
from bwstack.errors import ExternalError, UserError
from bwstack.host import dockerimage, modelcache
from bwstack.host.doctor import command, container, facts, probe
from bwstack.host.stackproject import project_for
from bwstack.ops import updown
from bwstack.render import compose
from bwstack.stack.schema import Stack

#: the scratch spec of one side, beside compose.yaml (its relative paths resolve as compose.yaml's do)
SPEC_NAME = ".bwstack-measure-{variant}.compose.yaml"


def host_problem(raw: facts.RawHost) -> str | None:
    """Why this host cannot start a GPU service (doctor's reading of nvidia-smi and docker info), or None."""
    gpus, why = facts.gpus_of(raw)
    if not gpus:
        return why or "no NVIDIA GPU found"
    runtime = container.check_gpu_runtime(raw)
    if runtime.status != "pass":
        return f"{runtime.title}: {runtime.detail}" + (f" ({runtime.fix})" if runtime.fix else "")
    return None


def check_host(variant: str) -> None:
    """UserError (exit 2) naming what this host lacks to run ``variant`` on its GPUs."""
    problem = host_problem(command.collect(probe.SystemProbe()))
    if problem is not None:
        raise UserError(
            f"GPU variant {variant} is measured on this host's GPUs, and this host has none usable: "
            f"{problem}; "
            "run it on a GPU host (bwstack doctor says what is missing), or measure on the CPU variants",
            field="--measure",
        )


def check_image(stack: Stack, profile: str, variant: str) -> str:
    """The side's serving image, or UserError naming the build that makes it."""
    image = launch.launch_spec(stack, profile, variant).image
    if not dockerimage.image_exists(image):
        raise UserError(
            f"--measure needs the image {image} of {variant}: run 'bwstack build --variant {variant}' first",
            field="--measure",
        )
    return image


def spec_file(stack: Stack, variant: str) -> Path:
    """Write the side's compose spec (the render of ``stack``, already moved to ``variant``); its path."""
    path = stack.compose_file.parent / SPEC_NAME.format(variant=variant)
    files.atomic_write(path, compose.render_compose(stack))
    return path


@contextlib.contextmanager
def serving(
    stack: Stack, profile: str, variant: str, *, echo: Callable[[str], None] = lambda _m: None
) -> Iterator[str]:
    """``profile`` on ``variant`` (``stack`` already moved to it) served on this host's GPUs as ``up`` serves
    it, until the block ends; its base URL. ExternalError when it does not get healthy."""
    check_host(variant)
    image = check_image(stack, profile, variant)
    env = modelcache.service_env(stack)  # refuses when the model is not fetched
    path = spec_file(stack, variant)
    project = project_for(stack, compose_file=path, env=env)
    echo(f"measure: {variant}: starting {profile} ({image}) as bwstack up does, from {path.name}")
    try:
        status = updown.up(
            stack, profile, force=False, timeout=None, wait=True, project=project, out=sys.stderr
        )
        if status != 0:
            raise ExternalError(
                f"{profile} on {variant} did not get healthy (above: up's reason); nothing to measure"
            )
        echo(f"measure: {variant}: {profile} healthy")
        yield f"http://127.0.0.1:{stack.settings.port}"
    finally:
        with contextlib.suppress(Exception):
            project.run(["rm", "--stop", "--force", profile], profiles=[profile], capture=True, timeout=300)
        path.unlink(missing_ok=True)
        echo(f"measure: {variant}: {profile} stopped and removed")
