"""The model cache on this host: where the services' Hugging Face cache lives, the manifest `bwstack fetch`
writes beside it, and the state `up`, the sweep and `doctor` read from it.

The services mount the cache at ``HF_HOME`` (launch.HF_HOME): a named volume (``stack.model_cache``, data
under Docker's volume folder) or, with ``stack.model_cache_path``, a host folder. The cache inside follows
the Hub's layout (``hub/models--ORG--NAME/{blobs,snapshots,refs}``); bwstack adds one manifest per repo and
requested revision under ``bwstack/`` (repo, revision, commit, files with size and hash, bytes, time),
written atomically once every file was verified. The manifest is the only "the model is complete" signal:
without it a cache folder is ``partial`` (an interrupted fetch) or ``missing``.

No huggingface_hub import here: ``up`` and ``doctor`` stay light.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bwstack.errors import ExternalError, UserError
from bwstack.host import cachevolume
from healthchecks import imagelayout

if TYPE_CHECKING:  # the helper container (cacheworker) imports this module without pydantic's stack schema
    from bwstack.stack.schema import Stack

MANIFEST_SCHEMA = "bwstack.model-cache/1"
MANIFEST_DIR = "bwstack"
#: compose variable the rendered services read into HF_HUB_OFFLINE (``up`` and the sweep set it to 1 once the
#: manifest says the model is complete, so SGLang never calls the Hub)
OFFLINE_VAR = "BWSTACK_HF_HUB_OFFLINE"
SKIP_HINT = (
    "--skip-model-check lets SGLang download it inside the container instead (during the start period)"
)

State = Literal["present", "partial", "missing", "unknown"]


@dataclass(frozen=True)
class Location:
    """The services' HF_HOME as a folder of this host, and where that came from (for messages). A named
    volume also carries its name and the stack's serving image: when this user cannot open ``root`` (Docker's
    volume folder is root's), the cache is read and written through a container of that image
    (:mod:`bwstack.host.cachevolume`)."""

    root: Path
    source: str
    volume: str | None = None
    image: str | None = None

    @property
    def hub(self) -> Path:
        return self.root / "hub"


@dataclass
class CacheStatus:
    """What the cache holds for one repo at one requested revision."""

    state: State
    repo: str
    revision: str | None
    location: Location | None
    commit: str | None = None
    files_total: int | None = None
    bytes_total: int | None = None
    bytes_on_disk: int = 0
    missing_files: list[str] = field(default_factory=list)
    fetched_at: str | None = None
    detail: str = ""

    def words(self) -> str:
        """One line for doctor and up."""
        where = f" in {self.location.root} ({self.location.source})" if self.location else ""
        rev = self.commit or self.revision or "main (unpinned)"
        if self.state == "present":
            return (
                f"{self.repo}@{rev[:12]}: {self.files_total} files, {human_bytes(self.bytes_total or 0)}, "
                f"verified {self.fetched_at}{where}"
            )
        if self.state == "partial":
            total = f" of {human_bytes(self.bytes_total)}" if self.bytes_total else ""
            return f"{self.repo}@{rev[:12]}: partial, {human_bytes(self.bytes_on_disk)}{total} on disk{where}"
        if self.state == "missing":
            return f"{self.repo}@{rev[:12]}: not fetched{where}"
        return f"{self.repo}: cannot tell: {self.detail}"


def human_bytes(num: float) -> str:
    """``371.2 GB`` (decimal units, like the Hub's file sizes)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(num) < 1000:
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1000
    return f"{num:.1f} TB"


def repo_folder(repo: str) -> str:
    """The Hub cache's folder name of a model repo: ``models--ORG--NAME``."""
    return "models--" + repo.replace("/", "--")


def manifest_path(location: Location, repo: str, revision: str | None) -> Path:
    return location.root / MANIFEST_DIR / repo_folder(repo) / f"{revision or 'main'}.json"


def snapshot_dir(location: Location, repo: str, commit: str) -> Path:
    return location.hub / repo_folder(repo) / "snapshots" / commit


def is_local_model(stack: Stack) -> bool:
    """model.path names a folder inside the container, not a Hub repo: nothing to fetch."""
    return stack.model.path.startswith("/") or stack.model.path in stack.tiny_models


# --- where the cache is ---------------------------------------------------------------------------------


def volume_name(stack: Stack) -> str:
    """The Docker volume Compose creates for ``stack.model_cache`` (``<project>_<volume>``)."""
    return f"{stack.settings.project}_{stack.settings.model_cache}"


def locate(stack: Stack, cache_dir: Path | None = None, *, create: bool = False) -> Location:
    """The cache folder of this host: ``--cache-dir``, else ``stack.model_cache_path``, else the named
    volume's data folder (created with Compose's labels when ``create``)."""
    if cache_dir is not None:
        return Location(cache_dir.expanduser().resolve(), "--cache-dir")
    if stack.settings.model_cache_path is not None:
        return Location((stack.root / stack.settings.model_cache_path).resolve(), "stack.model_cache_path")
    name = volume_name(stack)
    mountpoint = _volume_mountpoint(stack, create=create)
    image = imagelayout.image_ref(stack.settings.image_repo, stack.settings.variant)
    return Location(mountpoint, f"volume {name}", name, image)


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(
            f"cannot ask Docker for the model cache volume ({exc}); set stack.model_cache_path to a host "
            "folder or pass --cache-dir"
        ) from None


def _volume_mountpoint(stack: Stack, *, create: bool) -> Path:
    name = volume_name(stack)
    result = _docker("volume", "inspect", "--format", "{{.Mountpoint}}", name)
    if result.returncode != 0 and create:
        created = _docker(
            "volume",
            "create",
            "--label",
            f"com.docker.compose.project={stack.settings.project}",
            "--label",
            f"com.docker.compose.volume={stack.settings.model_cache}",
            name,
        )
        if created.returncode != 0:
            raise ExternalError(f"docker volume create {name} failed: {created.stderr.strip()[:200]}")
        result = _docker("volume", "inspect", "--format", "{{.Mountpoint}}", name)
    if result.returncode != 0:
        raise ExternalError(
            f"model cache volume {name} not found ({result.stderr.strip()[:160]}); "
            "run 'bwstack fetch' to create and fill it"
        )
    return Path(result.stdout.strip())


def check_writable(location: Location) -> None:
    """UserError naming the fix when this user cannot write the cache folder."""
    probe = location.root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(
            f"the model cache {location.root} ({location.source}) is not writable by this user; run "
            "'bwstack fetch' as a user who can write it (Docker's volume folder needs root), or set "
            "stack.model_cache_path to a host folder you own (or pass --cache-dir)"
        )


def hand_to_server(location: Location) -> bool:
    """Give a Docker volume's cache to the serving user (uid 10001): ``fetch`` fills it as root, and a
    root-owned HF_HOME breaks every write the server makes there (``.locks``, a download). A host folder
    (``stack.model_cache_path``, ``--cache-dir``) stays its owner's; ``doctor --image`` checks it is readable.
    True when ownership changed hands."""
    if not location.source.startswith("volume") or os.geteuid() != 0:
        return False
    for dirpath, dirnames, filenames in os.walk(location.root):
        os.chown(dirpath, imagelayout.UID, imagelayout.GID)
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), imagelayout.UID, imagelayout.GID, follow_symlinks=False)
    return True


def server_access_problem(location: Location) -> str | None:
    """Why the serving user (uid 10001) cannot use the cache folder, or None (fine, or cannot tell)."""
    try:
        info = location.root.stat()
    except OSError:
        return None
    uid = imagelayout.UID
    if location.source.startswith("volume") and info.st_uid != uid:
        return f"{location.root} is owned by uid {info.st_uid}, so the server (uid {uid}) cannot write it"
    if info.st_uid != uid and info.st_mode & 0o005 != 0o005:
        return f"{location.root} (mode {info.st_mode & 0o777:o}, uid {info.st_uid}) is closed to uid {uid}"
    return None


# --- the manifest ---------------------------------------------------------------------------------------


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest, or None when absent or not a bwstack manifest (a torn write cannot happen: atomic)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        return None
    return data


def status(location: Location, repo: str, revision: str | None) -> CacheStatus:
    """present (manifest + every file there with its size), partial, missing, or unknown (unreadable)."""
    base = CacheStatus(state="missing", repo=repo, revision=revision, location=location)
    if location.volume is not None and cachevolume.needs_container(location.root, write=False):
        return _status_through_container(base)
    try:
        if not location.root.exists():
            return base
        os.listdir(location.root)
    except PermissionError as exc:
        base.state, base.detail = "unknown", f"{location.root} is not readable by this user ({exc.strerror})"
        return base
    manifest = read_manifest(manifest_path(location, repo, revision))
    repo_dir = location.hub / repo_folder(repo)
    base.bytes_on_disk = _blob_bytes(repo_dir / "blobs")
    if manifest is None:
        base.state = "partial" if base.bytes_on_disk else "missing"
        return base
    base.commit = str(manifest.get("commit"))
    base.files_total = len(manifest.get("files", []))
    base.bytes_total = int(manifest.get("bytes", 0))
    base.fetched_at = str(manifest.get("fetched_at"))
    folder = snapshot_dir(location, repo, base.commit)
    for entry in manifest.get("files", []):
        path = folder / str(entry["path"])
        try:
            size = path.stat().st_size
        except OSError:
            size = -1
        if size != int(entry["size"]):
            base.missing_files.append(str(entry["path"]))
    base.state = "partial" if base.missing_files else "present"
    return base


def _status_through_container(base: CacheStatus) -> CacheStatus:
    """The status of a volume this user cannot open, as the serving user sees it in a helper container."""
    assert base.location is not None and base.location.volume is not None
    request = {"op": "status", "repo": base.repo, "revision": base.revision}
    try:
        image = cachevolume.helper_image(base.location.image)
        answer = cachevolume.run(base.location.volume, image, request, timeout=300)
    except (ExternalError, UserError) as exc:
        base.state, base.detail = "unknown", str(exc)
        return base
    fields = {k: v for k, v in answer.items() if k in CacheStatus.__dataclass_fields__ and k != "location"}
    return CacheStatus(**{**fields, "location": base.location})


def _blob_bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


# --- what up and the sweep do with it -------------------------------------------------------------------


def service_env(stack: Stack, *, skip: bool = False) -> dict[str, str]:
    """Compose variables for starting the services; refuses (ExternalError, exit 1) when the model is not
    fetched, so the healthcheck's start period never covers a download. ``skip``: no check, no variables."""
    if skip or is_local_model(stack):
        return {}
    try:
        location = locate(stack)
    except ExternalError as exc:
        raise ExternalError(
            f"model {stack.model.path} is not fetched: {exc}; run 'bwstack fetch' first "
            f"({_size_words(stack)}); {SKIP_HINT}"
        ) from None
    found = status(location, stack.model.path, stack.model.revision)
    if found.state == "present":
        return {OFFLINE_VAR: "1"}
    if found.state == "unknown":  # never a start that may download inside the start period unasked
        raise ExternalError(
            f"cannot tell whether model {stack.model.path} is fetched: {found.detail}; {SKIP_HINT}"
        )
    left = f", {len(found.missing_files)} file(s) missing" if found.missing_files else ""
    raise ExternalError(
        f"model {found.words()}{left}: run 'bwstack fetch' first ({_size_words(stack)}, resumable); "
        + SKIP_HINT
    )


def _size_words(stack: Stack) -> str:
    return f"about {stack.model.size_gb} GB" if stack.model.size_gb else "the whole checkpoint"
