"""Real servers on 127.0.0.1 for the pin checks: Debian's ``docker-registry`` (the CNCF distribution registry)
and a PEP 503 package index served by ``python -m http.server`` from a folder of files.

Both start on a free port in a temporary folder and stop in a ``finally`` (no process is left behind). Images
are pushed over the registry's HTTP API v2 with urllib (blob upload, then the manifest), so no Docker is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REGISTRY_BINARY = "docker-registry"
MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"
LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def need_registry() -> None:
    """Skip on a developer machine without Debian's docker-registry; fail in CI (./dev setup installs it)."""
    if shutil.which(REGISTRY_BINARY) is None:
        message = "docker-registry is not installed (apt-get install docker-registry; ./dev setup does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url} within 30 s")


@contextlib.contextmanager
def _running(argv: list[str], url: str, what: str, log: Path) -> Iterator[None]:
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        try:
            _wait_http(url, process, what)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@dataclass
class Registry:
    """A running registry: ``host`` is ``127.0.0.1:PORT``."""

    host: str

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def _send(self, method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        return urllib.request.urlopen(request, timeout=30)

    def upload_blob(self, repo: str, blob: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        with self._send("POST", f"{self.url}/v2/{repo}/blobs/uploads/") as started:
            location = started.headers["Location"]
        if location.startswith("/"):
            location = self.url + location
        joiner = "&" if "?" in location else "?"
        headers = {"Content-Type": "application/octet-stream"}
        with self._send("PUT", f"{location}{joiner}digest={digest}", blob, headers):
            pass
        return digest

    def push(self, repo: str, tag: str, label: str) -> str:
        """Push a small one-layer image whose config carries ``label``; the manifest digest."""
        config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": {"t": label}},
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()  # fmt: skip
        layer = label.encode() * 8
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": CONFIG_TYPE,
                "size": len(config),
                "digest": self.upload_blob(repo, config),
            },
            "layers": [
                {"mediaType": LAYER_TYPE, "size": len(layer), "digest": self.upload_blob(repo, layer)}
            ],
        }
        body = json.dumps(manifest).encode()
        with self._send(
            "PUT", f"{self.url}/v2/{repo}/manifests/{tag}", body, {"Content-Type": MANIFEST_TYPE}
        ) as done:
            return str(done.headers["Docker-Content-Digest"])

    def delete(self, repo: str, digest: str) -> None:
        with self._send("DELETE", f"{self.url}/v2/{repo}/manifests/{digest}"):
            pass


@contextlib.contextmanager
def registry(tmp: Path) -> Iterator[Registry]:
    """``docker-registry serve`` on 127.0.0.1:<free port>, storage in ``tmp``, deletes enabled, no auth."""
    binary = shutil.which(REGISTRY_BINARY)
    if binary is None:
        raise RuntimeError(
            "docker-registry is not installed (apt-get install docker-registry; ./dev setup does)"
        )
    host = f"127.0.0.1:{free_port()}"
    storage = tmp / "registry-storage"
    storage.mkdir(parents=True)
    config = tmp / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {storage}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: {host}}}\n",
        encoding="utf-8",
    )
    with _running(
        [binary, "serve", str(config)], f"http://{host}/v2/", "docker-registry", tmp / "registry.log"
    ):
        yield Registry(host)


#: the CPU variant the registry tests copy, and the name of its copy whose ``[base] image`` is in the registry
CPU_SOURCE = "v0.5.23-cpu"
CPU_REGISTRY_VARIANT = "v0.5.23-cpu-registry"
CPU_BASE_REPO = "bwstack/cpu-base"
CPU_BASE_TAG = "v0.5.23-cpu"


def registry_variant(root: Path, host: str) -> Path:
    """images/CPU_REGISTRY_VARIANT: CPU_SOURCE's pins and locks with ``[base] image`` in the registry at
    ``host`` (a CPU variant that names a registry base takes the GPU variants' path: pulled by digest)."""
    folder = root / "images" / CPU_REGISTRY_VARIANT
    shutil.copytree(
        root / "images" / CPU_SOURCE, folder, ignore=shutil.ignore_patterns("*wheels*", "wheelhouse")
    )
    pins_path = folder / "pins.toml"
    text = pins_path.read_text(encoding="utf-8")
    text = text.replace(
        f'image = "{CPU_BASE_REPO}:{CPU_BASE_TAG}"', f'image = "{host}/{CPU_BASE_REPO}:{CPU_BASE_TAG}"'
    )
    assert host in text
    pins_path.write_text(text, encoding="utf-8")
    return pins_path


def push_cpu_base(reg: Registry, local_base: str, made: list[str]) -> tuple[str, str]:
    """``docker push`` of the local CPU base as ``<reg>/CPU_BASE_REPO:CPU_BASE_TAG``; the remote tag and the
    pushed digest (both references appended to ``made``, for the caller to remove)."""
    from support.dockerstack import docker

    remote = f"{reg.host}/{CPU_BASE_REPO}:{CPU_BASE_TAG}"
    made.append(remote)
    docker("tag", local_base, remote)
    pushed = docker("push", remote, timeout=900)
    found = re.search(r"digest: (sha256:[0-9a-f]{64})", pushed.stdout)
    assert found, pushed.stdout
    made.append(f"{reg.host}/{CPU_BASE_REPO}@{found.group(1)}")
    return remote, found.group(1)


@dataclass
class Index:
    """A PEP 503 simple index over ``files``: ``url`` is its ``…/simple`` root."""

    root: Path
    url: str

    def publish(self) -> None:
        """(Re)write ``simple/<project>/index.html`` for every file in ``root/files`` (name-version-… files)."""
        from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

        simple = self.root / "simple"
        shutil.rmtree(simple, ignore_errors=True)
        projects: dict[str, list[Path]] = {}
        for path in sorted((self.root / "files").iterdir()):
            parse = parse_wheel_filename if path.name.endswith(".whl") else parse_sdist_filename
            projects.setdefault(canonicalize_name(parse(path.name)[0]), []).append(path)
        for project, files in projects.items():
            links = "".join(
                f'<a href="../../files/{html.escape(p.name)}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}">'
                f"{html.escape(p.name)}</a><br>\n"
                for p in files
            )
            (simple / project).mkdir(parents=True)
            (simple / project / "index.html").write_text(
                f"<!DOCTYPE html><html><body>\n{links}</body></html>\n"
            )


@contextlib.contextmanager
def package_index(tmp: Path) -> Iterator[Index]:
    """``python -m http.server`` on 127.0.0.1:<free port> over ``tmp/index`` (put files in ``files/``, then
    :meth:`Index.publish`)."""
    root = tmp / "index"
    (root / "files").mkdir(parents=True)
    (root / "simple").mkdir()
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)]
    with _running(argv, f"http://127.0.0.1:{port}/simple/", "http.server", tmp / "index.log"):
        yield Index(root, f"http://127.0.0.1:{port}/simple")
