"""The stand-in images: build context and naming without Docker, and one real build + run with Docker.

The images are kept after the test (they are a cache: ``bwstack/standin-rootfs:bookworm`` takes about a
minute to build once); containers are always removed.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bwstack.build import standin_image
from bwstack.errors import UserError
from support.standin_helpers import snapshot_path

GLM_ARGV = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "nvidia/GLM-5-NVFP4",
    "--host",
    "0.0.0.0",
    "--port",
    "30000",
]


def test_base_context_holds_stdlib_code_shim_and_snapshot() -> None:
    files = standin_image.base_context(snapshot_path("0.5.23"), "0.5.23")
    assert "opt/standin/bwstack/__init__.py" in files
    assert "opt/standin/bwstack/stack/snapshot_argparse.py" in files
    assert "opt/standin/bwstack/standin/server.py" in files
    assert "opt/standin/bwstack/standin/__main__.py" in files
    assert b"__version__ = '0.5.23'" in files["opt/standin/sglang/__init__.py"]
    assert b"BWSTACK_STANDIN = True" in files["opt/standin/sglang/__init__.py"]
    assert files["opt/bwstack/sglang-args.json"] == snapshot_path("0.5.23").read_bytes()
    dockerfile = files["Dockerfile"].decode()
    assert dockerfile.startswith(f"FROM {standin_image.ROOTFS_IMAGE}\n")
    assert "PYTHONPATH=/opt/standin" in dockerfile
    # only stdlib-only modules travel: nothing that imports click, pydantic, jinja2, ...
    for rel, data in files.items():
        if rel.endswith(".py"):
            for banned in (b"import click", b"import pydantic", b"import jinja2", b"from bwstack.errors"):
                assert banned not in data, f"{rel} imports {banned!r}"


def test_content_hash_tracks_content() -> None:
    files = standin_image.base_context(snapshot_path("0.5.23"), "0.5.23")
    same = standin_image.base_context(snapshot_path("0.5.23"), "0.5.23")
    other = standin_image.base_context(snapshot_path("0.5.9"), "0.5.9")
    assert standin_image.content_hash(files) == standin_image.content_hash(same)
    assert standin_image.content_hash(files) != standin_image.content_hash(other)


def test_ensure_standin_image_builds_the_project_dockerfile_on_the_base(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    snapshot = tmp_path / "sglang-args.json"
    snapshot.write_bytes(snapshot_path("0.5.23").read_bytes())
    variant = SimpleNamespace(cli_snapshot_path=snapshot, sglang_version="0.5.23")
    stack = SimpleNamespace(settings=SimpleNamespace(variant="v0.5.23-cu130"), variant=lambda name: variant)
    calls: list[dict[str, Any]] = []

    def fake_build(stack_arg: Any, name: str, **kwargs: Any) -> int:
        calls.append({"name": name, **kwargs})
        return 0

    monkeypatch.setattr(standin_image, "ensure_base_image", lambda path, version, echo: f"base-for-{version}")
    from bwstack.build import dockerbuild

    monkeypatch.setattr(dockerbuild, "build", fake_build)
    ref = standin_image.ensure_standin_image(stack, echo=lambda _m: None)  # type: ignore[arg-type]
    assert ref == "bwstack/standin:v0.5.23-cu130"
    assert calls == [
        {
            "name": "v0.5.23-cu130",
            "tag": ref,
            "base_image": "base-for-0.5.23",
            "dry_run": False,
            "quiet": True,
        }
    ]
    snapshot.unlink()
    with pytest.raises(UserError, match="bwstack lock --args"):
        standin_image.ensure_standin_image(stack, echo=lambda _m: None)  # type: ignore[arg-type]


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


@pytest.mark.docker
def test_base_image_runs_the_standin(docker_engine: None) -> None:
    messages: list[str] = []
    ref = standin_image.ensure_base_image(snapshot_path("0.5.23"), "0.5.23", echo=messages.append)
    assert ref.startswith(f"{standin_image.BASE_REPO}:")
    labels = json.loads(_docker("image", "inspect", "--format", "{{json .Config.Labels}}", ref).stdout)
    assert labels[standin_image.LABEL] == "base" and labels[f"{standin_image.LABEL}.sglang"] == "0.5.23"
    # a second call reuses the image
    assert standin_image.ensure_base_image(snapshot_path("0.5.23"), "0.5.23", echo=messages.append) == ref
    assert messages[-1].endswith("is up to date")

    names = [f"bwstack-standin-test-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        _docker(
            "run",
            "-d",
            "--name",
            names[0],
            "--label",
            "io.bwstack.test=standin",
            "-p",
            "127.0.0.1::30000",
            "-e",
            "BWSTACK_STANDIN_LOAD_SECONDS=0",
            ref,
            *GLM_ARGV,
        )
        port = int(_docker("port", names[0], "30000/tcp").stdout.strip().splitlines()[0].rsplit(":", 1)[1])
        deadline = time.monotonic() + 90
        while _health(port) != 200:
            state = _docker("inspect", "--format", "{{.State.Status}}", names[0]).stdout.strip()
            assert state == "running", _docker("logs", names[0], check=False).stderr[-2000:]
            assert time.monotonic() < deadline, "stand-in container never became healthy"
            time.sleep(0.5)
        version = _docker("exec", names[0], "python3", "-c", "import sglang; print(sglang.__version__)")
        assert version.stdout.strip() == "0.5.23"
        _docker("stop", "--time", "20", names[0])
        assert _docker("inspect", "--format", "{{.State.ExitCode}}", names[0]).stdout.strip() == "0"
        assert "The server is fired up and ready to roll!" in _docker("logs", names[0]).stderr

        # a kill-style fault ends the container with 137, also when the stand-in is PID 1
        _docker(
            "run",
            "-d",
            "--name",
            names[1],
            "--label",
            "io.bwstack.test=standin",
            "-e",
            "BWSTACK_STANDIN_LOAD_SECONDS=0",
            "-e",
            "BWSTACK_STANDIN_FAULT=oom",
            ref,
            *GLM_ARGV,
        )
        assert _docker("wait", names[1], timeout=120).stdout.strip() == "137"
        assert "CUDA out of memory" in _docker("logs", names[1]).stderr
    finally:
        for name in names:
            _docker("rm", "-f", "-v", name, check=False)


def test_base_context_imports_only_the_stdlib_and_itself() -> None:
    """Every module the stand-in's code imports is stdlib or travels in the base context (the vocabulary too)."""
    files = standin_image.base_context(snapshot_path("0.5.23"), "0.5.23")
    assert "opt/standin/healthchecks/vocabulary.py" in files

    def travels(module: str) -> bool:
        path = "opt/standin/" + module.replace(".", "/")
        return f"{path}.py" in files or f"{path}/__init__.py" in files

    for rel, data in files.items():
        if not rel.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(data, filename=rel)):
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                package = "opt/standin/" + node.module.replace(".", "/") + "/__init__.py"
                wanted = [node.module] + [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if package in files and alias.name.encode() not in files[package]
                ]
            else:
                continue
            for name in wanted:
                assert name.split(".")[0] in sys.stdlib_module_names or travels(name), f"{rel} imports {name}"
