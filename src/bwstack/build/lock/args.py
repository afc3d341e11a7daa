"""``bwstack lock --args``: the parser snapshot ``images/<variant>/sglang-args.json`` from the pinned SGLang.

A variant whose SGLang is a PyPI release (``[sglang] version`` in pins.toml) gets its snapshot from that
wheel, installed with CPU torch in a throwaway venv (:mod:`bwstack.know.venvs`), where
``foreign/dump_args.py`` loads SGLang's real argparse. A nightly (empty version) is not on PyPI: its snapshot
is dumped inside the variant's image with the image's own python (``docker run --rm -i --network none
--entrypoint python3 IMAGE - < foreign/dump_args.py``), which needs the image on this machine; without it
nothing is overwritten, and the command to run where the registry is reachable is printed. ``python -m
bwstack.build.lock.args --proxy VERSION VARIANT_DIR`` writes a stand-in snapshot from a release
wheel (``provenance.method = "proxy-wheel"``) for a nightly whose image cannot be pulled here.
``python -m bwstack.build.lock.args --release VERSION`` writes the shipped snapshot of a release that has no
variant (``data/sglang-args/sglang-VERSION.json``, 0.5.17 to 0.5.22), which ``bwstack upgrade`` reads for a
bare version.

The snapshot's form is fixed in docs/design.md ("Parser snapshot").
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.know import venv_scripts, venvs
from bwstack.stack import pins

Echo = Callable[[str], None]

SCHEMA = "bwstack.sglang-args/1"
SNAPSHOT_FILE = "sglang-args.json"
GENERATED_BY = "bwstack lock --args"
DUMP_SCRIPT = venv_scripts.DUMP_ARGS
DOCKER_TIMEOUT = 900
#: the parser snapshots of the releases between the shipped variants (0.5.17 to 0.5.22), one file per release,
#: read from each release's own wheel; ``bwstack upgrade`` with a bare version takes its parser from here
RELEASES_DIR = Path(__file__).resolve().parents[2] / "data" / "sglang-args"  # src/bwstack/data


def lock_args(variant_dir: Path, *, echo: Echo) -> Path:
    """Regenerate and atomically write ``sglang-args.json`` for one variant folder; returns its path."""
    variant = _load_variant(variant_dir)
    if not variant.sglang_version:
        return _lock_from_image(variant, echo)
    return write_snapshot(variant_dir / SNAPSHOT_FILE, wheel_snapshot(variant.sglang_version, GENERATED_BY))


def wheel_snapshot(version: str, generated_by: str) -> dict[str, Any]:
    """The parser snapshot of the sglang ``version`` wheel from PyPI (in its CPU venv)."""
    env = venvs.ensure_env(version)
    return snapshot_from_dump(
        dump_in_env(env),
        provenance={
            "method": "wheel",
            "source": f"sglang=={env.version} from PyPI ({env.wheel})",
            "sha256": env.wheel_sha256,
            "generated_by": generated_by,
            "note": f"argparse of the sglang {env.version} wheel, loaded next to CPU torch",
        },
    )


def release_snapshot_path(version: str) -> Path:
    """Where the shipped parser snapshot of a release between the variants lives (it may not exist)."""
    return RELEASES_DIR / f"sglang-{venvs.check_version(version)}.json"


def lock_release(version: str) -> Path:
    """Write the shipped parser snapshot of sglang ``version`` (``python -m bwstack.build.lock.args
    --release``)."""
    generated_by = f"python -m bwstack.build.lock.args --release {version}"
    return write_snapshot(release_snapshot_path(version), wheel_snapshot(version, generated_by))


def lock_proxy(variant_dir: Path, proxy_version: str, *, echo: Echo, note: str = "") -> Path:
    """Write a stand-in snapshot from the release wheel ``proxy_version`` (for a nightly not on PyPI)."""
    variant = _load_variant(variant_dir)
    env = venvs.ensure_env(proxy_version)
    what = f"nightly {variant.sglang_commit}" if variant.sglang_commit else variant.base_image
    snapshot = snapshot_from_dump(
        dump_in_env(env),
        provenance={
            "method": "proxy-wheel",
            "source": f"sglang=={env.version} from PyPI ({env.wheel}), standing in for {what}",
            "sha256": env.wheel_sha256,
            "generated_by": f"python -m bwstack.build.lock.args --proxy {proxy_version}",
            "note": note
            or f"{what} is not on PyPI; regenerate inside {variant.base_image} with '{GENERATED_BY}'",
        },
    )
    path = write_snapshot(variant_dir / SNAPSHOT_FILE, snapshot)
    echo(f"wrote {path} (proxy: sglang {proxy_version})")
    return path


def dump_in_env(env: venvs.SglangEnv) -> dict[str, Any]:
    """Run ``foreign/dump_args.py`` with the venv's python and parse its JSON."""
    return _parse_dump(venvs.run_script(env, DUMP_SCRIPT), f"the sglang {env.version} venv")


def dump_in_image(image: str, *, docker: str = "docker", name: str | None = None) -> dict[str, Any]:
    """Run ``foreign/dump_args.py`` in the image's own python3 (stdin), without network; parse its JSON.

    With ``name`` the container is named, and removed when the dump is interrupted (a signal, a timeout)."""
    named = ["--name", name] if name else []
    argv = [docker, "run", "--rm", "-i", *named, "--network", "none", "--entrypoint", "python3", image, "-"]
    try:
        script = DUMP_SCRIPT.read_text(encoding="utf-8")
        done = subprocess.run(argv, input=script, capture_output=True, text=True,
                              timeout=DOCKER_TIMEOUT, check=False)  # fmt: skip
    except BaseException as exc:
        if name:
            subprocess.run([docker, "rm", "--force", name], capture_output=True, timeout=60, check=False)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise ExternalError(
                f"dumping the parser inside {image} timed out after {DOCKER_TIMEOUT} s"
            ) from None
        raise
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        raise ExternalError(f"dumping the parser inside {image} failed: {lines[-1].strip()}")
    return _parse_dump(done.stdout, image)


def snapshot_from_dump(dump: dict[str, Any], *, provenance: dict[str, str]) -> dict[str, Any]:
    """The snapshot document: schema, version, provenance, requires_dist, flags sorted by first option."""
    flags = sorted(dump["flags"], key=lambda flag: str(flag["option_strings"][0]))
    return {
        "schema": SCHEMA,
        "sglang_version": str(dump["sglang_version"]),
        "provenance": provenance,
        "requires_dist": dict(dump.get("requires_dist") or {}),
        "flags": flags,
    }


def render_snapshot(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, ensure_ascii=False) + "\n"


def write_snapshot(path: Path, snapshot: dict[str, Any]) -> Path:
    """Write atomically (:func:`bwstack.files.atomic_write`)."""

    atomic_write(path, render_snapshot(snapshot))
    return path


# --- nightly: inside the image ------------------------------------------------------------------------------


def image_command(image: str) -> str:
    """The command that dumps a parser inside ``image`` (shown where bwstack cannot run it itself)."""
    return f"docker run --rm -i --network none --entrypoint python3 {image} - < {DUMP_SCRIPT}"


def _lock_from_image(variant: pins.Variant, echo: Echo) -> Path:
    image = variant.base_ref
    docker = shutil.which("docker")
    if docker is None or not _image_present(docker, image):
        what = f"nightly {variant.sglang_commit}" if variant.sglang_commit else "this SGLang"
        echo(f"  {variant.name}: {what} is not on PyPI; its parser is dumped inside the image {image}.")
        echo(f"  On a machine with registry access: docker pull {image} && bwstack lock --args --variant "
             f"{variant.name}")  # fmt: skip
        echo(f"  (which runs: {image_command(image)})")
        raise ExternalError(f"image {image} is not on this machine; {SNAPSHOT_FILE} left as it is")
    echo(f"  dumping the parser inside {image}")
    snapshot = snapshot_from_dump(
        dump_in_image(image, docker=docker),
        provenance={
            "method": "image",
            "source": image,
            "sha256": _image_digest(docker, image),
            "generated_by": GENERATED_BY,
            "note": "argparse of the SGLang inside the image, loaded by the image's own python3",
        },
    )
    return write_snapshot(variant.dir / SNAPSHOT_FILE, snapshot)


def _image_present(docker: str, image: str) -> bool:
    done = subprocess.run([docker, "image", "inspect", image], capture_output=True, text=True, check=False)
    return done.returncode == 0


def _image_digest(docker: str, image: str) -> str:
    """The repo digest (``sha256:…``) where the image came from a registry, else the local image id."""
    done = subprocess.run([docker, "image", "inspect", "--format", "{{json .RepoDigests}} {{.Id}}", image],
                          capture_output=True, text=True, check=False)  # fmt: skip
    digests_json, _, image_id = done.stdout.strip().partition(" ")
    try:
        digests = json.loads(digests_json) or []
    except ValueError:
        digests = []
    return str(digests[0]).split("@", 1)[-1] if digests else image_id


# --- helpers ------------------------------------------------------------------------------------------------


def _load_variant(variant_dir: Path) -> pins.Variant:
    if not (variant_dir / pins.PINS_FILE).is_file():
        raise UserError("not a variant folder (no pins.toml)", file=variant_dir)
    return pins.load_variant(variant_dir.parent, variant_dir.name)


def _parse_dump(text: str, where: str) -> dict[str, Any]:
    try:
        dump = json.loads(text)
    except ValueError:
        raise ExternalError(f"the parser dump from {where} is not JSON") from None
    if not isinstance(dump, dict) or not isinstance(dump.get("flags"), list) or not dump["flags"]:
        raise ExternalError(f"the parser dump from {where} has no flags")
    return dump


def main(argv: list[str] | None = None) -> int:
    """``python -m bwstack.build.lock.args [--proxy VERSION [--note TEXT]] VARIANT_DIR`` | ``--release V``."""
    parser = argparse.ArgumentParser(
        prog="python -m bwstack.build.lock.args", description=__doc__.splitlines()[0]
    )
    parser.add_argument("variant_dir", type=Path, nargs="?")
    parser.add_argument("--proxy", metavar="VERSION", help="write a proxy snapshot from this release wheel")
    parser.add_argument("--note", default="", help="provenance note for a proxy snapshot")
    parser.add_argument(
        "--release", metavar="VERSION", action="append", default=[],
        help="write the shipped snapshot of a release between the variants (data/sglang-args/)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.variant_dir is None and not args.release:
        parser.error("give VARIANT_DIR or --release VERSION")
    try:
        for version in args.release:
            print(f"wrote {lock_release(version)}")
        if args.variant_dir is None:
            return 0
        if args.proxy:
            lock_proxy(args.variant_dir, args.proxy, echo=print, note=args.note)
        else:
            print(f"wrote {lock_args(args.variant_dir, echo=print)}")
    except (UserError, ExternalError) as exc:
        print(f"bwstack: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2 if isinstance(exc, UserError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
