#!/usr/bin/env python3
"""The serving image's entrypoint: run ``python3 -m sglang.launch_server <argv>`` and supervise it.

- tees the server's merged stdout/stderr to stdout (docker logs) and to a size-bounded log file
  (``BWSTACK_LOG``, rotated once to ``<log>.1`` at ``BWSTACK_LOG_MAX_BYTES`` and at every start) that the
  healthcheck scans;
- passes the API key read from ``BWSTACK_API_KEY_FILE`` to SGLang in a ``--config`` YAML file that only the
  serving user can read (never on the command line, where ``ps`` shows it to every local user; removed once
  the server answers), exports ``HF_TOKEN`` read from ``BWSTACK_HF_TOKEN_FILE`` to the child only; every
  printed form of both (repr, JSON escapes, quotes) is redacted from everything it writes; a secret file that
  exists but cannot be read stops the start (exit 2, one line naming the file): never serve without the key;
- forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT to the server, reaps orphans (it may be PID 1) and exits with the
  server's status (128+N when the server was killed by signal N);
- removes the healthcheck state file at start, so a restarted container starts as ``starting``;
- fail-fast (``BWSTACK_FAIL_FAST``, on unless ``0``): when the healthcheck records a verdict that does not
  heal (NaN, asserts, unsupported arch, backend override, ...: ``signatures.FAIL_FAST_CLASSES``) it stops the
  server and exits with status 3, so the container stops instead of serving garbage (Docker: unhealthy);
- readiness probe (``BWSTACK_READY_PROBE``, on unless ``0``): the moment SGLang answers ``GET /health`` 200
  (its own warmup done), runs ``warmup.py --mode full`` once itself (sampled decode + the quality probe, with
  the calibrated baseline from the environment) and records its verdict in the healthcheck's state file, where
  Docker's probes read it; a fatal class stops the server at once instead of at Docker's next probe;
- linger (``BWSTACK_LINGER`` = the healthcheck interval, e.g. ``30s``): after the server dies on its own,
  stays up until one more health probe has recorded the crash's class in ``docker inspect`` (at most two
  intervals plus 5 s; SIGTERM ends it);
- hang watchdog (``BWSTACK_HANG_WATCH``, on unless ``0``): adds ``--enable-metrics`` to the server's argv
  and, once SGLang is ready, reads its ``/metrics`` every second (healthchecks/progress.py); requests in
  flight with no token for ``BWSTACK_HC_HANG_AFTER`` seconds (the profile's derived bound) are
  ``unhealthy: hang: ...``, written beside the state file for the healthcheck, and fail-fast stops the
  server on it;
- exports the variant's env switches from ``BWSTACK_ENV_FILE`` (``KEY=VALUE`` lines) to the child, where the
  environment does not set them already.

``BWSTACK_SERVER_MODULE`` replaces ``sglang.launch_server`` (tests only). Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, BinaryIO

if not __package__:  # run as a script: make the folder above importable so "healthchecks" resolves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from healthchecks import common, imagelayout, norestart, progress, signatures, verdict

PREFIX = verdict.MARKER
READ_BYTES = 64 * 1024
SPLIT_AT = 64 * 1024  # an unterminated run of output longer than this is written in pieces
SECRET_FLAGS = ("--api-key", "--admin-api-key")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
READER_GRACE_S = 5.0
WATCH_INTERVAL_S = 1.0
STOP_GRACE_S = 30.0
READY_POLL_S = 0.5
READY_PROBE_TIMEOUT_S = 120  # the first real request may JIT-compile kernels
READY_RETRIES = 5  # a probe that finds the server still "starting" (503 race) is repeated
#: where the API key's private ``--config`` folder is made (default: the temp folder)
ENV_RUN_DIR = "BWSTACK_RUN_DIR"
EXIT_REFUSED = 2  # a secret file exists but is unreadable, or the key cannot be passed safely
WARMUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warmup.py")


class BoundedLog:
    """An append-only log file that rotates to ``<path>.1`` when it would grow past ``max_bytes``."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._fh: BinaryIO | None = None
        self._size = 0
        self.error: str | None = None
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            if os.path.exists(path) and os.path.getsize(path) > 0:
                os.replace(path, path + ".1")  # the previous server run
            self._fh = open(path, "ab")  # noqa: SIM115 - kept open for the server's lifetime
        except OSError as exc:
            self.error = f"cannot write the server log {path}: {exc.strerror or exc}"

    def write(self, data: bytes) -> None:
        """Append ``data``, rotating first when it would pass the bound; gives up quietly on disk errors."""
        if self._fh is None:
            return
        try:
            if self._size > 0 and self._size + len(data) > self.max_bytes:
                self._fh.close()
                os.replace(self.path, self.path + ".1")
                self._fh = open(self.path, "ab")  # noqa: SIM115
                self._size = 0
            self._fh.write(data)
            self._fh.flush()
            self._size += len(data)
        except OSError as exc:
            self.error = f"server log write failed: {exc.strerror or exc}"
            self._fh = None

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None


class Tee:
    """Writes redacted output to stdout and the bounded log; thread-safe."""

    def __init__(self, log: BoundedLog, secrets: list[str]) -> None:
        self.log = log
        forms = {form for secret in secrets for form in common.printed_forms(secret)}
        self.secrets = [f.encode() for f in sorted(forms, key=lambda f: (-len(f), f))]
        self.keep = max((len(s) for s in self.secrets), default=1) - 1
        self._lock = threading.Lock()

    def redact(self, data: bytes) -> bytes:
        """Replace every secret with ``***``."""
        for secret in self.secrets:
            data = data.replace(secret, common.REDACTED.encode())
        return data

    def emit(self, data: bytes) -> None:
        """Write already-redacted bytes to both sinks. On stdout a tqdm bar's ``\r`` becomes a line end:
        Docker's log driver ends a line only at ``\n``, so ``docker logs`` would show no shard or batch-size
        progress until the bar closes (healthchecks/phases.py reads it live)."""
        with self._lock:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.buffer.write(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
                sys.stdout.buffer.flush()
            self.log.write(data)

    def say(self, message: str) -> None:
        """One line of the wrapper's own, with the ``bwstack-serve:`` prefix."""
        self.emit(self.redact(f"{verdict.marker(message)}\n".encode()))

    def pump(self, fd: int) -> None:
        """Copy the child's output until EOF, cutting at line ends (\\n or \\r) and redacting secrets."""
        buf = b""
        while True:
            try:
                chunk = os.read(fd, READ_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                if buf:
                    self.emit(self.redact(buf))
                return
            buf = self.redact(buf + chunk)
            cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
            if cut == 0 and len(buf) > SPLIT_AT:
                cut = len(buf) - self.keep  # the tail may hold the start of a secret
            if cut > 0:
                self.emit(buf[:cut])
                buf = buf[cut:]


def redact_argv(argv: list[str]) -> list[str]:
    """The argv with the values of --api-key / --admin-api-key replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(common.REDACTED)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif arg.split("=", 1)[0] in SECRET_FLAGS and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=" + common.REDACTED)
        else:
            out.append(arg)
    return out


def argv_secrets(argv: list[str]) -> list[str]:
    """Secrets the operator put on the command line themselves (redacted from the output too)."""
    found = []
    for i, arg in enumerate(argv):
        if arg in SECRET_FLAGS and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif "=" in arg and arg.split("=", 1)[0] in SECRET_FLAGS:
            found.append(arg.split("=", 1)[1])
    return [s for s in found if s]


@dataclass
class ChildSpec:
    """How the server is started: argv and env for the child, secrets to redact, the printable command, the
    private ``--config`` file that carries the API key (removed once the server has read it)."""

    argv: list[str]
    env: dict[str, str]
    secrets: list[str]
    shown: str
    key_config: str | None = None

    def forget_key_config(self) -> None:
        """Remove the API key's config file and its private folder (idempotent)."""
        if self.key_config is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.key_config)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.key_config))
        self.key_config = None


class StartRefused(Exception):
    """The server must not start (e.g. a secret file exists but is unreadable); the message is one line."""


def write_key_config(key: str) -> str:
    """A YAML file ``api-key: "<key>"`` in a fresh folder only this user can enter (mode 0700, file 0600).

    SGLang's ``--config`` (0.5.9 ``server_args_config_parser``, 0.5.23 ``utils/server_args_config_parser``)
    reads it with ``yaml.safe_load`` into the argparse destination ``--api-key`` fills; a JSON string is a
    YAML double-quoted scalar, so backslashes, quotes and control characters survive exactly."""
    folder = tempfile.mkdtemp(prefix="bwstack-serve-", dir=common.env_or(ENV_RUN_DIR, tempfile.gettempdir()))
    path = os.path.join(folder, "api-key.yaml")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"api-key: {json.dumps(key, ensure_ascii=False)}\n")
    return path


def build_child(args: list[str]) -> ChildSpec:
    """The child's argv and env (API key and HF token injected), and what the start line may show."""
    module = common.env_or(common.ENV_SERVER_MODULE, common.DEFAULT_SERVER_MODULE)
    key_file = common.env_or(common.ENV_API_KEY_FILE, common.DEFAULT_API_KEY_FILE)
    token_file = common.env_or(common.ENV_HF_TOKEN_FILE, common.DEFAULT_HF_TOKEN_FILE)
    argv = [sys.executable, "-m", module, *args]
    env = dict(os.environ)
    for name, value in read_env_file(common.env_or(common.ENV_ENV_FILE, "")).items():
        env.setdefault(name, value)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a SIGKILLed server must not lose buffered output
    secrets = argv_secrets(args)
    notes = []
    try:
        key = common.load_secret(key_file)
        token = common.load_secret(token_file)
    except common.SecretUnreadable as exc:
        raise StartRefused(
            f"{exc}; refusing to start the server without it (make it readable for uid "
            f"{os.getuid()}, or remove it)"
        ) from None
    key_config = None
    problem = common.api_key_problem(key) if key else None
    if problem is not None:
        raise StartRefused(f"{key_file}: {problem}")
    if key and any(a.split("=", 1)[0] == "--api-key" for a in args):
        notes.append(f"--api-key given on the command line, {key_file} not used")
    elif key:
        if any(a.split("=", 1)[0] == "--config" for a in args):
            raise StartRefused(
                f"the arguments hold --config, and the API key from {key_file} reaches SGLang through its "
                "own --config file (SGLang reads one): move those options into extra_args"
            )
        try:
            key_config = write_key_config(key)
        except OSError as exc:
            raise StartRefused(
                f"cannot write the API key's private config file: {exc.strerror or exc}"
            ) from None
        argv += ["--config", key_config]
        secrets.append(key)
        notes.append(f"--api-key from {key_file}, passed in a private --config file")
    if token:
        env["HF_TOKEN"] = token
        notes.append(f"HF_TOKEN from {token_file}")
    secrets += [env[name] for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") if env.get(name)]
    shown = shlex.join(["python3", "-m", module, *redact_argv(args)])
    if notes:
        shown += f" ({'; '.join(notes)})"
    return ChildSpec(argv=argv, env=env, secrets=secrets, shown=shown, key_config=key_config)


def read_env_file(path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of the image's env-switch file (blank lines and ``#`` comments skipped)."""
    if not path:
        return {}
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for raw in fh:
                line = raw.strip()
                key, sep, value = line.partition("=")
                if line and not line.startswith("#") and sep and key.replace("_", "").isalnum():
                    out[key] = value
    except OSError:
        return {}
    return out


class FailFast:
    """Watches the healthcheck's state file; on a verdict that does not heal, stops the server."""

    def __init__(self, state_file: str, tee: Tee, pid: int) -> None:
        self.state_file = state_file
        self.tee = tee
        self.pid = pid
        self.triggered: str | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.done.wait(WATCH_INTERVAL_S):
            found = verdict.state_verdict(self.state_file)
            if found is None or found[0].cls not in signatures.FAIL_FAST_CLASSES:
                continue
            self.stop(f"the healthcheck reported '{found[0].line()}'", found[0])
            return

    def stop(self, why: str, found: verdict.Verdict) -> None:
        """Stop the server (SIGTERM, SIGKILL after the grace); only the first caller acts. The verdict is
        recorded beside the state file for the healthcheck to repeat while the server is gone."""
        with self._lock:
            if self.triggered is not None:
                return
            self.triggered = found.line()
        self.tee.say(f"fail-fast: {why}; stopping the server")
        verdict.write_record(self.state_file + common.STOPPED_SUFFIX, found, time.time())
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        if not self.done.wait(STOP_GRACE_S):
            self.tee.say(f"fail-fast: server still running after {STOP_GRACE_S:g}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def probe_url(args: list[str]) -> str:
    """Where the readiness probe finds the server: ``BWSTACK_HC_URL``, else 127.0.0.1 and the ``--port``."""
    port = "30000"
    for i, arg in enumerate(args):
        if arg == "--port" and i + 1 < len(args):
            port = args[i + 1]
        elif arg.startswith("--port="):
            port = arg.split("=", 1)[1]
    return common.env_or(common.ENV_HC_URL, f"http://127.0.0.1:{port}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer of its own (not 200), never a request to somewhere else."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


#: the readiness poll's opener: the server is local, so no proxy from the environment (http_proxy would
#: otherwise route 127.0.0.1 through it) and no redirect is followed
LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def wait_ready(url: str, done: threading.Event) -> bool:
    """Polls GET /health until 200; False when the server is gone first."""
    while not done.is_set():
        try:
            with LOCAL_OPENER.open(url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return True
        except (OSError, urllib.error.HTTPError):
            pass
        done.wait(READY_POLL_S)
    return False


def with_metrics(args: list[str]) -> list[str]:
    """The server argv with ``--enable-metrics`` (the hang watchdog reads SGLang's counters)."""
    return args if "--enable-metrics" in args else [*args, "--enable-metrics"]


class HangWatch:
    """Samples /metrics every second once ready; a stall past the bound is recorded and fails fast."""

    def __init__(self, url: str, tee: Tee, watcher: FailFast, fail_fast: bool, stall_after: float) -> None:
        self.url = url
        self.tee = tee
        self.watcher = watcher
        self.fail_fast = fail_fast
        self.stall_after = stall_after
        self.path = watcher.state_file + progress.SUFFIX
        self.tracker = progress.Tracker()
        key_file = common.env_or(common.ENV_API_KEY_FILE, common.DEFAULT_API_KEY_FILE)
        self.api_key = common.read_secret(key_file)

    def _scrape(self) -> progress.Sample | None:
        request = urllib.request.Request(self.url + "/metrics")  # noqa: S310 - http(s) URL
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with LOCAL_OPENER.open(request, timeout=5) as resp:
                return progress.parse(resp.read(4 << 20).decode("utf-8", errors="replace"))
        except (OSError, urllib.error.HTTPError, ValueError):
            return None

    def run(self) -> None:
        if not wait_ready(self.url, self.watcher.done):
            return
        if self._scrape() is None:
            self.tee.say("hang watchdog off: GET /metrics has no SGLang counters")
            return
        self.tee.say(f"hang watchdog on: requests in flight with no token for {self.stall_after:g} s = hang")
        while not self.watcher.done.wait(WATCH_INTERVAL_S):
            sample = self._scrape()
            if sample is None:
                continue  # the main process is busy or gone: the healthcheck and the log speak for it
            stalled = self.tracker.update(sample, time.monotonic())
            hang = progress.hang_verdict(sample.in_flight, stalled) if stalled >= self.stall_after else None
            line = hang.line() if hang is not None else None
            with contextlib.suppress(OSError):
                common.write_json_atomic(
                    self.path,
                    progress.record(sample.in_flight, stalled, self.stall_after, WATCH_INTERVAL_S, line),
                )
            if hang is not None and self.fail_fast:
                self.watcher.stop(f"the hang watchdog reported '{line}'", hang)
                return


class Readiness:
    """Runs one full healthcheck as soon as SGLang reports ready; a fatal verdict stops the server at once."""

    def __init__(
        self,
        url: str,
        tee: Tee,
        watcher: FailFast,
        fail_fast: bool,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.tee = tee
        self.watcher = watcher
        self.fail_fast = fail_fast
        self.on_ready = on_ready
        self.verdict: str | None = None

    def _ready(self) -> bool:
        return wait_ready(self.url, self.watcher.done)

    def _probe(self) -> verdict.Verdict:
        argv = [
            sys.executable,
            WARMUP,
            "--mode",
            "full",
            "--url",
            self.url,
            "--timeout",
            str(READY_PROBE_TIMEOUT_S),
        ]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=READY_PROBE_TIMEOUT_S + 30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return verdict.Verdict("timeout", f"readiness probe did not finish ({type(exc).__name__})")
        found = verdict.Verdict.parse(done.stdout)
        if found is None:
            return verdict.Verdict("warmup_failed", f"readiness probe printed nothing ({done.returncode})")
        return found

    def run(self) -> None:
        if not self._ready():
            return
        if self.on_ready is not None:
            self.on_ready()  # SGLang has parsed its arguments: the key's config file is no longer needed
        found = verdict.Verdict("starting", "readiness probe not run")
        for _attempt in range(READY_RETRIES):
            found = self._probe()
            if found.cls != "starting" or self.watcher.done.is_set():
                break
            self.watcher.done.wait(1.0)
        self.verdict = found.line()
        self.tee.say(verdict.readiness_message(self.verdict))
        if self.fail_fast and found.cls in signatures.FAIL_FAST_CLASSES and not self.watcher.done.is_set():
            self.watcher.stop(f"the readiness probe reported '{self.verdict}'", found)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def wait_for(pid: int) -> int:
    """Reap children (orphans too, as PID 1) until ``pid`` exits; returns its exit code (128+N if killed)."""
    while True:
        try:
            reaped, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        if reaped == pid:
            return _exit_code(status)


def main(argv: list[str] | None = None) -> int:
    """Start the server, tee its output, forward signals; returns the server's exit code."""
    args = sys.argv[1:] if argv is None else argv
    state_file = common.env_or(common.ENV_HC_STATE, imagelayout.HC_STATE)
    for stale in (state_file, state_file + common.STOPPED_SUFFIX, state_file + progress.SUFFIX):
        with contextlib.suppress(OSError):
            os.unlink(stale)
    log_path = common.env_or(common.ENV_LOG, imagelayout.SERVER_LOG)
    max_bytes = _log_max_bytes()
    hang_watch = common.env_or(common.ENV_HANG_WATCH, "1") != "0"
    spec_key = norestart.digest(args, os.environ)
    if _not_again(spec_key, state_file, BoundedLog(log_path, max_bytes)):
        return common.EXIT_FAIL_FAST
    try:
        spec = build_child(with_metrics(args) if hang_watch else args)
    except StartRefused as exc:
        line = " ".join(str(exc).split())
        print(f"{PREFIX} not starting: {line}", flush=True)
        BoundedLog(log_path, max_bytes).write(f"{PREFIX} not starting: {line}\n".encode())
        return EXIT_REFUSED
    tee = Tee(BoundedLog(log_path, max_bytes), spec.secrets)
    if tee.log.error:
        tee.say(f"warning: {tee.log.error}; output goes to stdout only")
    tee.say(f"{verdict.STARTING} {spec.shown}")
    try:
        proc = subprocess.Popen(
            spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=spec.env,
        )
    except OSError as exc:
        spec.forget_key_config()
        tee.say(f"{verdict.CRASHED}: cannot start {spec.argv[0]}: {exc.strerror or exc}")
        return 127
    assert proc.stdout is not None
    forwarded: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        forwarded.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    reader = threading.Thread(target=tee.pump, args=(proc.stdout.fileno(),), daemon=True)
    reader.start()
    watcher = FailFast(state_file, tee, proc.pid)
    fail_fast = common.env_or(common.ENV_FAIL_FAST, "1") != "0"
    if fail_fast:
        threading.Thread(target=watcher.run, daemon=True).start()
    readiness: Readiness | None = None
    if common.env_or(common.ENV_READY_PROBE, "1") != "0":
        readiness = Readiness(probe_url(args), tee, watcher, fail_fast, on_ready=spec.forget_key_config)
        threading.Thread(target=readiness.run, daemon=True).start()
    if hang_watch:
        stall_after = common.parse_seconds(
            common.env_or(common.ENV_HC_HANG_AFTER, ""), common.DEFAULT_HC_HANG_AFTER
        )
        hang = HangWatch(probe_url(args), tee, watcher, fail_fast, stall_after)
        threading.Thread(target=hang.run, daemon=True).start()
    code = wait_for(proc.pid)
    spec.forget_key_config()
    exited_at = time.time()
    watcher.done.set()
    reader.join(READER_GRACE_S)
    if watcher.triggered:
        tee.say(verdict.stopped_message(code, watcher.triggered or ""))
        _remember(tee, spec_key, verdict.Verdict.parse(watcher.triggered))
        # stay until Docker's probes have recorded the stop `retries` times (they repeat it), so Docker's own
        # status is `unhealthy` with the class before the container exits
        linger(tee, forwarded, state_file, exited_at, after_exit=True, streak=_retries())
        tee.log.close()
        return common.EXIT_FAIL_FAST
    if forwarded:
        names = ", ".join(signal.Signals(s).name for s in dict.fromkeys(forwarded))
        tee.say(f"server stopped: exit status {code} after {names}")
    elif code != 0:
        tee.say(f"{verdict.CRASHED}: exit status {code}" + _signal_note(code))
    else:
        tee.say("server exited: exit status 0")
    if code != 0 and not forwarded:
        found = signatures.classify_file(log_path)  # the root cause the server died of, from its own log
        _remember(tee, spec_key, verdict.Verdict(found.cls, found.text) if found is not None else None)
        linger(tee, forwarded, state_file, exited_at)
    tee.log.close()
    return code


def _log_max_bytes() -> int:
    """``BWSTACK_LOG_MAX_BYTES`` (at least 1 KiB), else the default."""
    try:
        return max(1024, int(common.env_or(common.ENV_LOG_MAX_BYTES, str(common.DEFAULT_LOG_MAX_BYTES))))
    except ValueError:
        return common.DEFAULT_LOG_MAX_BYTES


def _not_again(key: str, state_file: str, log: BoundedLog) -> bool:
    """A start of a spec whose failure a restart cannot heal: say so (stdout, log), record the verdict for the
    healthcheck, and True (the caller exits without loading the model)."""
    remembered = norestart.recalled(key, os.environ)
    if remembered is None:
        return False
    line = norestart.refusal(key, remembered)
    print(f"{PREFIX} not starting: {line}", flush=True)
    log.write(f"{PREFIX} not starting: {line}\n".encode())
    verdict.write_record(state_file + common.STOPPED_SUFFIX, remembered["verdict"], time.time())
    return True


def _remember(tee: Tee, key: str, found: verdict.Verdict | None) -> None:
    """Remember a verdict a restart cannot heal (healthchecks/norestart.py), and say so."""
    if found is not None and norestart.remember(key, found, os.environ) is not None:
        tee.say(
            f"remembered '{found.cls}' for this launch spec (digest {key}): a restart of the same spec exits "
            f"at once instead of loading the model again ('bwstack up --retry' clears it)"
        )


def _retries() -> int:
    """Docker's ``retries`` of the rendered healthcheck (``BWSTACK_HC_RETRIES``; 1 when unset)."""
    try:
        return max(1, min(10, int(common.env_or(common.ENV_HC_RETRIES, "1"))))
    except ValueError:
        return 1


def linger(
    tee: Tee,
    forwarded: list[int],
    state_file: str,
    exited_at: float,
    *,
    after_exit: bool = False,
    streak: int = 1,
) -> None:
    """After a crash, stay up until health probes have recorded a verdict (its class lands in docker inspect).

    ``BWSTACK_LINGER`` is the healthcheck interval: the wait ends one second after the healthcheck's failing
    streak reaches ``streak`` with a verdict newer than the crash (one probe after a crash; Docker's
    ``retries`` after a fail-fast stop, so Docker's status turns ``unhealthy``), and at the latest after
    ``streak + 1`` intervals plus 5 s per probe. SIGTERM ends it at once.
    """
    interval = common.parse_seconds(common.env_or(common.ENV_LINGER, "0"), 0.0)
    if interval <= 0 or forwarded:
        return
    cap = (streak + 1) * interval + 5.0 * streak
    tee.say(f"waiting up to {cap:g}s for the healthcheck to record the failure")
    stop = threading.Event()
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, frame: stop.set())
    deadline = time.monotonic() + cap
    while not stop.wait(0.25) and time.monotonic() < deadline:
        # a failure verdict from the last interval: the probe that saw the crash (its decode may have caused
        # it, finishing just before the process was gone) or one after it
        cls, when, failing = _last_verdict(state_file)
        since = exited_at if after_exit else exited_at - interval
        if cls not in ("", "healthy", "starting") and when > since and failing >= streak:
            stop.wait(1.0)  # the probe prints after writing its state; let Docker record the output
            return


def _last_verdict(state_file: str) -> tuple[str, float, int]:
    """(class, time, failing streak) of the healthcheck's last verdict; ("", 0.0, 0) when there is none."""
    found = verdict.state_verdict(state_file)
    if found is None:
        return "", 0.0, 0
    data = verdict.read_json(state_file)
    failing = data.get("failing") if isinstance(data, dict) else None
    return found[0].cls, found[1], failing if isinstance(failing, int) else 1


def _signal_note(code: int) -> str:
    if code > 128:
        with contextlib.suppress(ValueError):
            return f" (killed by {signal.Signals(code - 128).name})"
    return ""


if __name__ == "__main__":
    sys.exit(main())
