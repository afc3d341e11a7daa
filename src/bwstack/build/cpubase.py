"""The local base image of a CPU variant (``pins.toml [base] image``), laid out like the real base it mirrors.

The real ``lmsysorg/sglang`` bases are pulled from a registry; a CPU variant's base is made here, offline:
a container of ``bwstack/standin-rootfs:bookworm`` runs ``images/cpu-base/install.sh`` as root with
``--network none`` and the variant's verified wheelhouse mounted read-only
(:func:`~bwstack.build.lock.wheelhouse.stage_wheelhouse`), committed as ``[base] image``. The layout follows
``[base] layout`` (``venv``: SGLang in ``/opt/sglang`` as the 0.5.23 base; ``system``: the system
site-packages as the 0.5.9 base) and ``[sglang] install`` (``editable`` from
``/sgl-workspace/sglang/python``). The Dockerfile then runs its GPU path on it, as it does on a real base.

One layer, no wheel in it (a ``docker build`` would keep the copied wheelhouse in a layer: the classic builder
has no build mounts). The image carries the digest of its inputs (script, lock, layout, root file system) as a
label and is made again only when they change.
"""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack.build import rootfs
from bwstack.build.lock import wheelhouse
from bwstack.errors import ExternalError
from bwstack.stack.pins import Variant
from healthchecks import imagelayout

Echo = Callable[[str], Any]

SCRIPT = Path("images") / "cpu-base" / "install.sh"
#: the digest of everything the base is made from
INPUTS_LABEL = "io.bwstack.cpu-base-inputs"
#: where the wheelhouse and the script are mounted in the container that makes the base
WHEELHOUSE_MOUNT = "/mnt/bwstack-wheelhouse"
SCRIPT_MOUNT = "/mnt/bwstack-cpu-base.sh"
#: the venv of the venv layout and the source tree of an editable SGLang (as in the real bases)
VENV = imagelayout.SGLANG_VENV
WORKSPACE = imagelayout.SGLANG_WORKSPACE
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: what each layout stands for (first-contact.md row 1.1)
MIRRORS = {
    "venv": "lmsysorg/sglang v0.5.23 base: SGLang in a venv at /opt/sglang (sgl-project/sglang PR #30612)",
    "system": "lmsysorg/sglang v0.5.9 base: SGLang in the system site-packages as root, PEP 668 lifted by "
    "root's pip config",
}
TIMEOUT = 1800


def path_of(variant: Variant) -> str:
    return f"{VENV}/bin:{SYSTEM_PATH}" if variant.base_layout == "venv" else SYSTEM_PATH


def inputs_digest(root: Path, variant: Variant, rootfs_id: str) -> str:
    digest = hashlib.sha256()
    for part in (
        (root / SCRIPT).read_bytes(),
        variant.wheelhouse_lock_path.read_bytes(),
        f"{variant.base_layout}|{variant.sglang_install}|{variant.sglang_version}|{path_of(variant)}".encode(),
        rootfs_id.encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:32]


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"docker {args[0]} failed: {exc}") from None


def _label(image: str, name: str) -> str | None:
    done = _docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{name}"}}}}', image)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_base(root: Path, variant: Variant, *, echo: Echo = print) -> str:
    """``[base] image`` of a CPU variant, made (or reused when its inputs are unchanged); returns the ref."""
    if not variant.is_cpu or not variant.base_layout:
        raise ExternalError(f"variant {variant.name} has no local CPU base")
    base_rootfs = rootfs.ensure_rootfs(echo=echo)
    rootfs_id = _docker("image", "inspect", "--format", "{{.Id}}", base_rootfs).stdout.strip()
    want = inputs_digest(root, variant, rootfs_id)
    if _label(variant.base_image, INPUTS_LABEL) == want:
        echo(f"cpu base {variant.base_image}: up to date ({variant.base_layout} layout)")
        return variant.base_image
    folder = wheelhouse.stage_wheelhouse(variant, echo=echo)
    echo(f"cpu base {variant.base_image}: installing the wheelhouse ({variant.base_layout} layout)")
    name = f"bwstack-cpu-base-{uuid.uuid4().hex[:12]}"
    run = ["docker", "run", "--name", name, "--network", "none", "--user", "0", "--entrypoint", "bash",
           "-v", f"{folder.resolve()}:{WHEELHOUSE_MOUNT}:ro",
           "-v", f"{(root / SCRIPT).resolve()}:{SCRIPT_MOUNT}:ro",
           base_rootfs, "-c",
           f'WHEELHOUSE={WHEELHOUSE_MOUNT} LAYOUT="$1" SGLANG_INSTALL="$2" SGLANG_VERSION="$3" '
           f"bash {SCRIPT_MOUNT}",
           "install.sh", variant.base_layout, variant.sglang_install, variant.sglang_version]  # fmt: skip
    try:
        _run_echoing(run, echo)
        changes = [
            f"ENV PATH={path_of(variant)}",
            f"WORKDIR {WORKSPACE}",
            "ENTRYPOINT []",
            'CMD ["/bin/bash"]',
            f'LABEL {INPUTS_LABEL}="{want}" io.bwstack.cpu-base="{variant.name}" '
            f'io.bwstack.cpu-base-layout="{variant.base_layout}" '
            f'io.bwstack.cpu-base-mirrors="{MIRRORS[variant.base_layout]}"',
        ]
        argv = ["commit"]
        for change in changes:
            argv += ["--change", change]
        committed = _docker(*argv, name, variant.base_image, timeout=TIMEOUT)
        if committed.returncode != 0:
            raise ExternalError(
                f"docker commit of {variant.base_image} failed: {committed.stderr.strip()[-300:]}"
            )
    finally:
        _docker("rm", "--force", name)
    echo(f"cpu base {variant.base_image}: made")
    return variant.base_image


def _run_echoing(argv: list[str], echo: Echo) -> None:
    """Run the install container; echo its own ``bwstack cpu-base:`` lines; ExternalError with the tail."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        tail = [*tail[-20:], line.rstrip()]
        if line.startswith("bwstack cpu-base:"):
            echo(f"  {line.rstrip()}")
    try:
        status = process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        raise ExternalError(f"making the CPU base took over {TIMEOUT} s") from None
    if status != 0:
        raise ExternalError(f"making the CPU base failed: {' | '.join(t for t in tail[-5:] if t)}")
