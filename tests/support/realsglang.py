"""Real SGLang on the CPU, on 127.0.0.1, for tests (imported as ``support.realsglang``).

The server runs from the host venv that holds exactly the CPU image variant's closure
(:func:`bwstack.build.lock.wheelhouse.host_venv`, same wheels and hashes as the image), with the flags and environment
the CPU profiles use. It is stopped by SIGTERM to the ``launch_server`` process only (a group kill makes
SGLang log a crash). Without the venv's prerequisites (network for the first download) tests skip locally and
FAIL under ``CI``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.stack import ROOT

CPU_VARIANT = "v0.5.23-cpu"
#: every pinned CPU variant (images/<v>/pins.toml with ``[variant] device = "cpu"``), oldest SGLang first
CPU_VARIANTS: tuple[str, ...] = ("v0.5.9-cpu", "v0.5.23-cpu")
#: the flags every CPU profile passes (see profiles.cpu.yaml); tests add their own after these. A flag the
#: variant's parser snapshot lacks is left out for that variant (:func:`cpu_flags`).
CPU_FLAGS: tuple[str, ...] = (
    "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
    "--max-total-tokens", "4096", "--sleep-on-idle",
)  # fmt: skip
CPU_ENV: dict[str, str] = {
    "SGLANG_USE_CPU_ENGINE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
START_TIMEOUT = 240.0


def require(problem: str) -> None:
    """Skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"real SGLang is required in CI: {problem}")
    pytest.skip(problem)


def venv_python(variant: str = CPU_VARIANT) -> Path:
    from bwstack.build.lock import wheelhouse
    from bwstack.errors import ExternalError, UserError
    from bwstack.stack import pins

    try:
        root = wheelhouse.host_venv(pins.load_variant(ROOT / "images", variant), echo=lambda _m: None)
    except (ExternalError, UserError) as exc:
        require(f"cannot build the real SGLang venv for {variant}: {exc}")
        raise AssertionError("unreachable") from exc
    return root / "bin" / "python"


def cpu_flags(variant: str = CPU_VARIANT) -> list[str]:
    """:data:`CPU_FLAGS` less the options the variant's SGLang does not have (its ``sglang-args.json``)."""
    from bwstack.stack import snapshots

    snapshot = snapshots.load_snapshot(ROOT / "images" / variant / "sglang-args.json")
    out: list[str] = []
    skip_value = False
    for index, item in enumerate(CPU_FLAGS):
        if skip_value:
            skip_value = False
            continue
        if not item.startswith("--"):
            out.append(item)
            continue
        flag = snapshot.flag(item)
        if flag is None:
            has_value = index + 1 < len(CPU_FLAGS) and not CPU_FLAGS[index + 1].startswith("--")
            skip_value = has_value
            continue
        out.append(item)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RealServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def post(self, path: str, body: Mapping[str, Any], timeout: float = 60.0) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def real_server(
    model: Path,
    log: Path,
    *,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    variant: str = CPU_VARIANT,
    wait_healthy: bool = True,
) -> Iterator[RealServer]:
    """Start real SGLang on a free loopback port; yields once /health answers 200 (or at once)."""
    python = venv_python(variant)
    port = free_port()
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", str(model), "--host", "127.0.0.1",
            "--port", str(port), *cpu_flags(variant), *extra_args]  # fmt: skip
    from bwstack.stack import pins

    baked = pins.load_variant(ROOT / "images", variant).env  # what the image bakes in ([env] of pins.toml)
    full_env = {**os.environ, **CPU_ENV, **dict(baked), **dict(env or {})}
    handle = log.open("wb")
    process = subprocess.Popen(
        argv, stdout=handle, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
    )
    server = RealServer(f"http://127.0.0.1:{port}", process, log)
    try:
        if wait_healthy:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                if process.poll() is not None:
                    raise AssertionError(
                        f"real SGLang exited {process.returncode}:\n{server.log_text()[-3000:]}"
                    )
                try:
                    if server.get("/health", timeout=5)[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"real SGLang not healthy in {START_TIMEOUT:.0f} s:\n{server.log_text()[-3000:]}"
                    )
                time.sleep(1.0)
        yield server
    finally:
        stop(process)
        handle.close()


def stop(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM to the main process only (SGLang then stops its children cleanly); SIGKILL after ``grace``.

    The server runs in its own session, so whatever it left behind after exiting is killed by group last.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
