"""``bwstack build``: the ``docker build`` of a variant's serving image with every pin as a build arg (pins
checked first), a CPU variant's local base and staged override wheels prepared before it, and the build-only
stage kept as the target's build cache (``bwstack/build-stage:<target>``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from bwstack import __version__, launch
from bwstack.build import basecheck, cpubase
from bwstack.build.lock import command as locking
from bwstack.build.lock import wheelhouse
from bwstack.errors import UserError
from bwstack.host.doctor import image
from bwstack.host.gitinfo import git
from bwstack.stack.pins import Variant
from bwstack.stack.schema import Stack


def build(
    stack: Stack,
    variant_name: str,
    *,
    tag: str | None,
    base_image: str | None,
    dry_run: bool,
    quiet: bool = False,
    locked: bool = False,
) -> int:
    """``docker build`` of one variant with every pin as a build arg; returns docker's exit status. A base
    locked by digest is built ``FROM name@digest``, after the registry is asked whether its tag moved
    (:mod:`bwstack.build.basecheck`; BaseMoved unless ``locked``)."""
    variant = stack.variant(variant_name)
    echo: Callable[[str], object] = (lambda _m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    if base_image is None:
        basecheck.check(variant, locked=locked, echo=echo)
    if variant.is_cpu and not dry_run and base_image is None:
        prepare_cpu_build(stack, variant, echo=(lambda _m: None) if quiet else print)
    argv = docker_build_argv(stack, variant_name, tag=tag, base_image=base_image)
    if dry_run:
        print(" ".join(_shell_quote(a) for a in argv))
        return 0
    result = subprocess.run(argv, cwd=stack.root, check=False, capture_output=quiet, text=True)
    if result.returncode != 0 and quiet:
        sys.stderr.write((result.stdout or "")[-4000:] + (result.stderr or "")[-4000:])
    prune_build_leftovers(argv)
    if result.returncode == 0 and tag is None and base_image is None:
        return image.main_check(stack, variant_name)
    return result.returncode


def prepare_cpu_build(stack: Stack, variant: Variant, *, echo: Callable[[str], object]) -> str:
    """A CPU variant's base, ``[base] image``: made locally from the Debian root file system (mmdebstrap, no
    registry) and the verified wheelhouse (unless it names a registry: then it is pulled by digest, as a GPU
    variant's), laid out like the real base (:mod:`bwstack.build.cpubase`); its
    override wheels, verified against overrides.lock, staged in ``images/<variant>/override-wheels/`` for the
    Dockerfile's offline override step. The serving image is then built from the repository's own context, as
    a GPU variant's is."""
    base = variant.base_ref
    if not variant.base_pulled:
        base = cpubase.ensure_base(stack.root, variant, echo=echo)
    staged = wheelhouse.stage_overrides(variant, echo=echo)
    echo(f"overrides: {len(variant.overrides)} wheel(s) staged in images/{variant.name}/{staged.name}/")
    return base


#: what the Dockerfile reads from its build context (see .dockerignore); a staged context copies these
CONTEXT_ITEMS = (
    "Dockerfile",
    "healthchecks",
    "images/build-sources.sh",
    "images/verify_pins.py",
)

BUILD_ID_ARG = "BWSTACK_BUILD_ID"

#: the build ids of this process's builds (tests prune what a crashed build left)
BUILD_IDS: list[str] = []


def prune_build_leftovers(argv: Sequence[str] | None = None) -> None:
    """Keep the build-only stage of the build ``argv`` ran as the build cache of its target, tagged
    ``bwstack/build-stage:<target>`` (the legacy builder leaves it untagged; pruning it would throw away the
    cached wheelhouse install of a CPU variant), and remove the stage image that tag held before. Without
    ``argv``: prune what the builds of this process left untagged. Never touches another build's images,
    which may still be running."""
    prefix = f"{BUILD_ID_ARG}="
    if argv is None:
        for own in BUILD_IDS:
            _docker("image", "prune", "--force", *_stage_filters(own))
        return
    build_id = next((a.removeprefix(prefix) for a in argv if a.startswith(prefix)), None)
    target = argv[argv.index("--tag") + 1] if "--tag" in argv else None
    if build_id is None or target is None:
        return
    found = _docker("images", "--quiet", "--no-trunc", *_stage_filters(build_id)).stdout.split()
    if not found:
        return
    stage_tag = f"{STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', target)[:120]}"
    old = _docker("image", "inspect", "--format", "{{.Id}}", stage_tag).stdout.strip()
    _docker("tag", found[0], stage_tag)
    if old and old != found[0]:
        _docker("rmi", old)


STAGE_REPO = "bwstack/build-stage"


def _stage_filters(build_id: str) -> list[str]:
    return ["--filter", "dangling=true", "--filter", "label=io.bwstack.stage=build-only",
            "--filter", f"label=io.bwstack.build-id={build_id}"]  # fmt: skip


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=False)


def docker_build_argv(
    stack: Stack,
    variant_name: str,
    *,
    tag: str | None,
    base_image: str | None,
    context: Path | None = None,
) -> list[str]:
    """The ``docker build`` command line of a variant's serving image (pins checked first)."""

    variant = stack.variant(variant_name)
    for path in (variant.lock_path, variant.manifest_path, variant.cli_snapshot_path):
        if not path.is_file():
            hint = "bwstack lock" if path == variant.lock_path else "bwstack render"
            raise UserError(f"missing {path.name}; run '{hint}'", file=path)
    for problem in locking.lock_problems(variant):
        raise UserError(problem, file=variant.lock_path)
    args = variant.build_args()
    if base_image:
        args["BASE_IMAGE"] = base_image
        args["PINNED_INSTALL"] = "0"  # the CPU stand-in base carries none of the pinned packages
    args["BWSTACK_VERSION"] = __version__
    args["BWSTACK_REVISION"] = _git_revision(stack.root)
    args["BUILD_DATE"] = _build_date(stack.root)
    args[BUILD_ID_ARG] = uuid.uuid4().hex[:16]
    BUILD_IDS.append(args[BUILD_ID_ARG])
    argv = [
        "docker",
        "build",
        "--file",
        str(stack.root / "Dockerfile"),
        "--tag",
        tag or launch.image_ref(stack, variant.name),
    ]
    for key, value in args.items():
        argv += ["--build-arg", f"{key}={value}"]
    argv.append(str(context or stack.root))
    return argv


def _build_date(root: Path) -> str:
    """The commit time of HEAD (reproducible, like SOURCE_DATE_EPOCH), else now; UTC ISO 8601."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        stamp = datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    committed = git(root, "log", "-1", "--format=%ct")
    if committed is not None and committed.isdigit():
        return datetime.fromtimestamp(int(committed), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _git_revision(root: Path) -> str:
    return git(root, "rev-parse", "HEAD") or ""


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
