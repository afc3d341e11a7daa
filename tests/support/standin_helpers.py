"""Helpers for the stand-in tests: parser snapshots and stand-in server processes on 127.0.0.1.

Snapshots: the real ``images/<variant>/sglang-args.json`` of 0.5.23 and 0.5.9 (generated from the wheels by
``bwstack lock --args``); ``tests/standin/data`` holds a hand-made 0.5.15-style subset for the deprecated
``--nsa-*`` aliases, which neither real snapshot has.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.stack import ROOT, TESTS

DATA = TESTS / "standin" / "data"
REAL_SNAPSHOTS = {
    "0.5.23": ROOT / "images/v0.5.23-cu130/sglang-args.json",
    "0.5.9": ROOT / "images/v0.5.9-cu130/sglang-args.json",
}
START_TIMEOUT = 60.0  # generous: a loaded CI machine must not make a test fail


def snapshot_path(version: str) -> Path:
    """The real parser snapshot of SGLang ``version`` (0.5.23 or 0.5.9)."""
    return REAL_SNAPSHOTS[version]


def load_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class StandinProcess:
    """A running ``python -m bwstack.standin`` with its log files."""

    proc: subprocess.Popen[bytes]
    port: int
    stderr_path: Path
    stdout_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def access_log(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, timeout: float = START_TIMEOUT) -> None:
        """Wait until ``text`` is in the server log; fail if the process ends first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                if text in self.log():
                    return
                pytest.fail(
                    f"stand-in exited ({self.proc.returncode}) before {text!r}:\n{self.log()[-3000:]}"
                )
            time.sleep(0.05)
        pytest.fail(f"{text!r} not in the stand-in log after {timeout} s:\n{self.log()[-3000:]}")

    def wait_ready(self) -> None:
        self.wait_for("The server is fired up and ready to roll!")

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"stand-in did not exit within {timeout} s:\n{self.log()[-3000:]}")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Reply:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=dict(headers or {}))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as reply:
                return Reply(reply.status, reply.read(), dict(reply.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), dict(exc.headers))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        return self.proc.returncode


class StandinFactory:
    """Starts stand-in processes and guarantees they are gone after the test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[StandinProcess] = []

    def start(
        self,
        args: Sequence[str] = ("--model-path", "nvidia/GLM-5-NVFP4"),
        *,
        version: str = "0.5.23",
        fault: str | None = None,
        arch: str | None = None,
        load_seconds: float | None = 0,
        extra_env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> StandinProcess:
        port = port or free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_STANDIN_")}
        env["PYTHONPATH"] = str(ROOT / "src")
        env["BWSTACK_STANDIN_ARGS"] = str(snapshot_path(version))
        if fault is not None:
            env["BWSTACK_STANDIN_FAULT"] = fault
        if arch is not None:
            env["BWSTACK_STANDIN_ARCH"] = arch
        if load_seconds is not None:
            env["BWSTACK_STANDIN_LOAD_SECONDS"] = str(load_seconds)
        env.update(extra_env or {})
        index = len(self.started)
        stderr_path = self.tmp / f"standin-{index}.err"
        stdout_path = self.tmp / f"standin-{index}.out"
        argv = [sys.executable, "-m", "bwstack.standin", *args, "--host", "127.0.0.1", "--port", str(port)]
        with stderr_path.open("wb") as err, stdout_path.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=self.tmp)
        process = StandinProcess(proc, port, stderr_path, stdout_path)
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            process.stop()
