"""``bwstack report bundle REPORT``: one secret-free file an operator attaches to an issue.

It packs a sweep report folder with what a reader needs to trust it (format:
:mod:`bwstack.sweep.bundleread`): the
results (every row's evidence: log excerpts, health log, requested and effective backends), the Markdown
matrix, the host facts doctor reads (:mod:`bwstack.host.doctor.record`), each image's real digest and labels
(``docker image inspect``), the profiles file and the compose files as run, bwstack's version and commit, and
a manifest of sha256 per part. Every part passes through one :class:`bwstack.sweep.redact.Redactor` (secret
values from ``secrets/`` and the environment, secret patterns; with ``--redact-host`` host names, addresses
and user names), and the bytes written are checked again for every secret before the file is replaced
atomically.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack import __version__, launch, record
from bwstack.build.standin_image import STANDIN_REPO
from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write_bytes, read_bounded, refuse_overwrite
from bwstack.host.doctor.probe import HostProbe
from bwstack.host.doctor.record import host_facts
from bwstack.host.gitinfo import git
from bwstack.record import read
from bwstack.stack.schema import Stack
from bwstack.sweep import redact, report
from bwstack.sweep.bundleread import (
    FORMAT,
    FORMAT_VERSION,
    HOST,
    IMAGES,
    MANIFEST,
    MARKDOWN,
    MAX_MEMBER_BYTES,
    RESULTS,
    SUFFIX,
)

#: compose files a sweep writes into its report folder (the services exactly as they ran)
RUN_FILES = ("compose.sweep.yaml", "compose.nogpu.yaml", "compose.fast.yaml", "compose.host.yaml")
#: host facts dropped whole by --redact-host
HOST_FIELDS = ("hostname", "kernel_cmdline")
DOCKER_TIMEOUT_S = 30


def default_output(report_dir: Path) -> Path:
    """``<report folder>.bundle.tar.gz`` beside the report folder."""
    return report_dir.parent / (report_dir.resolve().name + SUFFIX)


def source_commit() -> dict[str, Any]:
    """bwstack's version and, from a git checkout, its commit and whether the tree had changes."""
    out: dict[str, Any] = {"version": __version__, "commit": None, "dirty": None}
    # the checkout this package runs from (src/bwstack/sweep/bundle.py): none when installed from a wheel
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists() or not (root / "src" / "bwstack" / "sweep").is_dir():
        return out
    out["commit"] = git(root, "rev-parse", "HEAD")
    status = git(root, "status", "--porcelain", "--untracked-files=no")
    out["dirty"] = None if out["commit"] is None or status is None else bool(status)
    return out


def image_ref(stack: Stack, doc: report.Document, variant: str) -> str:
    """The image a report's rows of ``variant`` ran: the stand-in's own for a stand-in sweep."""

    if doc["mode"].get("standin"):
        return f"{STANDIN_REPO}:{variant}"
    return launch.image_ref(stack, variant)


def inspect_image(ref: str) -> dict[str, Any]:
    """``docker image inspect``: the image ID (its digest), repo digests, creation time, labels."""
    try:
        done = subprocess.run(
            ["docker", "image", "inspect", ref],
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        return {"ref": ref, "present": False, "problem": "docker CLI not found"}
    except subprocess.TimeoutExpired:
        return {
            "ref": ref,
            "present": False,
            "problem": f"docker image inspect timed out ({DOCKER_TIMEOUT_S} s)",
        }
    if done.returncode != 0:
        return {"ref": ref, "present": False, "problem": " ".join(done.stderr.split())[:300]}
    try:
        data = json.loads(done.stdout)[0]
    except (json.JSONDecodeError, IndexError, KeyError, TypeError):
        return {"ref": ref, "present": False, "problem": "docker image inspect printed no image"}
    config = data.get("Config") or {}
    return {
        "ref": ref,
        "present": True,
        "id": data.get("Id"),
        "repo_digests": data.get("RepoDigests") or [],
        "created": data.get("Created"),
        "architecture": data.get("Architecture"),
        "labels": config.get("Labels") or {},
    }


def ran_images(doc: report.Document, variant: str, ref: str) -> dict[str, Any]:
    """The image now tagged ``ref`` (digest, labels) and the image IDs the report's rows of ``variant`` ran
    (``evidence.image_id``); ``current`` says whether the tag still names what ran (labels trustworthy)."""
    found = inspect_image(ref)
    ran = sorted(
        {
            str((row.get("evidence") or {}).get("image_id"))
            for row in doc["results"].values()
            if row.get("variant") == variant and (row.get("evidence") or {}).get("image_id")
        }
    )
    found["ran"] = ran
    found["current"] = None if not ran else ran == [found.get("id")]
    return found


def _member_name(prefix: str, name: str) -> str:
    return f"{prefix}/{re.sub(r'[^a-z0-9._-]', '_', name.lower()).lstrip('._-') or 'file'}"


def _tar(parts: list[tuple[str, bytes]]) -> bytes:
    """A reproducible tar.gz: fixed order, no owner, time zero, mode 0644, regular files only."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in parts:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def report_stack(report_dir: Path, stack: Stack, load: Callable[[Path], Stack]) -> tuple[Stack, str | None]:
    """The stack a report was made from: ``stack`` when the report names its profiles file (or none), else the
    file the report names when it lies beside ``stack``'s (loaded with ``load``), with a line saying so;
    UserError when the report is missing or names a file that is not there."""
    results = report_dir / record.RESULTS_FILE
    if not results.is_file():
        raise UserError(f"no sweep report here ({record.RESULTS_FILE} missing)", file=report_dir)
    named = read.load(results)["stack"].get("file")
    if named in (None, stack.path.name):
        return stack, None
    beside = stack.path.parent / str(named)
    if Path(str(named)).name == named and beside.is_file():
        return load(beside), f"this report was made from {named}: bundling it with {beside}, not {stack.path}"
    raise UserError(
        f"this report was made from {named}, not {stack.path.name}, and no {named} lies beside "
        f"{stack.path.name}; pass -f PATH/{named}",
        file=results,
        field="stack.file",
    )


def build(
    report_dir: Path, stack: Stack, *, probe: HostProbe, redact_host: bool = False
) -> tuple[bytes, dict[str, Any], redact.Redactor]:
    """The bundle's bytes, its manifest and the redactor used (for its counts)."""
    if not (report_dir / record.RESULTS_FILE).is_file():
        raise UserError(f"no sweep report here ({record.RESULTS_FILE} missing)", file=report_dir)
    doc = read.load(report_dir / record.RESULTS_FILE)
    if doc["stack"].get("file") not in (None, stack.path.name):
        raise UserError(
            f"this report was made from {doc['stack']['file']}, not {stack.path.name}; pass "
            f"-f {doc['stack']['file']}",
            file=report_dir / record.RESULTS_FILE,
            field="stack.file",
        )
    facts = host_facts(probe)
    hosts, users = redact.host_identity([str(facts.get("hostname") or "")]) if redact_host else ([], [])
    redactor = redact.Redactor(
        values=redact.secret_values(stack.root / stack.settings.secrets_dir),
        host=redact_host,
        host_names=hosts,
        user_names=users,
        paths=sorted(local_paths(stack), key=lambda pair: -len(pair[0])),
    )
    if redact_host:
        facts = {k: (None if k in HOST_FIELDS else v) for k, v in facts.items()}
    clean = redactor.data(doc)
    images = {v: ran_images(doc, v, image_ref(stack, doc, v)) for v in sorted(doc["variants"])}
    parts: list[tuple[str, bytes]] = [
        (RESULTS, _json_bytes(clean)),
        (MARKDOWN, report.render_markdown(clean).encode()),
        (HOST, _json_bytes(redactor.data(facts))),
        (IMAGES, _json_bytes(redactor.data(images))),
        (_member_name("profiles", stack.path.name), redactor.text(_read(stack.path)).encode()),
    ]
    for name in RUN_FILES:
        if (report_dir / name).is_file():
            parts.append((_member_name("run", name), redactor.text(_read(report_dir / name)).encode()))
    for name, data in parts:
        leaks = redactor.leaks(data)
        if leaks:  # the redactor's own guarantee failed: write nothing
            raise ExternalError(f"refusing to write the bundle: {leaks[0]} survived redaction in {name}")
        if len(data) > MAX_MEMBER_BYTES:
            raise UserError(
                f"{name} is over {MAX_MEMBER_BYTES} bytes; a bundle part cannot be", file=report_dir
            )
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": record.utc_now(),
        "bwstack": source_commit(),
        "report": {
            "name": redactor.text(report_dir.resolve().name),
            "started_at": doc["started_at"],
            "updated_at": doc["updated_at"],
            "source": clean["mode"].get("source"),
            "profiles": len(doc["results"]),
        },
        "host_redacted": redact_host,
        "redactions": dict(sorted(redactor.counts.items())),
        "parts": [{"name": n, "sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)} for n, d in parts],
    }
    blob = _tar([(MANIFEST, _json_bytes(manifest)), *parts])
    return blob, manifest, redactor


def write(report_dir: Path, stack: Stack, out: Path | None, *, probe: HostProbe, redact_host: bool) -> Path:
    """Build the bundle and replace ``out`` (default :func:`default_output`) atomically; its path."""
    target = out or default_output(report_dir)
    reads = [report_dir, stack.path, *(report_dir / n for n in (record.RESULTS_FILE, *RUN_FILES))]
    refuse_overwrite(target, [*reads, report_dir / record.MARKDOWN_FILE, report_dir / record.HTML_FILE], "-o")
    blob, _, _ = build(report_dir, stack, probe=probe, redact_host=redact_host)
    atomic_write_bytes(target, blob)
    return target


def local_paths(stack: Stack) -> list[tuple[str, str]]:
    """The stack's folder on this machine (compose bind mounts, a relative model cache) and its stand-in."""
    pairs = [(str(stack.root.resolve()), "<stack>"), (str(stack.root.absolute()), "<stack>")]
    return list(dict.fromkeys(pairs))


def _read(path: Path) -> str:
    """A file to bundle, read within the part limit (a symlink to a huge file is refused unread)."""
    try:
        return read_bounded(path, MAX_MEMBER_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", file=path) from None


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=False) + "\n").encode()
