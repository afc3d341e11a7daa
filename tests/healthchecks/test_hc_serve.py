"""The serve wrapper (image entrypoint) run as a subprocess around a fake server module."""

from __future__ import annotations

import http.server
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from pathlib import Path
from typing import IO, Any, cast

import pytest

from healthchecks import serve, signatures
from support.stack import ROOT

SERVE = ROOT / "healthchecks" / "serve.py"
HERE = Path(__file__).resolve().parent
KEY = "sk-live-0f9e8d7c6b5a"
TOKEN = "hf_TESTtokenABCDEF123456"


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_") and k not in ("HF_TOKEN",)}
    env.update(
        {
            "PYTHONPATH": str(HERE),
            "BWSTACK_SERVER_MODULE": "hc_fake_sglang",
            "BWSTACK_LOG": str(tmp_path / "log" / "server.log"),
            "BWSTACK_API_KEY_FILE": str(tmp_path / "api_key"),
            "BWSTACK_HF_TOKEN_FILE": str(tmp_path / "hf_token"),
            "BWSTACK_HC_STATE": str(tmp_path / "hc-state.json"),
            "BWSTACK_READY_PROBE": "0",  # test_hc_readiness.py covers it, against a fake server of its own
            "BWSTACK_HANG_WATCH": "0",  # test_hc_hang.py covers it
        }
    )
    env.update(extra)
    return env


def run_serve(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SERVE), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=serve_env(tmp_path, **extra),
        cwd=tmp_path,
    )


def log_text(tmp_path: Path) -> str:
    return (tmp_path / "log" / "server.log").read_text()


def test_exit_status_and_output_are_teed(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--model-path", "m", "--exit", "3")
    assert proc.returncode == 3
    log = log_text(tmp_path)
    assert proc.stdout == log  # stdout and the log carry the same bytes
    assert log.startswith("bwstack-serve: starting python3 -m hc_fake_sglang --model-path m --exit 3\n")
    assert "warning line on stderr" in log  # stderr is merged
    assert log.endswith("bwstack-serve: server crashed: exit status 3\n")
    match = signatures.classify_text(log)
    assert match is not None and match.cls == "crash"


def test_a_progress_bar_reaches_docker_logs_line_by_line(tmp_path: Path) -> None:
    """tqdm redraws with \r; Docker's log driver cuts lines at \n only, so stdout gets a line per update (the
    live shard count of ``bwstack up``) while the log file keeps the bytes as written."""
    bar = "Loading safetensors checkpoint shards: {p:3d}% Completed | {n}/2 [00:0{n}<00:00, 1.00it/s]"
    updates = "".join("\r" + bar.format(p=50 * n, n=n) for n in range(3))
    (tmp_path / "tqdm_server.py").write_text(
        f"import sys\nsys.stderr.write({updates + chr(10)!r})\nsys.stderr.flush()\n", encoding="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, str(SERVE), "--model-path", "m"],
        capture_output=True, timeout=60, cwd=tmp_path,
        env=serve_env(tmp_path, BWSTACK_SERVER_MODULE="tqdm_server", PYTHONPATH=f"{tmp_path}:{HERE}"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().split("\n")
    assert [bar.format(p=50 * n, n=n) for n in range(3)] == [ln for ln in lines if "shards" in ln]
    assert b"\r" not in proc.stdout
    assert updates.encode() in (tmp_path / "log" / "server.log").read_bytes()


def test_clean_exit_is_not_a_crash(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--exit", "0")
    assert proc.returncode == 0
    assert proc.stdout.endswith("bwstack-serve: server exited: exit status 0\n")
    assert signatures.classify_text(proc.stdout) is None


def test_killed_server_exits_128_plus_signal(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--kill-self")
    assert proc.returncode == 128 + signal.SIGKILL
    assert "server crashed: exit status 137 (killed by SIGKILL)" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SERVE), "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=serve_env(tmp_path),
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    stream = cast("IO[str]", proc.stdout)  # stdout=PIPE: always a stream

    def read_all() -> None:
        for line in stream:
            lines.put(line)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        seen = []
        while "fake: ready\n" not in seen:
            seen.append(lines.get(timeout=30))
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert f"fake: got {sig.name}\n" in rest
    assert rest[-1] == f"bwstack-serve: server stopped: exit status {128 + sig} after {sig.name}\n"
    assert signatures.classify_text("".join(rest)) is None  # an operator stop is not a crash


def test_secrets_reach_the_child_only(tmp_path: Path) -> None:
    (tmp_path / "api_key").write_text(KEY + "\n")
    (tmp_path / "hf_token").write_text(TOKEN)
    dump = tmp_path / "child.json"
    proc = run_serve(tmp_path, "--model-path", "m", "--dump", str(dump), "--leak")
    assert proc.returncode == 0, proc.stdout
    child = json.loads(dump.read_text())
    assert child["api_key"] == KEY  # through the private --config file SGLang merges, never the argv
    assert "--api-key" not in child["argv"] and not any(KEY in a for a in child["argv"])
    assert child["argv"][-2] == "--config"
    assert not Path(child["argv"][-1]).exists()  # removed when the server exited
    assert child["hf_token"] == TOKEN
    for text in (proc.stdout, proc.stderr, log_text(tmp_path)):
        assert KEY not in text and TOKEN not in text
        assert KEY[:8] not in text.replace("x" * 8, "")  # not even split across writes
    assert "api_key='***'" in proc.stdout
    assert "token=*** key=***\n" in proc.stdout
    assert "x***yyyyyyyyyy" in proc.stdout  # a secret inside an over-long line
    first = proc.stdout.splitlines()[0]
    assert first.endswith(
        f"(--api-key from {tmp_path / 'api_key'}, passed in a private --config file; "
        f"HF_TOKEN from {tmp_path / 'hf_token'})"
    )
    assert "--api-key ***" not in first  # the injected key is not shown as an argument either


def test_api_key_on_the_command_line_is_redacted_and_wins(tmp_path: Path) -> None:
    (tmp_path / "api_key").write_text(KEY)
    dump = tmp_path / "child.json"
    proc = run_serve(tmp_path, "--api-key", "cli-secret-123", "--dump", str(dump))
    assert proc.returncode == 0
    assert json.loads(dump.read_text())["argv"].count("--api-key") == 1
    assert "cli-secret-123" not in proc.stdout and KEY not in proc.stdout
    assert "--api-key '***'" in proc.stdout.splitlines()[0]


def test_no_key_file_means_no_api_key(tmp_path: Path) -> None:
    dump = tmp_path / "child.json"
    (tmp_path / "hf_token").write_text("\n")  # empty secret files are skipped too
    assert run_serve(tmp_path, "--dump", str(dump)).returncode == 0
    child = json.loads(dump.read_text())
    assert "--api-key" not in child["argv"] and "--config" not in child["argv"]
    assert child["api_key"] is None and child["hf_token"] is None


def test_log_is_size_bounded_with_one_rotation(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--spam", str(200 * 1024), BWSTACK_LOG_MAX_BYTES="8192")
    assert proc.returncode == 0
    log = tmp_path / "log" / "server.log"
    rotated = tmp_path / "log" / "server.log.1"
    assert rotated.exists()
    assert log.stat().st_size <= 8192 + serve.SPLIT_AT
    assert rotated.stat().st_size <= 8192 + serve.SPLIT_AT
    assert sorted(p.name for p in log.parent.iterdir()) == ["server.log", "server.log.1"]
    assert len(proc.stdout) > 200 * 1024  # stdout gets everything
    assert log.read_text().endswith("bwstack-serve: server exited: exit status 0\n")


def test_start_rotates_the_previous_log_and_clears_the_healthcheck_state(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "server.log").write_text("previous run\n")
    (tmp_path / "hc-state.json").write_text("{}")
    assert run_serve(tmp_path).returncode == 0
    assert (tmp_path / "log" / "server.log.1").read_text() == "previous run\n"
    assert "previous run" not in log_text(tmp_path)
    assert not (tmp_path / "hc-state.json").exists()


def test_unwritable_log_falls_back_to_stdout(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    proc = run_serve(tmp_path, "--exit", "0", BWSTACK_LOG=str(blocker / "server.log"))
    assert proc.returncode == 0
    assert proc.stdout.startswith("bwstack-serve: warning: cannot write the server log")
    assert "server_args=ServerArgs" in proc.stdout


def test_missing_server_module_is_reported(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, BWSTACK_SERVER_MODULE="no_such_module_xyz")
    assert proc.returncode == 1
    assert "No module named no_such_module_xyz" in proc.stdout
    assert proc.stdout.endswith("bwstack-serve: server crashed: exit status 1\n")


def test_redact_argv_forms() -> None:
    assert serve.redact_argv(["--api-key", "a", "--admin-api-key=b", "--port", "1"]) == [
        "--api-key",
        "***",
        "--admin-api-key=***",
        "--port",
        "1",
    ]
    assert serve.argv_secrets(["--api-key", "a", "--admin-api-key=b", "--api-key"]) == ["a", "b"]


def test_tee_redacts_a_secret_cut_by_the_split(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    log = serve.BoundedLog(str(tmp_path / "t.log"), 1 << 20)
    tee = serve.Tee(log, ["SECRETSECRET"])
    payload = b"a" * (serve.SPLIT_AT - 4) + b"SECRETSECRET" + b"b" * 100

    def write_all() -> None:
        os.write(write_fd, payload)
        os.close(write_fd)

    writer = threading.Thread(target=write_all)
    writer.start()
    out: list[bytes] = []
    original = tee.emit

    def spy(data: bytes) -> None:
        out.append(data)
        original(data)

    tee.emit = spy  # type: ignore[method-assign]
    tee.pump(read_fd)
    writer.join()
    os.close(read_fd)
    log.close()
    joined = b"".join(out)
    assert b"SECRET" not in joined and joined.count(b"***") == 1
    assert (tmp_path / "t.log").read_bytes() == joined


# --- fail-fast, linger, env switches (serve.py supervises the server on the healthcheck's verdict) -------------


def _start_serve(tmp_path: Path, *argv: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SERVE), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=serve_env(tmp_path, **extra),
        cwd=tmp_path,
    )


def _write_verdict(tmp_path: Path, cls: str, line: str) -> None:
    # what warmup.py writes after a probe (see warmup.main)
    state = {"schema": 1, "verdict": {"class": cls, "line": line, "time": 0}}
    tmp = tmp_path / "hc-state.json.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, tmp_path / "hc-state.json")


def _wait_for_start(tmp_path: Path) -> None:
    # serve.py removes the state file at start; wait until the fake server printed its first line
    log = tmp_path / "log" / "server.log"
    for _ in range(200):
        if log.exists() and "server_args=" in log.read_text():
            return
        threading.Event().wait(0.05)
    raise AssertionError("fake server did not start")


def test_fail_fast_stops_the_server_on_a_fatal_verdict(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--wait")
    _wait_for_start(tmp_path)
    _write_verdict(tmp_path, "nan", "unhealthy: nan: output_token_logprobs[0] is null")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert "fail-fast: the healthcheck reported 'unhealthy: nan: output_token_logprobs[0] is null'" in out
    assert "fake: got SIGTERM" in out
    assert "server stopped by fail-fast" in log_text(tmp_path)


def test_fail_fast_ignores_verdicts_that_can_heal(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--wait")
    _wait_for_start(tmp_path)
    _write_verdict(tmp_path, "starting", "unhealthy: starting: connection refused")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2.5)  # the watcher polls every second: two polls saw a non-fatal verdict
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "fail-fast" not in out
    assert proc.returncode == 128 + signal.SIGTERM


def test_fail_fast_can_be_turned_off(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--wait", BWSTACK_FAIL_FAST="0")
    _wait_for_start(tmp_path)
    _write_verdict(tmp_path, "assertion", "unhealthy: assertion: dsa_kv_cache_store_fp8")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "fail-fast" not in out


def test_linger_keeps_the_container_up_after_a_crash_until_sigterm(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--exit", "7", BWSTACK_LINGER="60s")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2)  # crashed at once, but lingers
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 7
    assert "waiting up to 125s for the healthcheck to record the failure" in out


def test_linger_is_not_ended_by_a_starting_verdict(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--exit", "7", BWSTACK_LINGER="60s")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.5)
    # a probe from before the crash (the server was still loading) says nothing about the crash
    state = {
        "schema": 1,
        "verdict": {"class": "starting", "line": "unhealthy: starting: refused", "time": time.time()},
    }
    (tmp_path / "hc-state.json").write_text(json.dumps(state))
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def test_linger_ends_once_a_probe_recorded_the_crash(tmp_path: Path) -> None:
    proc = _start_serve(tmp_path, "--exit", "7", BWSTACK_LINGER="60s")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.5)
    # a probe after the crash records its verdict (warmup.py writes the state file, then prints)
    state = {
        "schema": 1,
        "verdict": {"class": "crash", "line": "unhealthy: crash: refused", "time": time.time()},
    }
    (tmp_path / "hc-state.json").write_text(json.dumps(state))
    proc.wait(timeout=10)  # well before the 125 s cap
    assert proc.returncode == 7


def test_no_linger_after_a_clean_exit(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--exit", "0", BWSTACK_LINGER="60s")
    assert proc.returncode == 0
    assert "waiting up to" not in proc.stdout


def test_env_file_switches_reach_the_child_without_overriding(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(
        "# variant switches\nSGLANG_ENABLE_JIT_DEEPGEMM=0\nFLASHINFER_DISABLE_VERSION_CHECK=1\n\n"
    )
    dump = tmp_path / "dump.json"
    proc = run_serve(
        tmp_path,
        "--dump",
        str(dump),
        "--dump-env",
        BWSTACK_ENV_FILE=str(env_file),
        FLASHINFER_DISABLE_VERSION_CHECK="0",
    )
    assert proc.returncode == 0, proc.stdout
    env = json.loads(dump.read_text())["env"]
    assert env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert env["FLASHINFER_DISABLE_VERSION_CHECK"] == "0"  # the container's own env wins


HOSTILE_KEY = "sk-\\back'single\"double\ttab-0123456789"


def test_a_key_with_backslash_quotes_and_tab_leaves_no_printed_trace(tmp_path: Path) -> None:
    """SGLang prints its ServerArgs repr (api_key='sk-\\\\back\\'single"double\\ttab…'): the escaped forms are
    redacted too, not only the raw bytes."""
    (tmp_path / "api_key").write_text(HOSTILE_KEY + "\n")
    dump = tmp_path / "child.json"
    proc = run_serve(tmp_path, "--model-path", "m", "--dump", str(dump), "--leak")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(dump.read_text())["api_key"] == HOSTILE_KEY  # the YAML config carried it exactly
    forms = [
        HOSTILE_KEY,
        repr(HOSTILE_KEY)[1:-1],
        json.dumps(HOSTILE_KEY)[1:-1],
        "back\\'single",
        "back'single",
    ]
    for text in (proc.stdout, proc.stderr, log_text(tmp_path)):
        for form in forms:
            assert form not in text, form
        assert "single" not in text and "0123456789" not in text
    assert "api_key='***'" in proc.stdout


def test_the_key_is_not_in_the_servers_argv_while_it_runs(tmp_path: Path) -> None:
    """What ``ps`` shows every local user: /proc/<pid>/cmdline of the wrapper and of the server."""
    (tmp_path / "api_key").write_text(HOSTILE_KEY)
    proc = subprocess.Popen(
        [sys.executable, str(SERVE), "--model-path", "m", "--wait"],
        stdout=subprocess.PIPE,
        text=True,
        env=serve_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        stream = cast("IO[str]", proc.stdout)
        while "fake: ready" not in stream.readline():
            pass
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert children
        for pid in [str(proc.pid), *children]:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            assert "single" not in cmdline and "0123456789" not in cmdline
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            assert "0123456789" not in environ
        config = Path(Path(f"/proc/{children[0]}/cmdline").read_bytes().decode().split("\0")[-2])
        assert config.stat().st_mode & 0o777 == 0o600 and config.parent.stat().st_mode & 0o777 == 0o700
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_secret_that_is_not_a_regular_file_stops_the_start(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "api_key"
    if kind == "fifo":
        os.mkfifo(path)  # would block a plain open() forever
    else:
        path.mkdir()
    dump = tmp_path / "child.json"
    started = time.monotonic()
    proc = run_serve(tmp_path, "--dump", str(dump))
    assert time.monotonic() - started < 30
    assert proc.returncode == serve.EXIT_REFUSED
    assert (
        proc.stdout
        == f"bwstack-serve: not starting: the secret file {path} is not a regular file; refusing to start the server without it (make it readable for uid {os.getuid()}, or remove it)\n"
    )
    assert not dump.exists()  # the server never ran


def test_an_unreadable_secret_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    """The compose case: a 0600 file of another user, bind-mounted; the serving user cannot read it."""
    folder = Path(tempfile.mkdtemp(prefix="bwstack-serve-test-"))
    try:
        folder.chmod(0o777)  # the unprivileged serving user below writes its log and dump here
        key = folder / "api_key"
        key.write_text(KEY)
        key.chmod(0o600)
        dump = folder / "child.json"
        env = serve_env(folder)
        run_as: dict[str, Any] = {}
        python = sys.executable
        if os.geteuid() == 0:  # root reads any file: run the wrapper as the image's serving user instead
            run_as = {"user": 10001, "group": 10001, "extra_groups": []}
            python = "/usr/bin/python3"  # the wrapper is stdlib only; a venv under /root is closed to 10001
        else:
            key.chmod(0)
        proc = subprocess.run(
            [python, str(SERVE), "--dump", str(dump)],
            capture_output=True, text=True, timeout=60, env=env, cwd=folder, **run_as,  # type: ignore[call-overload]
        )  # fmt: skip
        assert proc.returncode == serve.EXIT_REFUSED, proc.stdout + proc.stderr
        assert proc.stdout.startswith(f"bwstack-serve: not starting: cannot read the secret file {key}: ")
        assert "Permission denied" in proc.stdout and len(proc.stdout.splitlines()) == 1
        assert KEY not in proc.stdout and not dump.exists()
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_a_config_in_the_arguments_is_refused_when_the_key_needs_its_own(tmp_path: Path) -> None:
    (tmp_path / "api_key").write_text(KEY)
    proc = run_serve(tmp_path, "--config", "mine.yaml")
    assert proc.returncode == serve.EXIT_REFUSED
    assert "the arguments hold --config" in proc.stdout and KEY not in proc.stdout


def test_readiness_poll_ignores_proxies_and_redirects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server is local: http_proxy must not route 127.0.0.1 elsewhere, and a redirect is not a 200."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # a dead proxy: using it would fail
    monkeypatch.setenv("no_proxy", "")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with serve.LOCAL_OPENER.open(base + "/elsewhere", timeout=5) as resp:
            assert resp.status == 200  # straight to the server, not through the proxy
        with pytest.raises(urllib.error.HTTPError) as caught:
            serve.LOCAL_OPENER.open(base + "/health", timeout=5)
        assert caught.value.code == 302  # not followed to the 200 at /elsewhere
    finally:
        server.shutdown()
        server.server_close()


def test_a_key_beginning_with_a_dash_is_refused_before_start(tmp_path: Path) -> None:
    """SGLang's --config parser hands the key to argparse as ``--api-key -x...``, which takes it for an
    option (tests/real/test_real_server.py shows the real parser's error): refused in one line, no start."""
    secret = "-x" + KEY
    (tmp_path / "api_key").write_text(secret)
    dump = tmp_path / "child.json"
    proc = run_serve(tmp_path, "--dump", str(dump))
    assert proc.returncode == serve.EXIT_REFUSED and not dump.exists()
    assert proc.stdout.startswith(f"bwstack-serve: not starting: {tmp_path / 'api_key'}: the API key begins")
    assert len(proc.stdout.splitlines()) == 1 and secret not in proc.stdout and KEY not in proc.stdout
