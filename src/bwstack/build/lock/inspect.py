"""``bwstack lock --inspect VARIANT``: the one run that settles what the first-contact read could not.

For the first operator with registry access: pulls the variant's base image (``--image`` inspects a local
image instead, never pulled), records its digest, entrypoint, user and environment, then runs bwstack's
in-image self-check script (``healthchecks/selfcheck.py --json``, mounted read-only) inside it as uid 10001
with no network, for python3 and its site, package versions, users, the SGLang and FlashInfer cubin folders
and the imports. Each fact of the shared reference first-contact.md that this can decide is printed as
``confirms`` or ``contradicts`` with what was found; the whole record goes to ``--out`` as JSON.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwstack.build.lock.command import set_digest
from bwstack.errors import ExternalError
from bwstack.files import atomic_write
from bwstack.stack import pins
from healthchecks import imagelayout

Echo = Callable[[str], None]
SCHEMA = "bwstack.inspect/1"
MOUNT = imagelayout.INSPECT_MOUNT
TIMEOUT = 900
Facts = dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """A row of first-contact.md judged from the record: True confirms, False contradicts, None: unknown."""

    row: str
    text: str
    judge: Callable[[Facts, pins.Variant], bool | None]
    found: Callable[[Facts, pins.Variant], str]


def _versions(f: Facts) -> dict[str, str | None]:
    return dict(f["inside"]["facts"]["versions"])


def _public(version: str | None) -> str | None:
    return version.split("+", 1)[0] if version else None


def _purelib(f: Facts) -> str:
    return str(f["inside"]["facts"]["python"]["purelib"])


def _release(v: pins.Variant) -> str:
    return v.sglang_version or ""


def _base_env(f: Facts) -> dict[str, str]:
    return dict(item.split("=", 1) for item in f["config"].get("Env") or [] if "=" in item)


def _shadowed(f: Facts, root: Path) -> list[str]:
    text = (root / "Dockerfile").read_text(encoding="utf-8")
    args = set(re.findall(r"^ARG ([A-Z_]+)", text, flags=re.MULTILINE))
    return sorted(args & set(_base_env(f)))


def claims(root: Path) -> list[Claim]:
    """The decidable rows of first-contact.md (row numbers as there)."""
    return [
        Claim(
            "1.1",
            "python3 on PATH is the interpreter that has sglang",
            lambda f, v: _versions(f).get("sglang") is not None,
            lambda f, v: (
                f"{f['inside']['facts']['python']['executable']}, sglang {_versions(f).get('sglang')}"
            ),
        ),
        Claim(
            "1.1",
            "0.5.23 base: SGLang in a venv at /opt/sglang (PR #30612); 0.5.9 base: system dist-packages",
            lambda f, v: (
                _purelib(f).startswith(f"{imagelayout.SGLANG_VENV}/")
                if _release(v) == "0.5.23"
                else ("dist-packages" in _purelib(f) if _release(v) == "0.5.9" else None)
            ),
            lambda f, v: f"site {_purelib(f)}",
        ),
        Claim(
            "1.4",
            "0.5.9 base: editable SGLang under /sgl-workspace/sglang",
            lambda f, v: (
                str(f["inside"]["facts"]["sglang_dir"] or "").startswith(imagelayout.SGLANG_WORKSPACE)
                if _release(v) == "0.5.9"
                else None
            ),
            lambda f, v: f"sglang at {f['inside']['facts']['sglang_dir']}",
        ),
        Claim(
            "1.6",
            "the base reports the pinned sglang version",
            lambda f, v: (
                _public(_versions(f).get("sglang")) == v.sglang_version if v.sglang_version else None
            ),
            lambda f, v: f"sglang {_versions(f).get('sglang')}, pinned {v.sglang_version or v.sglang_commit}",
        ),
        Claim(
            "2.1",
            f"uid {imagelayout.UID} is free in the base",
            lambda f, v: all(u["uid"] != imagelayout.UID for u in f["inside"]["facts"]["users"]),
            lambda f, v: ", ".join(f"{u['name']}={u['uid']}" for u in f["inside"]["facts"]["users"]),
        ),
        Claim(
            "2.2",
            "the base sets no ENV HOME",
            lambda f, v: "HOME" not in _base_env(f),
            lambda f, v: f"HOME={_base_env(f).get('HOME', '(unset)')}",
        ),
        Claim(
            "2.3",
            f"/root is closed to uid {imagelayout.UID}",
            lambda f, v: not f["inside"]["facts"]["root_readable"],
            lambda f, v: f"/root readable: {f['inside']['facts']['root_readable']}",
        ),
        Claim(
            "3.1",
            "flashinfer-cubin and flashinfer-jit-cache equal flashinfer-python",
            lambda f, v: (
                None
                if _versions(f).get("flashinfer-python") is None
                else all(
                    _public(_versions(f).get(n)) in (None, _public(_versions(f).get("flashinfer-python")))
                    for n in ("flashinfer-cubin", "flashinfer-jit-cache")
                )
            ),
            lambda f, v: ", ".join(
                f"{n} {_versions(f).get(n)}"
                for n in ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
            ),
        ),
        Claim(
            "3.3",
            f"the FlashInfer cubin folder is root-owned (not writable for uid {imagelayout.UID})",
            lambda f, v: (
                not f["inside"]["facts"]["flashinfer_cubin_dir_writable"]
                if f["inside"]["facts"]["flashinfer_cubin_dir"]
                else None
            ),
            lambda f, v: str(f["inside"]["facts"]["flashinfer_cubin_dir"]),
        ),
        Claim(
            "3.9",
            "the base does not set SGLANG_RUST_BUILD_MODE",
            lambda f, v: "SGLANG_RUST_BUILD_MODE" not in _base_env(f),
            lambda f, v: f"SGLANG_RUST_BUILD_MODE={_base_env(f).get('SGLANG_RUST_BUILD_MODE', '(unset)')}",
        ),
        Claim(
            "4.5",
            "0.5.9 base: huggingface-hub below 1.0 (the one transformers 4.57.1 allows)",
            lambda f, v: (
                str(_versions(f).get("huggingface-hub") or "").startswith("0.")
                if _release(v) == "0.5.9"
                else None
            ),
            lambda f, v: f"huggingface-hub {_versions(f).get('huggingface-hub')}",
        ),
        Claim(
            "build args",
            "no base environment variable shadows a Dockerfile build arg (an inherited ENV beats an ARG)",
            lambda f, v: not _shadowed(f, root),
            lambda f, v: ", ".join(_shadowed(f, root)) or "none",
        ),
    ]


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"docker {args[0]} failed: {exc}") from None


def record(root: Path, image: str) -> Facts:
    """Digest, config and the in-image facts of ``image`` (a local image)."""
    inspected = _docker("image", "inspect", image)
    if inspected.returncode != 0:
        raise ExternalError(f"image {image} is not on this machine ({inspected.stderr.strip()[:160]})")
    meta = json.loads(inspected.stdout)[0]
    # a base gives uid 10001 no home (row 2.2): the serving image's HOME, empty and its own, as the Dockerfile
    # makes it, so the imports are judged as the image runs them (SGLang's import writes under ~/.cache)
    home = f"{imagelayout.HOME}:uid={imagelayout.UID},gid={imagelayout.GID},mode=0700"
    done = _docker(
        "run", "--rm", "--network", "none", "--user", f"{imagelayout.UID}:{imagelayout.GID}",
        "--tmpfs", home, "-e", f"HOME={imagelayout.HOME}",
        "--entrypoint", "python3", "-v", f"{root / 'healthchecks'}:{MOUNT}:ro", image,
        f"{MOUNT}/selfcheck.py", "--json",
        timeout=TIMEOUT,
    )  # fmt: skip
    try:
        inside = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise ExternalError(f"the self-check script did not run in {image}: {tail}") from None
    return {
        "schema": SCHEMA,
        "image": image,
        "id": meta.get("Id"),
        "repo_digests": meta.get("RepoDigests") or [],
        "config": {
            k: meta.get("Config", {}).get(k) for k in ("Env", "User", "Entrypoint", "Cmd", "WorkingDir")
        },
        "inside": inside,
    }


def inspect(root: Path, name: str, *, image: str | None, out: Path | None, echo: Echo) -> int:
    """Pull (unless ``image``), record and judge; 0 when nothing contradicts first-contact.md, else 1."""
    root = root.resolve()  # a bind mount needs an absolute path (a bare name is a named volume)
    variant = pins.load_variant(root / "images", name)
    target = image or variant.base_ref
    if image is None:
        echo(f"inspect: pulling {target}")
        pulled = _docker("pull", target, timeout=3600)
        if pulled.returncode != 0:
            raise ExternalError(f"docker pull {target} failed: {pulled.stderr.strip()[:200]}")
    facts = record(root, target)
    echo(f"inspect: {target} ({facts['id']}) digests {', '.join(facts['repo_digests']) or 'none (local)'}")
    py = facts["inside"]["facts"]["python"]
    echo(f"inspect: python3 {py['executable']} {py['version']}, site {py['purelib']}")
    config = facts["config"]
    echo(
        f"inspect: user {config['User'] or '(root)'}, entrypoint {config['Entrypoint']}, cmd {config['Cmd']}"
    )
    echo("inspect: versions " + ", ".join(f"{k} {v}" for k, v in _versions(facts).items() if v))
    if image is None and not variant.base_digest:
        repo = variant.base_image.rsplit(":", 1)[0]
        digest = next((d.split("@", 1)[1] for d in facts["repo_digests"] if d.startswith(repo + "@")), None)
        if digest:
            set_digest(variant.pins_path, digest)
            echo(f"inspect: [base] digest {digest} written to {variant.pins_path}")
    contradicted = 0
    for claim in claims(root):
        verdict = claim.judge(facts, variant)
        if verdict is None:
            continue
        word = "confirms" if verdict else "contradicts"
        contradicted += not verdict
        echo(f"{word} first-contact {claim.row}: {claim.text} -- found {claim.found(facts, variant)}")
    for problem in facts["inside"]["problems"]:
        if problem.startswith("import "):
            echo(f"contradicts: the base imports: {problem}")
            contradicted += 1
    if out is not None:
        atomic_write(out, json.dumps(facts, indent=2, sort_keys=True) + "\n")
        echo(f"inspect: record written to {out}")
    return 1 if contradicted else 0
