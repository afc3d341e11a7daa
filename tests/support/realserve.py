"""The image's serve wrapper (``healthchecks/serve.py``) around real SGLang on the CPU, on 127.0.0.1, with
the hang watchdog on (imported as ``support.realserve``; benchmarks/health_under_load.py; ``hold`` also by
tests/sweep/test_cpu_stack.py, against a container's port).

The wrapper runs from the host venv of the CPU variant's closure, so it starts the real
``sglang.launch_server`` exactly as the image's entrypoint does; the healthcheck (``warmup.py``) and the soak
client run beside it. Everything is stopped at the end (SIGCONT first: a test may have frozen the scheduler).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from bwstack.stack import pins
from support.realsglang import CPU_ENV, CPU_VARIANT, cpu_flags, free_port, venv_python
from support.stack import ROOT

SERVE = ROOT / "healthchecks" / "serve.py"
WARMUP = ROOT / "healthchecks" / "warmup.py"
SOAK = ROOT / "healthchecks" / "soak_client.py"


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    state: Path
    stall_after: float

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def scheduler_pid(self) -> int:
        for pid in Path("/proc").iterdir():
            with suppress(OSError):
                if pid.name.isdigit() and (pid / "cmdline").read_bytes().startswith(b"sglang::scheduler"):
                    stat = (pid / "stat").read_text().rsplit(")", 1)[1].split()
                    if self._descends(int(stat[1])):
                        return int(pid.name)
        raise AssertionError("no sglang::scheduler process under the wrapper")

    def _descends(self, ppid: int) -> bool:
        while ppid > 1:
            if ppid == self.proc.pid:
                return True
            stat = Path(f"/proc/{ppid}/stat").read_text().rsplit(")", 1)[1].split()
            ppid = int(stat[1])
        return False

    def healthcheck(self) -> str:
        done = subprocess.run(
            [sys.executable, str(WARMUP), "--url", self.url, "--mode", "light", "--timeout", "30",
             "--state", str(self.state), "--log", str(self.log), "--stall-after", str(self.stall_after)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout.strip().splitlines()[-1]


def _answers(url: str) -> bool:
    """GET /health answers 200 (the server is ready; used when no watchdog line marks it)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def served(model: Path, tmp: Path, stall_after: float, *, watch: bool = True) -> Iterator[Served]:
    python = venv_python(CPU_VARIANT)
    port = free_port()
    baked = pins.load_variant(ROOT / "images", CPU_VARIANT).env
    env = {**os.environ, **CPU_ENV, **dict(baked)}
    env.update(
        BWSTACK_LOG=str(tmp / "server.log"),
        BWSTACK_HC_STATE=str(tmp / "hc.json"),
        BWSTACK_HC_HANG_AFTER=str(stall_after),
        BWSTACK_HANG_WATCH="1" if watch else "0",
        BWSTACK_API_KEY_FILE=str(tmp / "no-key"),
        BWSTACK_HF_TOKEN_FILE=str(tmp / "no-token"),
        BWSTACK_READY_PROBE="0",
        BWSTACK_FAIL_FAST="1",
    )
    argv = [str(python), str(SERVE), "--model-path", str(model), "--host", "127.0.0.1", "--port", str(port),
            *cpu_flags(CPU_VARIANT)]  # fmt: skip
    out = (tmp / "stdout").open("wb")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = Served(f"http://127.0.0.1:{port}", proc, tmp / "server.log", tmp / "hc.json", stall_after)
    try:
        deadline = time.monotonic() + 240
        while not ("hang watchdog on" in server.log_text() if watch else _answers(server.url)):
            assert proc.poll() is None, server.log_text()[-3000:]
            assert time.monotonic() < deadline, server.log_text()[-3000:]
            time.sleep(1)
        yield server
    finally:
        with suppress(ProcessLookupError):
            for pid in Path("/proc").iterdir():
                with suppress(OSError, ValueError):
                    if pid.name.isdigit() and os.getpgid(int(pid.name)) == proc.pid:
                        os.kill(int(pid.name), signal.SIGCONT)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()


def soak(
    server: Served, duration: float, *, concurrency: int = 3, lengths: str = "32,600"
) -> subprocess.Popen[str]:
    """The soak client against the server, in the background."""
    argv = [sys.executable, str(SOAK), "--url", server.url, "--duration", str(duration), "--concurrency",
            str(concurrency), "--lengths", lengths, "--output-len", "48", "--stall-after",
            str(server.stall_after), "--window", "2"]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen[str]) -> dict[str, object]:
    """The soak client's JSON record."""
    out, err = proc.communicate(timeout=300)
    assert out.strip(), err
    return dict(json.loads(out.strip().splitlines()[-1]))


def hold(url: str, seconds: float = 180.0) -> threading.Thread:
    """A user's streamed request to the server at ``url`` that stays open (for ``seconds`` at most): what a
    livelock leaves in flight after the soak, which closes its own requests once it has seen the hang (a
    client that disconnects ends its request in SGLang). Also used against a container's published port."""

    def read() -> None:
        body = {"text": "The quick brown fox", "stream": True,
                "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True, "temperature": 0.7}}  # fmt: skip
        request = urllib.request.Request(
            url + "/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with suppress(OSError), urllib.request.urlopen(request, timeout=seconds) as response:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and response.readline():
                pass

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread
