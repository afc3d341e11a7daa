"""A small Hugging Face Hub on 127.0.0.1 for the fetch tests (stdlib ``http.server`` in threads).

It answers the routes the real ``huggingface_hub`` client calls for ``model_info(files_metadata=True)`` and
``snapshot_download`` at a revision (read in huggingface_hub 2.4: ``hf_api.py``, ``file_download.py``,
``_snapshot_download.py``, ``utils/_http.py``):

- ``GET /api/models/{repo}/revision/{rev}[?blobs=true]``: the model info with ``sha`` and ``siblings`` (with
  ``size``, ``blobId`` and ``lfs {size, sha256, pointerSize}`` when ``blobs`` is asked);
- ``GET /api/models/{repo}/tree/{rev}?recursive=…``: the tree listing (``type``, ``path``, ``size``, ``oid``,
  ``lfs {oid, size, pointerSize}``);
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: small files answered here with ``ETag`` (the git blob id),
  ``X-Repo-Commit`` and ``Content-Length``; LFS files redirected (302) to a second server on another port (a
  CDN: another origin, so the client stops there, reads ``X-Linked-Etag`` / ``X-Linked-Size`` from the
  redirect and sends no token to it), which serves the bytes with ``Range`` support (206 +
  ``Content-Range``), optionally throttled.

Errors carry the Hub's ``X-Error-Code`` / ``X-Error-Message`` headers, which the client turns into its typed
errors: ``RevisionNotFound`` (404), ``GatedRepo`` (401 without a token, 403 with one that was not granted),
``RepoNotFound`` (404), ``EntryNotFound`` (404), and a 401 ``Invalid credentials in Authorization header`` for a
token the hub does not know.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CHUNK = 16 * 1024
#: the repo and the granted token the host tests' hub serves (tests/host/conftest.py)
TEST_REPO = "bwtest/tiny-glm"
TEST_TOKEN = "hf_bwstackTestToken0123456789"


@dataclass
class File:
    """One file of the served repo."""

    path: str
    data: bytes
    lfs: bool

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_oid(self) -> str:
        return hashlib.sha1(b"blob %d\0" % self.size + self.data).hexdigest()

    @property
    def pointer_oid(self) -> str:
        """The git blob id of the LFS pointer the repo stores for an LFS file (the Hub's ``oid``/``blobId``)."""
        if not self.lfs:
            return self.git_oid
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n"
        return hashlib.sha1(b"blob %d\0" % len(pointer) + pointer.encode()).hexdigest()

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.git_oid


@dataclass
class Repo:
    """A model repo at one commit."""

    repo_id: str
    commit: str
    files: dict[str, File]
    gated: bool = False


@dataclass
class Hub:
    """The served repos and the knobs the tests turn; ``log`` records every request."""

    repos: dict[str, Repo]
    tokens: set[str] = field(default_factory=set)  # tokens the hub knows
    granted: set[str] = field(default_factory=set)  # tokens allowed into gated repos
    throttle_bps: int | None = None  # CDN bytes per second per connection
    corrupt: set[str] = field(default_factory=set)  # paths served with one byte flipped
    broken: set[str] = field(default_factory=set)  # paths the CDN answers with 403 (an expired signed URL)
    log: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    cdn_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, **entry: Any) -> None:
        with self.lock:
            self.log.append(entry)

    def requests(self, server: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.log if server is None or e["server"] == server]


def safetensors_bytes(tensors: dict[str, tuple[str, list[int], bytes]]) -> bytes:
    """A real safetensors file: 8-byte little-endian header length, JSON header, raw tensor data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    body = b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        body += data
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


def tiny_model(repo_id: str, *, shards: int = 3, shard_bytes: int = 1 << 20, seed: int = 16) -> Repo:
    """A small GLM-like checkpoint: safetensors shards + index, configs, tokenizer, and what fetch must skip
    (a .bin copy, ``original/``, a gguf, README, .gitattributes)."""
    rng = random.Random(seed)
    files: dict[str, File] = {}
    weight_map = {}
    for index in range(1, shards + 1):
        name = f"model-{index:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{index - 1}.mlp.weight"
        data = rng.randbytes(shard_bytes)
        files[name] = File(name, safetensors_bytes({tensor: ("U8", [shard_bytes], data)}), lfs=True)
        weight_map[tensor] = name
    index_json = {"metadata": {"total_size": shards * shard_bytes}, "weight_map": weight_map}
    small = {
        "model.safetensors.index.json": json.dumps(index_json, indent=2),
        "config.json": json.dumps({"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa"}),
        "generation_config.json": json.dumps({"eos_token_id": [1], "temperature": 1.0}),
        "hf_quant_config.json": json.dumps({"quantization": {"quant_algo": "NVFP4"}}),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}),
        "tokenizer_config.json": json.dumps({"model_max_length": 32768}),
        "chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}",
        "README.md": "# tiny model for bwstack's fetch tests\n",
        ".gitattributes": "*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    }
    for name, text in small.items():
        files[name] = File(name, text.encode(), lfs=False)
    for name in ("pytorch_model.bin", "original/consolidated.00.pth", "model-q4.gguf"):
        files[name] = File(name, rng.randbytes(64 * 1024), lfs=True)
    commit = hashlib.sha1(repr(sorted((f.path, f.etag) for f in files.values())).encode()).hexdigest()
    return Repo(repo_id=repo_id, commit=commit, files=files)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: Hub
    server_name_: str

    def log_message(self, format: str, *args: Any) -> None:
        return None

    # --- plumbing ---------------------------------------------------------------------------------------

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self._send(status, {"Content-Type": "application/json", **(headers or {})}, body)

    def _error(
        self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None
    ) -> None:
        headers = {"X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    def _record(self) -> None:
        self.hub.record(
            server=self.server_name_,
            method=self.command,
            path=urlsplit(self.path).path,
            range=self.headers.get("Range"),
            authorized=self.headers.get("Authorization") is not None,
        )

    def _auth(self, repo: Repo) -> bool:
        """False (after answering) when the request may not see ``repo``."""
        token = self._token()
        if token is not None and token not in self.hub.tokens:
            self._error(401, None, "Invalid credentials in Authorization header")
            return False
        if repo.gated and token not in self.hub.granted:
            status = 401 if token is None else 403
            self._error(
                status,
                "GatedRepo",
                f"Access to model {repo.repo_id} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in.",
            )
            return False
        return True

    def _repo(self, repo_id: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
        return repo

    def _revision_ok(self, repo: Repo, rev: str) -> bool:
        if rev in {repo.commit, "main"}:
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    # --- routes -----------------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _route(self) -> None:
        self._record()
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        if self.server_name_ == "cdn":
            self._cdn(path)
            return
        if match := re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/([^/]+)", path):
            self._model_info(match.group(1), match.group(2), blobs="blobs" in query)
        elif match := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path):
            self._tree(match.group(1), match.group(2))
        elif match := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            self._resolve(match.group(1), match.group(2), match.group(3))
        else:
            self._error(404, None, f"no route {path}")

    def _model_info(self, repo_id: str, rev: str, *, blobs: bool) -> None:
        repo = self._repo(repo_id)
        if repo is None or not self._auth(repo) or not self._revision_ok(repo, rev):
            return
        siblings = []
        for f in repo.files.values():
            sibling: dict[str, Any] = {"rfilename": f.path}
            if blobs:
                sibling.update(size=f.size, blobId=f.pointer_oid)
                if f.lfs:
                    sibling["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": 134}
            siblings.append(sibling)
        self._json(
            200,
            {
                "_id": "0" * 24,
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": repo.commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "tags": ["safetensors"],
                "siblings": siblings,
            },
        )

    def _tree(self, repo_id: str, rev: str) -> None:
        repo = self._repo(repo_id)
        if repo is None or not self._auth(repo) or not self._revision_ok(repo, rev):
            return
        entries: list[dict[str, Any]] = []
        folders = sorted({f.path.rsplit("/", 1)[0] for f in repo.files.values() if "/" in f.path})
        for folder in folders:
            entries.append(
                {
                    "type": "directory",
                    "oid": hashlib.sha1(folder.encode()).hexdigest(),
                    "size": 0,
                    "path": folder,
                }
            )
        for f in repo.files.values():
            entry: dict[str, Any] = {"type": "file", "oid": f.pointer_oid, "size": f.size, "path": f.path}
            if f.lfs:
                entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": 134}
            entries.append(entry)
        self._json(200, entries)

    def _resolve(self, repo_id: str, rev: str, filename: str) -> None:
        repo = self._repo(repo_id)
        if repo is None or not self._auth(repo) or not self._revision_ok(repo, rev):
            return
        f = repo.files.get(filename)
        if f is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist", {"X-Repo-Commit": repo.commit})
            return
        if f.lfs:
            location = f"{self.hub.cdn_url}/lfs/{repo.repo_id}/{f.sha256}?expires=3600"
            self._send(
                302,
                {
                    "Location": location,
                    "X-Repo-Commit": repo.commit,
                    "X-Linked-Etag": f'"{f.sha256}"',
                    "X-Linked-Size": str(f.size),
                    "ETag": f'W/"{f.pointer_oid}"',
                },
            )
            return
        self._send(
            200,
            {
                "ETag": f'"{f.git_oid}"',
                "X-Repo-Commit": repo.commit,
                "Content-Type": "application/octet-stream",
            },
            f.data,
        )

    def _cdn(self, path: str) -> None:
        match = re.fullmatch(r"/lfs/([^/]+/[^/]+)/([0-9a-f]{64})", path)
        repo = self.hub.repos.get(match.group(1)) if match else None
        f = (
            next((f for f in repo.files.values() if f.lfs and f.sha256 == match.group(2)), None)
            if repo and match
            else None
        )
        if f is None:
            self._send(404, {"Content-Type": "text/plain"}, b"no such object")
            return
        if f.path in self.hub.broken:
            self._send(403, {"Content-Type": "text/plain"}, b"Request has expired")
            return
        data = f.data
        if f.path in self.hub.corrupt:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        start = 0
        status = 200
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{f.sha256}"',
        }
        if (wanted := self.headers.get("Range")) and (m := re.fullmatch(r"bytes=(\d+)-(\d*)", wanted)):
            start = int(m.group(1))
            if start >= len(data):
                self._send(416, {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        headers["Content-Length"] = str(len(body))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            for offset in range(0, len(body), CHUNK):
                self.wfile.write(body[offset : offset + CHUNK])
                if self.hub.throttle_bps:
                    time.sleep(CHUNK / self.hub.throttle_bps)
        except (BrokenPipeError, ConnectionResetError):
            return


@contextmanager
def serve(hub: Hub) -> Iterator[Hub]:
    """Run the hub and its CDN on two ports of 127.0.0.1 for the duration of the block."""
    servers = []
    for name in ("hub", "cdn"):
        handler = type(f"{name.title()}Handler", (_Handler,), {"hub": hub, "server_name_": name})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, name=f"fake-{name}", daemon=True).start()
    hub.url = f"http://127.0.0.1:{servers[0].server_address[1]}"
    hub.cdn_url = f"http://127.0.0.1:{servers[1].server_address[1]}"
    try:
        yield hub
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
