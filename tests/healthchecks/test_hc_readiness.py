"""serve.py's readiness probe: one full healthcheck the moment /health answers 200, fatal -> stopped at once.

The server process is the fake launch_server of the serve tests (it only waits); the HTTP side is the fake
SGLang of the warmup tests, reached through ``BWSTACK_HC_URL``. The real-server figure (NaN model, fault to
exit, against Docker's next probe) is benchmarks/readiness.py.
"""

from __future__ import annotations

import math
import signal
import subprocess
import time
from pathlib import Path

from test_hc_serve import _start_serve, log_text

from healthchecks import serve
from support.hc_fakes import FakeSGLang, generate_body


def test_probe_url_follows_the_port_flag() -> None:
    assert serve.probe_url(["--port", "31000"]) == "http://127.0.0.1:31000"
    assert serve.probe_url(["--port=31001"]) == "http://127.0.0.1:31001"
    assert serve.probe_url([]) == "http://127.0.0.1:30000"


def test_a_flat_distribution_at_readiness_stops_the_server_at_once(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        body = generate_body(logprobs=[-math.log(512)] * 8)
        fake.set_json("POST", "/generate", body)
        fake.set_health(503)  # still warming up
        started = time.monotonic()
        proc = _start_serve(tmp_path, "--wait", BWSTACK_READY_PROBE="1", BWSTACK_HC_URL=fake.url)
        time.sleep(1.5)
        assert proc.poll() is None  # no probe before SGLang says it is ready
        fake.set_health(200)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, out
    assert "readiness probe: unhealthy: garbage: sampled decode: all 8 tokens have logprob -6.2383" in out
    assert "fail-fast: the readiness probe reported" in out and "fake: got SIGTERM" in out
    assert "server stopped by fail-fast" in log_text(tmp_path)
    assert time.monotonic() - started < 25


def test_a_healthy_server_keeps_running_and_the_verdict_is_recorded(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        proc = _start_serve(tmp_path, "--wait", BWSTACK_READY_PROBE="1", BWSTACK_HC_URL=fake.url)
        state = tmp_path / "hc-state.json"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (state.exists() and "verdict" in state.read_text()):
            time.sleep(0.1)
        time.sleep(1.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert "readiness probe: healthy: sampled decode ok" in out
    assert '"class": "healthy"' in state.read_text()
    assert proc.returncode == 128 + signal.SIGTERM


def test_readiness_probe_off(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", generate_body(logprobs=[-math.log(512)] * 8))
        proc = _start_serve(tmp_path, "--wait", BWSTACK_READY_PROBE="0", BWSTACK_HC_URL=fake.url)
        try:
            proc.wait(timeout=3)
            raise AssertionError("serve.py exited without a probe")
        except subprocess.TimeoutExpired:
            pass
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert "readiness probe" not in out
    assert not [r for r in fake.requests if r[1] == "/generate"]


def test_after_a_readiness_stop_the_container_waits_for_dockers_probe_to_record_the_class(
    tmp_path: Path,
) -> None:
    """Docker never ran a probe before the readiness probe stopped the server: the wrapper lingers, and the
    next healthcheck repeats the stop's verdict from the record beside the state file, so `docker inspect`
    names the class (seen missing on real SGLang: the NaN container exited with an empty health log)."""
    import sys

    from test_hc_serve import ROOT, serve_env

    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", generate_body(logprobs=[-math.log(512)] * 8))
        proc = _start_serve(
            tmp_path, "--wait", BWSTACK_READY_PROBE="1", BWSTACK_HC_URL=fake.url, BWSTACK_LINGER="5s"
        )
        record = tmp_path / "hc-state.json.stopped"
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and not record.exists():
            time.sleep(0.1)
        assert record.exists()
        time.sleep(1.0)
        assert proc.poll() is None  # lingering: no Docker probe has recorded the verdict yet
        probe = subprocess.run(
            [sys.executable, str(ROOT / "healthchecks" / "warmup.py"), "--url", "http://127.0.0.1:9", "--mode", "light"],
            capture_output=True, text=True, env=serve_env(tmp_path), timeout=30,
        )  # fmt: skip
        out, _ = proc.communicate(timeout=20)
    assert probe.returncode == 1
    assert (
        probe.stdout.strip().splitlines()[-1].startswith("unhealthy: garbage: sampled decode: all 8 tokens")
    )
    assert "fail-fast stopped the server on this verdict" in probe.stdout
    assert proc.returncode == 3, out
