"""``bwstack fetch``: the stack's model into the services' cache at its pinned revision, before any start.

Steps: read the repo's file list with sizes and hashes at the revision (the Hub's model-info API with blob
metadata); keep only what SGLang loads (safetensors + index, configs, tokenizer, generation config, remote
code; never a second weight format or ``original/``); refuse when the free disk cannot hold what is still
missing; download with ``huggingface_hub.snapshot_download`` into ``<cache>/hub`` (resumable: an interrupted
file continues from its ``.incomplete`` part) while a progress display reads the blob sizes on disk; verify
every file against the Hub's metadata (size, LFS sha256, git blob sha1 for small files); write the manifest
(:mod:`bwstack.host.modelcache`) atomically.

The HF token comes from ``<secrets_dir>/hf_token`` (the file the services get as a compose secret) and is
never printed: messages name the file, not its content.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bwstack import __version__
from bwstack.errors import AbandonedWork, ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.host import cachevolume, modelcache, netwait
from bwstack.host.modelcache import Location, human_bytes
from bwstack.record import utc_now
from healthchecks import common, imagelayout

if TYPE_CHECKING:  # the helper container imports this module without pydantic's stack schema
    from bwstack.stack.schema import Stack

#: file names SGLang (transformers' config/tokenizer loaders) reads besides the weights
NEEDED_NAMES = frozenset(
    {
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "chat_template.jinja",
        "chat_template.json",
    }
)
#: suffixes of files SGLang needs: configs (config.json, generation_config.json, hf_quant_config.json, ...),
#: safetensors indexes, remote code (trust_remote_code), tiktoken vocabularies
NEEDED_SUFFIXES = ("config.json", ".safetensors.index.json", ".py", ".tiktoken", ".jinja")
#: weight formats used only when a repo has no safetensors
FALLBACK_WEIGHTS = (".bin", ".bin.index.json")
SKIPPED_DIRS = frozenset({"original"})
DISK_MARGIN = 1.02  # 2 % for the Hub's lock files, refs and the filesystem's own rounding
POLL_SECONDS = 0.5
PLAIN_EVERY_SECONDS = 10.0
#: a download that grows by less than STALL_MIN_BYTES in this many seconds is stalled (a server that trickles
#: bytes keeps every read under huggingface_hub's per-read timeout, so only progress can bound it)
STALL_ENV = "BWSTACK_FETCH_STALL_S"
DEFAULT_STALL_S = 300.0
STALL_MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class Target:
    """What one fetch fills: the repo, the revision asked for, the commit it is, the token (or None)."""

    repo: str
    revision: str | None
    commit: str
    token: str | None = dataclasses.field(default=None, repr=False)


@dataclass(frozen=True)
class HubFile:
    """One file of the repo at the revision, as the Hub lists it."""

    path: str
    size: int
    sha256: str | None  # LFS files
    blob_id: str | None  # git blob sha1 (every file)

    @property
    def blob_name(self) -> str:
        """The blob file name in the Hub cache (the ETag: the LFS sha256, else the git blob id)."""
        return self.sha256 or self.blob_id or ""


def is_weights(f: HubFile) -> bool:
    return f.path.endswith((".safetensors", ".bin"))


def select_files(files: Iterable[HubFile]) -> list[HubFile]:
    """What SGLang needs from a repo: one weight format (safetensors when present) plus configs/tokenizer."""
    candidates = [f for f in files if not (set(f.path.split("/")[:-1]) & SKIPPED_DIRS)]
    has_safetensors = any(f.path.endswith(".safetensors") for f in candidates)
    chosen = []
    for f in candidates:
        name = f.path.rsplit("/", 1)[-1]
        weights = f.path.endswith(".safetensors") or (
            not has_safetensors and f.path.endswith(FALLBACK_WEIGHTS)
        )
        if weights or name in NEEDED_NAMES or name.endswith(NEEDED_SUFFIXES):
            chosen.append(f)
    return sorted(chosen, key=lambda f: f.path)


def read_token(stack: Stack) -> str | None:
    """The token in ``<secrets_dir>/hf_token`` (None when absent or empty: anonymous, or HF_TOKEN)."""
    if not stack.settings.hf_token:
        return None
    path = (stack.root / stack.settings.secrets_dir / "hf_token").resolve()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the HF token file: {exc.__class__.__name__}", file=path) from None
    return token or None


def free_bytes(folder: Path) -> int:
    """Free bytes on the filesystem holding ``folder`` (its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def endpoint() -> str:
    """The Hub endpoint: ``HF_ENDPOINT`` as set now (the client reads it only at import)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


# --- the Hub's answers, in one line each ---------------------------------------------------------------


def hub_error(exc: Exception, stack: Stack, revision: str) -> Exception:
    """A UserError (exit 2: fix the input) or ExternalError (exit 1) for an error of the Hub client."""
    from huggingface_hub import errors

    repo = stack.model.path
    token_file = f"{stack.settings.secrets_dir}/hf_token"
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    message = ""
    if response is not None:
        message = response.headers.get("X-Error-Message", "")
    if isinstance(exc, errors.GatedRepoError):
        return UserError(
            f"{repo} is a gated repo (HTTP {code}): accept its terms at {endpoint()}/{repo} while logged in, "
            f"then put a read token of that account in {token_file}",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    if code == 401 and "Invalid credentials" in message:
        return UserError(
            f"the Hub refused the token in {token_file} (HTTP 401, invalid credentials): put a valid read "
            f"token there ({endpoint()}/settings/tokens)",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return UserError(
            f"revision {revision} not found in {repo} (HTTP {code}): set model.revision to a commit of "
            "the repo",
            file=stack.path,
            line=stack.line_of("model", "revision") or stack.line_of("model", "path"),
            field="model.revision",
        )
    if isinstance(exc, errors.RepositoryNotFoundError) or code in {401, 403}:
        return UserError(
            f"{repo} not found or not accessible (HTTP {code}): check model.path; for a private or gated "
            f"repo put a read token in {token_file}",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    text = " ".join(str(exc).split())[:200]
    return ExternalError(f"the Hub at {endpoint()} failed: {exc.__class__.__name__}: {text}")


def list_files(stack: Stack, revision: str, token: str | None) -> tuple[str, list[HubFile]]:
    """(commit, every file with size and hashes) of the repo at ``revision``, from the model-info API."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=endpoint(), token=token if token else False, library_name="bwstack")
    try:  # 60 s per read, 120 s in all: a Hub (or a proxy) that trickles its answer cannot stretch it
        info = netwait.within(
            120, lambda: api.model_info(stack.model.path, revision=revision, files_metadata=True, timeout=60)
        )
    except netwait.TooSlow:
        raise ExternalError(f"the Hub at {endpoint()} did not answer the model info within 120 s") from None
    except HfHubHTTPError as exc:
        raise hub_error(exc, stack, revision) from None
    except OSError as exc:  # connection refused, DNS, TLS: httpx errors are OSErrors or wrap them
        raise ExternalError(f"cannot reach the Hub at {endpoint()}: {exc}") from None
    except Exception as exc:
        if exc.__class__.__module__.startswith("httpx"):
            raise ExternalError(f"cannot reach the Hub at {endpoint()}: {exc}") from None
        raise
    if not info.sha:
        raise ExternalError(f"the Hub at {endpoint()} did not say which commit {revision} is")
    files = [
        HubFile(
            path=s.rfilename,
            size=int(s.lfs.size if s.lfs else (s.size or 0)),
            sha256=s.lfs.sha256 if s.lfs else None,
            blob_id=s.blob_id,
        )
        for s in info.siblings or []
    ]
    return info.sha, files


# --- progress -------------------------------------------------------------------------------------------


class Progress:
    """Bytes, rate, ETA and shards, read from the blob files on disk (``.incomplete`` parts included)."""

    def __init__(self, blobs: Path, files: Sequence[HubFile], echo: Callable[[str], None], live: bool):
        self.blobs = blobs
        self.files = files
        self.total = sum(f.size for f in files)
        self.echo = echo
        self.live = live
        self.start_bytes, _ = self.measure()
        self.started = time.monotonic()
        self.last_plain = self.started

    def measure(self) -> tuple[int, int]:
        """(bytes on disk for the chosen files, files complete)."""
        done_bytes, done = self._measure()
        return done_bytes, len(done)

    def _measure(self) -> tuple[int, list[HubFile]]:
        done_bytes = 0
        done: list[HubFile] = []
        for f in self.files:
            blob = self.blobs / f.blob_name
            try:
                size = blob.stat().st_size
                done.append(f)
            except OSError:
                size = max((_size(p) for p in partials(self.blobs, f)), default=0)
            done_bytes += min(size, f.size)
        return done_bytes, done

    def line(self) -> str:
        done, finished = self._measure()
        shards = sum(1 for f in finished if is_weights(f))
        total_shards = sum(1 for f in self.files if is_weights(f))
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = max(done - self.start_bytes, 0) / elapsed
        left = self.total - done
        eta = _duration(left / rate) if rate > 0 else "--"
        pct = 100.0 * done / self.total if self.total else 100.0
        return (
            f"fetch: {human_bytes(done)} / {human_bytes(self.total)} ({pct:.1f}%), "
            f"{human_bytes(rate)}/s, ETA {eta}, shards {shards}/{total_shards}, "
            f"files {len(finished)}/{len(self.files)}"
        )

    def tick(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.live:
            sys.stderr.write("\r\x1b[2K" + self.line())
            if final:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif final or now - self.last_plain >= PLAIN_EVERY_SECONDS:
            self.last_plain = now
            self.echo(self.line())


def partials(blobs: Path, f: HubFile) -> list[Path]:
    """The partial downloads of one file: ``<etag>.incomplete`` and the client's per-process
    ``<etag>.<id>.incomplete`` (huggingface_hub >= 1.x), largest first."""
    try:
        found = [p for p in blobs.glob(glob.escape(f.blob_name) + "*.incomplete") if p.is_file()]
    except OSError:
        return []
    return sorted(found, key=_size, reverse=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


# --- verification ---------------------------------------------------------------------------------------


def git_blob_sha1(path: Path, size: int) -> str:
    digest = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    _feed(digest, path)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    _feed(digest, path)
    return digest.hexdigest()


def _feed(digest: Any, path: Path) -> None:
    with path.open("rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)


def verify(folder: Path, files: Sequence[HubFile]) -> list[tuple[HubFile, str]]:
    """Every file against the Hub's size and hash; the (file, problem) pairs that do not match."""
    bad = []
    for f in files:
        path = folder / f.path
        try:
            size = path.stat().st_size
        except OSError:
            bad.append((f, "missing"))
            continue
        if size != f.size:
            bad.append((f, f"size {size} B, the Hub says {f.size} B"))
            continue
        if f.sha256:
            got = sha256_of(path)
            if got != f.sha256:
                bad.append((f, f"sha256 {got[:16]}…, the Hub says {f.sha256[:16]}…"))
        elif f.blob_id:
            got = git_blob_sha1(path, size)
            if got != f.blob_id:
                bad.append((f, f"git blob sha1 {got[:16]}…, the Hub says {f.blob_id[:16]}…"))
    return bad


def discard(folder: Path, f: HubFile) -> None:
    """Remove a bad file's snapshot link and blob, so the next fetch downloads it again."""
    link = folder / f.path
    target = link.resolve() if link.is_symlink() else None
    link.unlink(missing_ok=True)
    if target is not None:
        target.unlink(missing_ok=True)


# --- the command ----------------------------------------------------------------------------------------


def fetch(
    stack: Stack,
    *,
    cache_dir: Path | None = None,
    max_workers: int = 8,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] | None = None,
) -> int:
    """Download, verify and record the stack's model; 0 when the cache holds it complete."""
    warn = warn or (lambda text: print(f"bwstack: warning: {text}", file=sys.stderr))
    if modelcache.is_local_model(stack):
        raise UserError(
            f"model.path {stack.model.path} is a folder inside the container, not a Hub repo: "
            "nothing to fetch",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    repo = stack.model.path
    revision = stack.model.revision
    if revision is None:
        warn(
            f"model.revision is not set: fetching the current head of {repo}'s main branch; pin it with "
            "model.revision (the commit is printed below)"
        )
    location = modelcache.locate(stack, cache_dir, create=True)
    through_container = location.volume is not None and cachevolume.needs_container(location.root, write=True)
    if not through_container:
        modelcache.check_writable(location)
    token = read_token(stack)
    commit, listed = list_files(stack, revision or "main", token)
    files = select_files(listed)
    if not any(is_weights(f) for f in files):
        raise UserError(
            f"{repo}@{commit[:12]} has no safetensors (or .bin) weights SGLang can load",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    total = sum(f.size for f in files)
    skipped = len(listed) - len(files)
    echo(
        f"fetch: {repo}@{commit} into {location.root} ({location.source}): {len(files)} files, "
        f"{human_bytes(total)}" + (f" ({skipped} files SGLang does not need skipped)" if skipped else "")
    )
    target = Target(repo, revision, commit, token)
    if through_container:
        echo(
            f"fetch: {location.root} is open to root only: writing it through a short-lived container as "
            f"the serving user (uid {imagelayout.UID})"
        )
        image = cachevolume.helper_image(location.image)
        request = {"op": "fill", **dataclasses.asdict(target), "max_workers": max_workers}
        request["files"] = [dataclasses.asdict(f) for f in files]
        answer = cachevolume.run(location.volume or "", image, request, echo=echo)
        manifest = location.root / str(answer["manifest"])
    else:
        manifest = fill(
            location,
            target,
            files,
            max_workers=max_workers,
            echo=echo,
            live=sys.stderr.isatty(),
            refused=lambda exc: hub_error(exc, stack, commit),
        )
        if modelcache.hand_to_server(location):
            echo(f"fetch: {location.root} now belongs to the serving user (uid {imagelayout.UID})")
    echo(
        f"fetch: {repo}@{commit} complete and verified: {len(files)} files, {human_bytes(total)}; manifest "
        f"{manifest}; 'bwstack up' now starts the services with HF_HUB_OFFLINE=1"
    )
    if revision is None:
        echo(f"fetch: pin it: set model.revision: {commit} in {stack.path.name}")
    return 0


def fill(
    location: Location,
    target: Target,
    files: Sequence[HubFile],
    *,
    max_workers: int,
    echo: Callable[[str], None],
    live: bool,
    refused: Callable[[Exception], Exception] | None = None,
) -> Path:
    """Download, verify and record ``files`` into ``location`` (a folder this process can write); the
    manifest's path. ``refused``: the error for the Hub's own 401/403 during the download."""
    repo, commit = target.repo, target.commit
    total = sum(f.size for f in files)
    repo_dir = location.hub / modelcache.repo_folder(repo)
    progress = Progress(repo_dir / "blobs", files, echo, live=live)
    need = int((total - progress.start_bytes) * DISK_MARGIN)
    location.root.mkdir(parents=True, exist_ok=True)
    free = free_bytes(location.root)
    if need > free:
        raise ExternalError(
            f"not enough disk for {repo}: {human_bytes(need)} still to download, {human_bytes(free)} free "
            f"on the filesystem of {location.root}; free space or point stack.model_cache_path (or "
            "--cache-dir) at a larger disk"
        )
    if progress.start_bytes:
        echo(f"fetch: resuming: {human_bytes(progress.start_bytes)} already on disk")
    _download(target, files, location, max_workers, progress, refused)
    folder = modelcache.snapshot_dir(location, repo, commit)
    echo(f"fetch: verifying {len(files)} files against the Hub's sizes and hashes")
    bad = verify(folder, files)
    if bad:
        for f, _ in bad:
            discard(folder, f)
        first, problem = bad[0]
        raise ExternalError(
            f"verification failed for {len(bad)} file(s) of {repo}@{commit[:12]}: {first.path}: {problem}; "
            "removed the bad file(s): run 'bwstack fetch' again to download them again"
        )
    return write_manifest(location, target, files)


def _download(  # noqa: PLR0917 - one call site
    target: Target,
    files: Sequence[HubFile],
    location: Location,
    max_workers: int,
    progress: Progress,
    refused: Callable[[Exception], Exception] | None,
) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils.tqdm import disable_progress_bars

    disable_progress_bars()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            resume_partials(target, files, location)
            snapshot_download(
                target.repo,
                revision=target.commit,
                cache_dir=str(location.hub),
                allow_patterns=[f.path for f in files],
                token=target.token if target.token else False,
                max_workers=max_workers,
                endpoint=endpoint(),
                library_name="bwstack",
            )
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, name="bwstack-fetch", daemon=True)
    worker.start()
    watch = StallWatch(progress, common.parse_seconds(os.environ.get(STALL_ENV, ""), DEFAULT_STALL_S))
    try:
        while worker.is_alive():
            worker.join(POLL_SECONDS)
            progress.tick()
            if watch.stalled():
                progress.tick(final=True)
                raise AbandonedWork(_left_words(progress, watch.words()))
    except KeyboardInterrupt:
        progress.tick(final=True)
        raise AbandonedWork(_left_words(progress, "interrupted")) from None
    progress.tick(final=True)
    if failure:
        exc = failure[0]
        response = exc.response if isinstance(exc, HfHubHTTPError) else None
        if (
            isinstance(exc, HfHubHTTPError)
            and response is not None
            and response.status_code in {401, 403}
            and _origin(str(response.url)) == _origin(endpoint())
        ):  # the Hub itself refused (token, gate); a CDN's 403 (expired URL) is a failed download
            if refused is not None:
                raise refused(exc) from None
            raise ExternalError(
                f"the Hub at {endpoint()} refused the download of {target.repo} "
                f"(HTTP {response.status_code}): check the token in the stack's secrets folder (hf_token) "
                "and the repo's access"
            ) from None
        text = " ".join(f"{exc.__class__.__name__}: {exc}".split())[:240]
        raise ExternalError(_left_words(progress, f"download failed ({text})")) from None


class StallWatch:
    """Progress bounds a download: less than ``STALL_MIN_BYTES`` more on disk in ``seconds`` is a stall."""

    def __init__(self, progress: Progress, seconds: float) -> None:
        self.progress = progress
        self.seconds = seconds
        self.mark_bytes, _ = progress.measure()
        self.mark_time = time.monotonic()

    def stalled(self) -> bool:
        done, _ = self.progress.measure()
        now = time.monotonic()
        if done - self.mark_bytes >= STALL_MIN_BYTES:
            self.mark_bytes, self.mark_time = done, now
            return False
        return now - self.mark_time >= self.seconds

    def words(self) -> str:
        return (
            f"download stalled (less than {human_bytes(STALL_MIN_BYTES)} in the last {self.seconds:g} s: a "
            f"server that trickles or a dead connection; {STALL_ENV} sets the bound)"
        )


def resume_partials(target: Target, files: Sequence[HubFile], location: Location) -> None:
    """Finish the files an interrupted fetch left half-written, from where they stopped (ranged GETs).

    huggingface_hub writes each file to a per-process ``<etag>.<id>.incomplete`` and, after a crash, starts
    that file again from zero; for 5 GB shards that is worth avoiding. The largest partial of each missing
    blob is continued with the client's own ``http_get(resume_size=…)`` from the URL the Hub resolves the
    file to (the token is sent only to the Hub itself, never to a CDN), then moved into place, where
    ``snapshot_download`` finds it and only links it. The verification after the download catches a bad
    splice."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get

    blobs = location.hub / modelcache.repo_folder(target.repo) / "blobs"
    token = target.token
    for f in files:
        if (blobs / f.blob_name).exists():
            continue
        found = partials(blobs, f)
        for extra in found[1:]:
            extra.unlink(missing_ok=True)
        if not found:
            continue
        part = blobs / (f.blob_name + ".incomplete")
        os.replace(found[0], part)
        size = _size(part)
        if size == 0 or size > f.size:
            part.unlink(missing_ok=True)
            continue
        url = hf_hub_url(target.repo, f.path, revision=target.commit, endpoint=endpoint())
        meta = get_hf_file_metadata(url, token=token if token else False, endpoint=endpoint())
        headers = {"user-agent": "bwstack"}
        if token and _origin(meta.location) == _origin(endpoint()):
            headers["authorization"] = f"Bearer {token}"
        with part.open("r+b") as handle:
            handle.seek(0, os.SEEK_END)
            http_get(meta.location, handle, resume_size=size, headers=headers, expected_size=f.size)
        os.replace(part, blobs / f.blob_name)


def _origin(url: str) -> tuple[str, str, int | None]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _left_words(progress: Progress, what: str) -> str:
    done, shards = progress.measure()
    return (
        f"{what}: {human_bytes(done)} of {human_bytes(progress.total)} on disk, "
        f"{human_bytes(progress.total - done)} in {len(progress.files) - shards} file(s) left; run "
        "'bwstack fetch' again to resume (finished files and partial ones are kept)"
    )


def write_manifest(location: Location, target: Target, files: Sequence[HubFile]) -> Path:
    """The manifest beside the cache (atomic): what is there, verified, at which commit."""
    import json

    data = {
        "schema": modelcache.MANIFEST_SCHEMA,
        "repo": target.repo,
        "revision": target.revision,
        "commit": target.commit,
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256, "blob_id": f.blob_id} for f in files],
        "bytes": sum(f.size for f in files),
        "fetched_at": utc_now(),
        "generated_by": f"bwstack {__version__}",
    }
    path = modelcache.manifest_path(location, target.repo, target.revision)
    atomic_write(path, json.dumps(data, indent=2) + "\n")
    return path
