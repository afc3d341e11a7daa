"""Build the CPU stand-in images without a container registry.

Three images, all named ``bwstack/standin*`` and labelled ``io.bwstack.standin`` so a cleanup can find them:

1. the Debian root file system image -- made by :mod:`bwstack.build.rootfs` (the CPU variants build on
   it too).
2. ``bwstack/standin-base:<content hash>`` -- the rootfs plus the stdlib-only stand-in code
   (``bwstack/__init__.py``, ``stack/snapshot_argparse.py``, ``standin/``, ``healthchecks/vocabulary.py``,
   ``healthchecks/imagelayout.py``) at ``/opt/standin`` on ``PYTHONPATH``, an ``sglang`` shim package so that
   ``python3 -m sglang.launch_server`` runs the stand-in, and the variant's parser snapshot at
   ``/opt/bwstack/sglang-args.json``. Rebuilt only when that content changes.
3. ``bwstack/standin:<variant>`` -- the project's own Dockerfile built on the base (``dockerbuild.build`` with
   ``base_image=``), so entrypoint, healthcheck, labels and HEALTHCHECK are the shipped ones.

Builds use the classic builder (``DOCKER_BUILDKIT=0``); nothing here pulls from a registry except the
documented ``debian:bookworm-slim`` fallback.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bwstack.build import dockerbuild
from bwstack.build.rootfs import LABEL, ROOTFS_IMAGE, Echo, ensure_rootfs, run_logged
from bwstack.errors import ExternalError, UserError
from bwstack.host.dockerimage import image_exists
from healthchecks import imagelayout, vocabulary

if TYPE_CHECKING:
    from bwstack.stack.schema import Stack

BASE_REPO = "bwstack/standin-base"
STANDIN_REPO = "bwstack/standin"
SNAPSHOT_IN_IMAGE = imagelayout.PARSER_SNAPSHOT
CODE_IN_IMAGE = imagelayout.STANDIN_CODE
#: the same folder in the build context, which mirrors the image from its root
CODE_DIR = CODE_IN_IMAGE.lstrip("/")


def ensure_standin_image(stack: Stack, *, variant: str | None = None, echo: Echo = print) -> str:
    """The stand-in serving image for ``variant`` (default: the stack's), built if needed; returns its ref."""
    name = variant or stack.settings.variant
    pinned = stack.variant(name)
    snapshot = pinned.cli_snapshot_path
    if not snapshot.is_file():
        raise UserError(f"parser snapshot missing; run 'bwstack lock --args --variant {name}'", file=snapshot)
    version = pinned.sglang_version or _snapshot_version(snapshot)
    base = ensure_base_image(snapshot, version, echo=echo)

    tag = f"{STANDIN_REPO}:{name}"
    echo(f"stand-in: building {tag} from the project Dockerfile on {base}")
    started = time.monotonic()
    status = dockerbuild.build(stack, name, tag=tag, base_image=base, dry_run=False, quiet=True)
    if status != 0:
        raise ExternalError(f"docker build of the stand-in serving image {tag} failed (exit status {status})")
    echo(f"stand-in: {tag} ready ({time.monotonic() - started:.0f} s)")
    return tag


def _snapshot_version(snapshot: Path) -> str:
    try:
        raw = json.loads(snapshot.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the parser snapshot: {exc}", file=snapshot) from None
    return str(raw.get("sglang_version") or "") if isinstance(raw, dict) else ""


# --- stand-in base image ------------------------------------------------------------------------------------


def ensure_base_image(snapshot: Path, version: str, *, echo: Echo = print) -> str:
    """``bwstack/standin-base:<hash>`` for this snapshot and the current stand-in code; returns its ref."""
    ensure_rootfs(echo=echo)
    files = base_context(snapshot, version)
    tag = f"{BASE_REPO}:{content_hash(files)[:16]}"
    if image_exists(tag):
        echo(f"stand-in: base image {tag} is up to date")
        return tag
    echo(f"stand-in: building base image {tag} (sglang {version or 'unknown'} shim)")
    with tempfile.TemporaryDirectory(prefix="bwstack-standin-") as tmp:
        context = Path(tmp)
        for rel, data in files.items():
            target = context / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o644)
        run_logged(["docker", "build", "--tag", tag, str(context)], echo, what=f"docker build of {tag}")
    _remove_stale_bases(tag, version)
    return tag


def _remove_stale_bases(keep: str, version: str) -> None:
    """Older base images of the same SGLang version (stand-in code or snapshot changed since); best effort."""
    listing = subprocess.run(
        ["docker", "image", "ls", "--filter", f"label={LABEL}.sglang={version}",
         "--format", "{{.Repository}}:{{.Tag}}", BASE_REPO],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    stale = [ref for ref in listing.stdout.split() if ref != keep and not ref.endswith(":<none>")]
    if stale:
        subprocess.run(
            ["docker", "image", "rm", *stale], capture_output=True, text=True, timeout=120, check=False
        )


def base_context(snapshot: Path, version: str) -> dict[str, bytes]:
    """Every file of the base image's build context (relative path -> content), Dockerfile included."""
    package = Path(__file__).resolve().parents[1]
    stack_pkg = package / "stack"
    files: dict[str, bytes] = {
        f"{CODE_DIR}/bwstack/__init__.py": (package / "__init__.py").read_bytes(),
        # the stack package's __init__ imports nothing, so its stdlib-only parser builder imports alone
        f"{CODE_DIR}/bwstack/stack/__init__.py": (stack_pkg / "__init__.py").read_bytes(),
        f"{CODE_DIR}/bwstack/stack/snapshot_argparse.py": (stack_pkg / "snapshot_argparse.py").read_bytes(),
    }
    for source in sorted((package / "standin").glob("*.py")):
        files[f"{CODE_DIR}/bwstack/standin/{source.name}"] = source.read_bytes()
    # the stand-in reads SGLang's names and DSA defaults from the one vocabulary, its paths from the image's
    # layout (both stdlib only)
    shared = Path(vocabulary.__file__).resolve().parent
    for name in ("__init__.py", "vocabulary.py", "imagelayout.py"):
        files[f"{CODE_DIR}/healthchecks/{name}"] = (shared / name).read_bytes()
    files[f"{CODE_DIR}/sglang/__init__.py"] = shim_init(version).encode("utf-8")
    files[f"{CODE_DIR}/sglang/launch_server.py"] = SHIM_LAUNCH_SERVER.encode("utf-8")
    try:
        files[SNAPSHOT_IN_IMAGE.lstrip("/")] = snapshot.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read the parser snapshot: {exc}", file=snapshot) from None
    files["Dockerfile"] = base_dockerfile(version).encode("utf-8")
    return files


def shim_init(version: str) -> str:
    """``sglang/__init__.py`` of the stand-in image: the version it imitates and a marker."""
    return (
        '"""Not SGLang: bwstack\'s CPU stand-in answers as this SGLang version (see bwstack.standin)."""\n'
        f"__version__ = {version or '0.0.0'!r}\n"
        "BWSTACK_STANDIN = True\n"
    )


SHIM_LAUNCH_SERVER = (
    '"""``python3 -m sglang.launch_server`` in the stand-in image runs bwstack\'s CPU stand-in."""\n'
    "from bwstack.standin.server import main\n"
    "\n"
    'if __name__ == "__main__":\n'
    "    raise SystemExit(main())\n"
)


def base_dockerfile(version: str) -> str:
    return (
        f"FROM {ROOTFS_IMAGE}\n"
        "COPY opt/ /opt/\n"
        f"ENV PYTHONPATH={CODE_IN_IMAGE} PYTHONUNBUFFERED=1 LANG=C.UTF-8\n"
        f"RUN chmod -R a+rX {CODE_IN_IMAGE} {SNAPSHOT_IN_IMAGE.rsplit('/', 1)[0]} \\\n"
        f" && python3 -m compileall -q {CODE_IN_IMAGE} \\\n"
        ' && python3 -c "import sglang, sglang.launch_server, bwstack.standin.server;'
        ' assert sglang.BWSTACK_STANDIN"\n'
        f'LABEL {LABEL}="base" {LABEL}.sglang="{version}" {LABEL}.args="{SNAPSHOT_IN_IMAGE}"\n'
        'CMD ["python3", "-m", "sglang.launch_server", "--help"]\n'
    )


def content_hash(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(files[rel]).digest())
    return digest.hexdigest()
