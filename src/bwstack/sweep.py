"""The sweep: bring each profile up in turn, reach a verdict as soon as the evidence is decisive, tear down.

For one profile the sweep starts only its compose service and follows three streams at once, without fixed
sleeps: Docker events (health changes, healthcheck runs, the process exiting), the container's log stream
(classified line by line with the one failure catalog, ``healthchecks/signatures.py``) and, after each
healthcheck run, the container's health log. A :class:`Judge` turns these events into a verdict:

- ``healthy`` when Docker reports the container healthy (the healthcheck's first pass is always a full one:
  config check against /server_info plus a sampled decode) and the log holds no fatal signature;
- the log's root-cause class once a fatal signature appeared, after a short settle window (the traceback that
  names the root cause follows the first generic line) or as soon as the container exited;
- else the first failure class the healthcheck reported (``nan``, ``backend_override`` …) once the container
  exited (the serve wrapper's fail-fast), Docker marked it unhealthy, or ``healthcheck.retries`` runs in a
  row named the same class; ``crash`` for an exit without any class (``oom`` if OOM-killed);
- ``timeout`` when the per-profile budget is spent.

Results go to ``results.json`` (written atomically after every profile, see :mod:`bwstack.report`), with
``matrix.md`` and ``matrix.html``. ``--standin`` runs everything on the CPU stand-in image, each profile with
the fault its ``expect`` names, under a compose project of its own that is removed at the end. SIGINT and
SIGTERM remove the running container before the sweep exits.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import queue
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

from bwstack import operate, render, report, sglang_cli
from bwstack.compose import Project
from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.model import Stack
from healthchecks import signatures, startup, vocabulary

#: a fatal log signature waits this long for the root-cause line (the traceback follows the first crash line)
SETTLE_S = 5.0
#: after the process exited, how long the rest of the log stream may take to arrive
DRAIN_S = 3.0
#: this many consecutive healthcheck runs naming the same failure class decide (Docker's default retries)
CONFIRM_PROBES = 3
#: longest live status line (the elapsed-time column follows it)
STATUS_WIDTH = 100
#: server log lines kept per profile (for the context around the match and the tail)
KEEP_LINES = 20000
CONTEXT_BEFORE = 5
CONTEXT_AFTER = 10
TAIL_LINES = 30
HEALTH_KEEP = 5
#: per-profile budget on the stand-in when --timeout is not given
STANDIN_TIMEOUT_S = 120.0
#: seconds a stand-in container gets to stop before SIGKILL (the real stack keeps stop_grace_period)
STANDIN_STOP_S = 5
#: stand-in healthcheck timing (compose interpolates these; the real stack keeps profiles.yaml's values)
STANDIN_HC_ENV = {"BWSTACK_HC_INTERVAL": "1s", "BWSTACK_HC_TIMEOUT": "20s", "BWSTACK_HC_CHECK_TIMEOUT": "15"}
#: classes a log line may carry that are not a verdict while the server lives (SGLang's own /health timeout)
NOT_FATAL_IN_LOG = signatures.NOT_FATAL_WHILE_ALIVE
#: expected class -> the stand-in fault that produces it
STANDIN_FAULTS = {
    "healthy": "none",
    "nan": "nan",
    "assertion": "assertion",
    "unsupported_arch": "unsupported_arch",
    "device_assert": "device_assert",
    "oom": "oom",
    "backend_override": "override",
    "timeout": "hang",
}
#: GLM-5's first_k_dense_replace (sm120-backends.md §5) when no model-config fixture is available
GLM5_FIRST_K_DENSE = 3
#: /server_info keys per semantic field (docs/design.md), first present wins
EFFECTIVE_KEYS: dict[str, tuple[str, ...]] = {
    key: vocabulary.KEY_ALIASES.get(key, (key,)) for key in vocabulary.REPORT_FIELDS
}


# --- events and the verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    """One line of the container's output (without its line end)."""

    text: str


@dataclass(frozen=True)
class LogEnd:
    """The log stream ended (the container stopped)."""


@dataclass(frozen=True)
class HealthChange:
    """Docker's ``health_status`` event: ``starting``, ``healthy`` or ``unhealthy``."""

    status: str


@dataclass(frozen=True)
class Probe:
    """One finished healthcheck run from the container's health log."""

    exit_code: int
    output: str
    at: str = ""

    @property
    def verdict_class(self) -> str | None:
        """``healthy``, or the class of ``unhealthy: <class>: …``; None for other output."""
        return probe_class(self.output)


@dataclass(frozen=True)
class Exited:
    """The container's process exited (Docker's ``die`` event)."""

    exit_code: int | None


Event = LogLine | LogEnd | HealthChange | Probe | Exited


@dataclass(frozen=True)
class Verdict:
    """The outcome of one profile: class, what decided it, a one-line reason."""

    cls: str
    decided_by: str  # healthcheck | log | exit | unhealthy | timeout
    reason: str


#: the serve wrapper's line when its fail-fast stopped the server (healthchecks/serve.py)
FAIL_FAST_STOP = re.compile(r"server stopped by fail-fast \(exit status -?\d+\): unhealthy: ([a-z_]+):.*")


def probe_class(output: str) -> str | None:
    """The class of a healthcheck's last output line (``healthy: …`` / ``unhealthy: <class>: …``)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    if last.startswith("healthy:") or last == "healthy":
        return "healthy"
    if last.startswith("unhealthy:"):
        cls = last[len("unhealthy:") :].strip().split(":", 1)[0].strip()
        return cls if cls in signatures.CLASSES else None
    return None


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Judge:
    """The verdict state machine of one profile: feed it events (with the time they arrived), poll it.

    Decisive: healthy (no fatal log line), a fatal log signature (after ``settle_s``, or at once when the
    process has exited and the log stream ended), the process exiting (after the log drained, at most
    ``drain_s``), Docker's ``unhealthy``, or the budget. Pure logic: no Docker, no clock of its own.
    """

    def __init__(
        self,
        timeout_s: float,
        *,
        now: float,
        settle_s: float = SETTLE_S,
        drain_s: float = DRAIN_S,
        confirm: int = CONFIRM_PROBES,
        keep_lines: int = KEEP_LINES,
    ) -> None:
        self.scanner = signatures.Scanner()
        self.startup = startup.StartupReader()  # what the server log's startup says about the backends
        self.lines: deque[tuple[int, str]] = deque(maxlen=keep_lines)
        self.line_count = 0
        self.probes: list[Probe] = []
        self.health: str | None = None
        self.exit_code: int | None = None
        self.oom_killed = False
        #: the serve wrapper stopped the server on this healthcheck class (its fail-fast line in the log)
        self.fail_fast: tuple[str, str] | None = None
        self.exited = False
        self.log_ended = False
        self.healthy = False
        self.unhealthy = False
        self.timed_out = False
        self.timeout_s = timeout_s
        self.timeout_at = now + timeout_s
        self.settle_s = settle_s
        self.drain_s = drain_s
        self.confirm = max(1, confirm)
        self.settle_at: float | None = None
        self.decided_at: float | None = None

    # -- input --

    def feed(self, event: Event, now: float) -> None:
        """Take one event into account."""
        if self.decided_at is not None:
            return
        if isinstance(event, LogLine):
            self._line(event.text, now)
        elif isinstance(event, LogEnd):
            self.log_ended = True
        elif isinstance(event, HealthChange):
            self.health = event.status
            self.healthy = self.healthy or event.status == "healthy"
            self.unhealthy = self.unhealthy or event.status == "unhealthy"
        elif isinstance(event, Probe):
            self.probes.append(event)
        elif isinstance(event, Exited):
            self.exited = True
            self.exit_code = event.exit_code
            self._settle(now + self.drain_s)

    def add_probes(self, probes: Sequence[Probe]) -> None:
        """Health-log entries read after the fact (they decide nothing on their own)."""
        self.probes.extend(probes)

    def _line(self, text: str, now: float) -> None:
        had_fatal = self.fatal_log() is not None
        self.line_count += 1
        self.lines.append((self.line_count, text))
        self.scanner.feed(text.replace("\n", " ") + "\n")
        self.startup.feed(text)
        stopped = FAIL_FAST_STOP.search(text)
        if stopped and self.fail_fast is None:
            self.fail_fast = (stopped.group(1), stopped.group(0))
        if not had_fatal and self.fatal_log() is not None:
            self._settle(now + self.settle_s)

    def _settle(self, at: float) -> None:
        self.settle_at = at if self.settle_at is None else min(self.settle_at, at)

    # -- state --

    def fatal_log(self) -> signatures.Match | None:
        """The log's root-cause match, unless it is one that is no verdict while the server lives (generic
        traceback evidence, SGLang's /health timeout)."""
        match = self.scanner.result(strong_only=True)
        if match is None or match.cls in NOT_FATAL_IN_LOG:
            return None
        return match

    def poll(self, now: float) -> bool:
        """True once the verdict is decided (and from then on)."""
        if self.decided_at is not None:
            return True
        fatal = self.fatal_log()
        done = (
            (self.healthy and fatal is None)
            or (self.exited and self.log_ended)
            or self.unhealthy
            or (self.settle_at is not None and now >= self.settle_at)
            or self.confirmed_probe() is not None
        )
        if not done and now >= self.timeout_at:
            self.timed_out = True
            done = True
        if done:
            self.decided_at = now
        return done

    def wake_at(self) -> float:
        """When :meth:`poll` may change its answer without a new event."""
        return self.timeout_at if self.settle_at is None else min(self.timeout_at, self.settle_at)

    # -- output --

    def first_fatal_probe(self) -> Probe | None:
        """The first probe after the last healthy one that named a failure class."""
        start = 0
        for index, probe in enumerate(self.probes):
            if probe.verdict_class == "healthy":
                start = index + 1
        for probe in self.probes[start:]:
            if probe.verdict_class not in (None, "healthy", "starting"):
                return probe
        return None

    def confirmed_probe(self) -> Probe | None:
        """The last ``confirm`` probes when they all name one failure class: an image without fail-fast keeps
        running after the healthcheck's verdict, and Docker ignores failures during the start period."""
        if len(self.probes) < self.confirm:
            return None
        recent = self.probes[-self.confirm :]
        classes = {probe.verdict_class for probe in recent}
        if len(classes) == 1 and not classes & {None, "healthy", "starting"}:
            return recent[0]
        return None

    def verdict(self) -> Verdict:
        """The class and what decided it (call after :meth:`poll` returned True)."""
        fatal = self.fatal_log()
        if self.fail_fast is not None and (fatal is None or fatal.cls == "crash"):
            # the wrapper stopped the server on the healthcheck's verdict: a generic crash logged while it
            # stopped (a scheduler's broken pipe) is the stop's consequence, not the cause
            return Verdict(self.fail_fast[0], "healthcheck", self.fail_fast[1])
        if fatal is not None:
            return Verdict(fatal.cls, "log", fatal.text)
        if self.healthy:
            healthy = [p for p in self.probes if p.verdict_class == "healthy"]
            return Verdict("healthy", "healthcheck", last_line(healthy[-1].output) if healthy else "healthy")
        probe = self.first_fatal_probe()
        if probe is not None:
            return Verdict(str(probe.verdict_class), "healthcheck", last_line(probe.output))
        weak = self.scanner.result()
        if weak is not None:
            return Verdict(weak.cls, "log", weak.text)
        if self.exited:
            if self.oom_killed:
                return Verdict(
                    "oom", "exit", f"the kernel OOM killer stopped the container (exit {self.exit_code})"
                )
            return Verdict(
                "crash", "exit", f"the server exited with status {self.exit_code} before any verdict"
            )
        last = last_line(self.probes[-1].output) if self.probes else "no healthcheck run yet"
        if self.unhealthy:
            return Verdict(
                "timeout", "unhealthy", f"Docker marked the container unhealthy while starting ({last})"
            )
        return Verdict(
            "timeout", "timeout", f"no verdict within {self.timeout_s:g} s (last healthcheck: {last})"
        )

    def log_evidence(self) -> dict[str, Any] | None:
        """The root-cause match with the lines around it, or None."""
        match = self.scanner.result()
        if match is None:
            return None
        low, high = match.line - CONTEXT_BEFORE, match.line + CONTEXT_AFTER
        context = [{"line": n, "text": t} for n, t in self.lines if low <= n <= high]
        return {**match.to_dict(), "source": match.signature.source, "context": context}

    def startup_evidence(self, requested: Mapping[str, str]) -> dict[str, Any] | None:
        """The backends the server log's startup states (value, line, flag or SGLang) and every
        ``backend_override`` of the request; None when the log has no startup record."""
        found = self.startup.result()
        if not found.found:
            return None
        return {**found.to_dict(), "overrides": startup.compare(found, requested, "profile")}

    def log_tail(self, count: int = TAIL_LINES) -> list[str]:
        return [text for _, text in list(self.lines)[-count:]]

    def health_evidence(self) -> dict[str, Any]:
        return {
            "status": self.health,
            "probes": len(self.probes),
            "last": [
                {"exit": p.exit_code, "output": last_line(p.output), "at": p.at}
                for p in self.probes[-HEALTH_KEEP:]
            ],
        }


# --- the plan -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a sweep runs: the stack (profiles re-targeted when --variant is given) and the profile names."""

    stack: Stack
    names: list[str]
    skipped: list[str] = field(default_factory=list)


def make_plan(stack: Stack, names: Sequence[str], *, variant: str | None, standin: bool) -> Plan:
    """Check the requested profiles (unknown name -> UserError) and, with --variant, move them onto it."""
    chosen = list(dict.fromkeys(names)) or list(stack.profiles)
    for name in chosen:
        stack.profile(name)
    skipped: list[str] = []
    if variant is not None:
        stack.variant(variant)  # UserError for an unknown variant
        stack, chosen, skipped = _retarget(stack, chosen, variant, explicit=bool(names))
        if not chosen:
            raise UserError(
                f"no selected profile is valid for variant {variant} (skipped: {', '.join(skipped)})"
            )
    if standin:
        for name in chosen:
            standin_fault(stack, name)
    return Plan(stack=stack, names=chosen, skipped=skipped)


def _retarget(
    stack: Stack, names: list[str], variant: str, *, explicit: bool
) -> tuple[Stack, list[str], list[str]]:
    snapshot = stack.snapshot(variant)
    profiles = dict(stack.profiles)
    kept, skipped = [], []
    for name in names:
        problem = _variant_problem(stack, name, snapshot)
        if problem is None:
            profiles[name] = profiles[name].model_copy(update={"variant": variant})
            kept.append(name)
        elif explicit:
            raise UserError(f"profile {name!r} cannot run on variant {variant}: {problem}", file=stack.path)
        else:
            skipped.append(f"{name} ({problem})")
    retargeted = replace(
        stack, profiles=profiles, variants=dict(stack.variants), snapshots=dict(stack.snapshots)
    )
    return retargeted, kept, skipped


def _variant_problem(stack: Stack, name: str, snapshot: sglang_cli.Snapshot) -> str | None:
    profile = stack.profile(name)
    for key, value in profile.backends().items():
        if value is None:
            continue
        if snapshot.option_for(key) is None:
            return f"{snapshot.label} has no flag for {key}"
        if snapshot.spell_value(key, value) is None:
            return f"{key} {value!r} is not valid for {snapshot.label}"
    for problem in sglang_cli.check_argv(snapshot, [*stack.model.extra_args, *profile.extra_args]):
        if not problem.message.startswith("deprecated:"):
            return problem.message
    return None


def standin_fault(stack: Stack, name: str) -> str:
    """The stand-in fault that makes profile ``name`` show its expected class; UserError if there is none."""
    expect = stack.profile(name).expect
    fault = STANDIN_FAULTS.get(expect)
    if fault is None:
        raise UserError(
            f"the CPU stand-in cannot imitate '{expect}' (it imitates: {', '.join(STANDIN_FAULTS)}); "
            "leave this profile out of the --standin sweep",
            file=stack.path,
            line=stack.line_of("profiles", name, "expect"),
            field=f"profiles.{name}.expect",
        )
    return fault


# --- fast mode ----------------------------------------------------------------------------------------------


def model_config(stack: Stack) -> dict[str, Any] | None:
    """The model's HF config: the fixture ``data/model-configs/<name>/config.json`` when ``model.config`` is a
    name, else the file (or folder with a config.json) it names next to profiles.yaml; None when absent."""
    ref = stack.model.config
    if ref is None:
        return None
    if "/" in ref or ref.endswith(".json"):
        path = stack.root / ref
        path = path / "config.json" if path.is_dir() else path
        text = path.read_text(encoding="utf-8") if path.is_file() else None
    else:
        folder = resources.files("bwstack").joinpath(f"data/model-configs/{ref}")
        candidates = [
            folder.joinpath("config.json"),
            resources.files("bwstack").joinpath(f"data/model-configs/{ref}.json"),
        ]
        text = next((c.read_text(encoding="utf-8") for c in candidates if c.is_file()), None)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"model config {ref} is not JSON: {exc}", file=stack.path, field="model.config"
        ) from None
    return dict(data) if isinstance(data, dict) else None


def fast_layer_count(config: Mapping[str, Any] | None) -> int:
    """Fewest decoder layers that still hold one MoE layer.

    SGLang's DeepSeek-V2 family (GLM-5 included) makes layer ``i`` sparse when ``n_routed_experts`` is set,
    ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0`` (``_is_layer_sparse`` in
    ``srt/models/deepseek_v2.py``, read in the 0.5.23 wheel); ``--json-model-override-args`` is applied with
    ``config.update(...)`` before the model is built (0.5.9 ``hf_transformers_utils.py``, 0.5.23
    ``hf_transformers/config.py``).
    """
    cfg = config or {"first_k_dense_replace": GLM5_FIRST_K_DENSE}
    first_moe = int(cfg.get("first_k_dense_replace") or 0)
    frequency = max(1, int(cfg.get("moe_layer_freq") or 1))
    while first_moe % frequency:
        first_moe += 1
    layers = first_moe + 1
    total = int(cfg.get("num_hidden_layers") or 0)
    return min(layers, total) if total > 0 else layers


def apply_fast(argv: Sequence[str], layers: int) -> list[str]:
    """``argv`` plus ``--load-format dummy`` and ``num_hidden_layers`` merged into the model override JSON."""
    out: list[str] = []
    overrides: dict[str, Any] = {}
    skip = False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in ("--load-format", "--json-model-override-args"):
            if not eq:
                skip = True
                value = argv[index + 1] if index + 1 < len(argv) else ""
            if flag == "--json-model-override-args" and value.strip():
                with contextlib.suppress(json.JSONDecodeError):
                    parsed = json.loads(value)
                    overrides.update(parsed if isinstance(parsed, dict) else {})
            continue
        out.append(arg)
    overrides["num_hidden_layers"] = layers
    return [
        *out,
        "--load-format",
        "dummy",
        "--json-model-override-args",
        json.dumps(overrides, sort_keys=True),
    ]


def fast_override(stack: Stack, names: Sequence[str]) -> str:
    """A compose override file that replaces each service's command by its fast variant."""
    layers = fast_layer_count(model_config(stack))
    services = {name: {"command": apply_fast(render.build_argv(stack, name), layers)} for name in names}
    return (
        "# GENERATED by `bwstack sweep --fast`: dummy weights and fewer layers\n"
        + json.dumps({"services": services}, indent=2)
        + "\n"
    )


# --- Docker side --------------------------------------------------------------------------------------------


def docker_client() -> Any:
    """A Docker SDK client; ExternalError when no engine answers."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise ExternalError(f"cannot reach the Docker engine: {' '.join(str(exc).split())[:300]}") from None
    return client


def split_lines(buffer: str, chunk: str) -> tuple[list[str], str]:
    """Complete lines (cut at \\n or \\r) of ``buffer + chunk`` and the unfinished rest."""
    text = (buffer + chunk).replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    return parts[:-1], parts[-1]


class Streams:
    """Docker events and one container's log stream, read by daemon threads into one queue."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._closers: list[Callable[[], None]] = []
        self._threads: list[threading.Thread] = []

    def follow_events(self, since: float, labels: Sequence[str]) -> None:
        stream = self.client.events(
            since=int(since), filters={"type": "container", "label": list(labels)}, decode=True
        )
        self._closers.append(stream.close)
        self._spawn(self._pump_events, stream)

    def follow_logs(self, container: Any) -> None:
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        self._closers.append(stream.close)
        self._spawn(self._pump_logs, stream)

    def fetch_later(self, what: str, func: Callable[[], Any]) -> None:
        """Run ``func`` in a thread and queue its result as ``(what, result)``."""
        self._spawn(lambda: self.queue.put((what, func())))

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pump_events(self, stream: Any) -> None:
        with contextlib.suppress(Exception):
            for event in stream:
                self.queue.put(("docker", event))

    def _pump_logs(self, stream: Any) -> None:
        rest = ""
        with contextlib.suppress(Exception):
            for chunk in stream:
                lines, rest = split_lines(rest, chunk.decode("utf-8", errors="replace"))
                for line in lines:
                    self.queue.put(("log", line))
        if rest:
            self.queue.put(("log", rest))
        self.queue.put(("logend", None))

    def close(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                close()
        for thread in self._threads:
            thread.join(timeout=5)


def health_probes(attrs: Mapping[str, Any]) -> list[tuple[str, Probe]]:
    """(key, probe) for every entry of a container's health log (Docker keeps the last five)."""
    health = (attrs.get("State") or {}).get("Health") or {}
    probes = []
    for entry in health.get("Log") or []:
        key = f"{entry.get('Start')}|{entry.get('End')}"
        at = str(entry.get("End") or "")[:19].replace("T", " ")
        probes.append((key, Probe(int(entry.get("ExitCode", -1)), str(entry.get("Output") or ""), at)))
    return probes


def effective_from(info: Mapping[str, Any]) -> dict[str, str]:
    """The semantic backend fields SGLang actually resolved, from a /server_info answer."""
    found: dict[str, str] = {}
    for key, names in EFFECTIVE_KEYS.items():
        for name in names:
            if info.get(name) is not None:
                found[key] = str(info[name])
                break
    return found


def fetch_server_info(
    host: str, port: int, api_key: str | None, timeout: float = 3.0
) -> dict[str, Any] | None:
    """GET /server_info (then /get_server_info) on the published port; None when it does not answer."""
    for path in ("/server_info", "/get_server_info"):
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read(8 * 1024 * 1024)
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()
        if response.status == 404:
            continue
        if response.status != 200:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


# --- one profile --------------------------------------------------------------------------------------------


@dataclass
class Options:
    """Settings of one sweep run."""

    fast: bool
    standin: bool
    timeout_s: float
    keep: bool
    load_seconds: float | None


class Display:
    """Progress: a rich live view with per-profile elapsed time on a terminal, plain lines otherwise."""

    def __init__(self, console: Any, total: int) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.total = total
        self.live = bool(console.is_terminal)
        self.progress = Progress(
            SpinnerColumn(finished_text="•"),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            disable=not self.live,
        )
        self.task: Any = None
        self.label = ""
        self.last_status = ""

    def __enter__(self) -> Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def note(self, text: str) -> None:
        (self.progress.console if self.live else self.console).print(text, highlight=False, markup=False)

    def begin(self, index: int, name: str, detail: str) -> None:
        self.label = f"[{index}/{self.total}] {name}"
        self.last_status = ""
        if self.live:
            self.task = self.progress.add_task(_escape(f"{self.label} ({detail}): starting"), total=1)
        else:
            self.note(f"{self.label} ({detail}): starting")

    def status(self, text: str) -> None:
        if text == self.last_status:
            return
        self.last_status = text
        if self.live and self.task is not None:
            line = f"{self.label}: {text}"
            line = line if len(line) <= STATUS_WIDTH else line[: STATUS_WIDTH - 1] + "…"
            self.progress.update(self.task, description=_escape(line))

    def end(self, row: Mapping[str, Any]) -> None:
        outcome = "matches" if row["match"] else f"DOES NOT MATCH expect {row['expect']}"
        text = f"{self.label}: {row['verdict']} (decided by {row['decided_by']}) - {outcome}"
        if self.live and self.task is not None:
            style = "green" if row["match"] else "red"
            self.progress.update(self.task, description=f"[{style}]{_escape(text)}[/]", completed=1)
            self.progress.stop_task(self.task)
        else:
            self.note(f"{text} in {row['elapsed_s']:.1f} s")
        if row.get("next_try"):
            following = row["next_try"]
            self.note(f"  next to try: {following['profile'] or 'nothing'}: {following['why']}")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@dataclass
class Watch:
    """What the sweep follows for one profile: its container, the judge, the streams, what was seen."""

    name: str
    judge: Judge
    streams: Streams
    container: Any = None
    seen: set[str] = field(default_factory=set)
    info: dict[str, Any] | None = None
    fetching: bool = False


class Runner:
    """Runs the profiles of one sweep against one compose project."""

    def __init__(
        self, stack: Stack, project: Project, client: Any, options: Options, display: Display
    ) -> None:
        self.stack = stack
        self.project = project
        self.client = client
        self.options = options
        self.display = display
        self.current: str | None = None

    # -- lifecycle --

    def remove_service(self, service: str) -> None:
        """Stop and remove the service's container (``rm -sf``); the stand-in gets a short stop grace."""
        with contextlib.suppress(Exception):
            if not self.client.containers.list(all=True, filters={"label": self.labels(service)}):
                return  # nothing to remove: spare the two compose calls
        if self.options.standin:
            stop = ["stop", "--timeout", str(STANDIN_STOP_S), service]
            self.project.run(stop, profiles=[service], capture=True, timeout=300)
        self.project.run(["rm", "--stop", "--force", service], profiles=[service], capture=True, timeout=300)

    def remove_leftovers(self) -> None:
        """Containers of this project left by a killed run or by ``bwstack up``: same GPUs, same port."""
        for service in operate.stop_other_profiles(self.project, keep=""):
            self.display.note(f"removed the container of {service} (one profile at a time)")

    def finish(self) -> None:
        """After the last profile: remove what the sweep made (stand-in: all; real hardware: the network)."""
        if self.current is not None:
            with contextlib.suppress(Exception):
                self.remove_service(self.current)
            self.current = None
        if self.options.keep:
            return
        # stand-in and CPU sweeps leave nothing; on a GPU host the model cache volume is precious
        scratch = self.options.standin or self.stack.is_cpu
        args = ["down", "--remove-orphans"] + (["--volumes"] if scratch else [])
        with contextlib.suppress(Exception):
            self.project.run(args, profiles=["*"], capture=True, timeout=300)

    # -- one profile --

    def labels(self, service: str) -> list[str]:
        return [f"com.docker.compose.project={self.project.name}", f"com.docker.compose.service={service}"]

    def run_profile(self, name: str) -> dict[str, Any]:
        """Start, watch until decisive, gather evidence, tear down; returns the report row."""
        started_at = report.utc_now()
        t0 = time.monotonic()
        judge = Judge(self.options.timeout_s, now=t0, confirm=self.stack.settings.healthcheck.retries)
        watch = Watch(name, judge, Streams(self.client))
        try:
            self.start(watch)
            self.follow(watch)
            evidence = self.evidence(watch)
        finally:
            watch.streams.close()
            self.remove_service(name)
            self.current = None
        elapsed = (watch.judge.decided_at or time.monotonic()) - t0
        return self.row(name, watch.judge.verdict(), evidence, started_at, elapsed)

    def start(self, watch: Watch) -> None:
        """``compose up -d`` of the profile's service only, with the event stream already open."""
        name = watch.name
        self.remove_service(name)
        self.current = name
        watch.streams.follow_events(time.time() - 1, self.labels(name))
        prebuilt = self.options.standin or self.stack.is_cpu  # built by compose_project, never by compose
        args = ["up", "--detach", "--no-deps"] + (["--no-build"] if prebuilt else []) + [name]
        result = self.project.run(args, profiles=[name], capture=True, timeout=3600)
        if result.returncode != 0:
            detail = " ".join((result.stderr or result.stdout or "").split())[-400:]
            raise ExternalError(f"docker compose up {name} failed (exit {result.returncode}): {detail}")
        found = self.client.containers.list(all=True, filters={"label": self.labels(name)})
        if not found:
            raise ExternalError(f"docker compose up {name} returned, but no container of {name} exists")
        watch.container = found[0]
        watch.streams.follow_logs(watch.container)

    def follow(self, watch: Watch) -> None:
        """Feed the judge from the streams until it decides (a queue read with a deadline, no sleeps)."""
        judge = watch.judge
        while not judge.poll(time.monotonic()):
            try:
                kind, payload = watch.streams.queue.get(timeout=max(0.05, judge.wake_at() - time.monotonic()))
            except queue.Empty:
                continue
            now = time.monotonic()
            if kind == "log":
                judge.feed(LogLine(payload), now)
            elif kind == "logend":
                judge.feed(LogEnd(), now)
            elif kind == "server_info":
                watch.fetching = False
                watch.info = watch.info or payload
            elif kind == "docker" and payload.get("id") == watch.container.id:
                self.docker_event(watch, payload, now)
            self.display.status(status_text(judge))

    def docker_event(self, watch: Watch, payload: Mapping[str, Any], now: float) -> None:
        action = str(payload.get("Action") or payload.get("status") or "")
        if action.startswith(("health_status", "exec_die")):
            for probe in self.new_probes(watch):
                watch.judge.feed(probe, now)
            if watch.info is None and not watch.fetching:
                watch.fetching = True  # the server may listen now: ask it what it resolved
                watch.streams.fetch_later("server_info", self.server_info)
        if action.startswith("health_status:"):
            watch.judge.feed(HealthChange(action.split(":", 1)[1].strip()), now)
        elif action == "die":
            code = ((payload.get("Actor") or {}).get("Attributes") or {}).get("exitCode")
            watch.judge.feed(Exited(_int_or_none(code)), now)
        elif action == "oom":
            watch.judge.oom_killed = True

    def new_probes(self, watch: Watch) -> list[Probe]:
        """Health-log entries not seen yet (Docker keeps only the last five, so read after every run)."""
        try:
            attrs = self.client.api.inspect_container(watch.container.id)
        except Exception:
            return []
        fresh = []
        for key, probe in health_probes(attrs):
            if key not in watch.seen:
                watch.seen.add(key)
                fresh.append(probe)
        return fresh

    def evidence(self, watch: Watch) -> dict[str, Any]:
        """Everything worth keeping about the decided profile, read before the container is removed."""
        judge = watch.judge
        try:
            state = self.client.api.inspect_container(watch.container.id).get("State") or {}
        except Exception:
            state = {}
        judge.oom_killed = judge.oom_killed or bool(state.get("OOMKilled"))
        judge.health = (state.get("Health") or {}).get("Status") or judge.health
        judge.add_probes(self.new_probes(watch))
        stopped = judge.exited or state.get("Status") in ("exited", "dead")
        if judge.exit_code is None and stopped:
            judge.exit_code = _int_or_none(state.get("ExitCode"))
        watch.info = watch.info or pending_server_info(watch.streams)
        if watch.info is None and state.get("Running"):
            watch.info = self.server_info()
        info = watch.info
        requested = requested_backends(self.stack, watch.name)
        return {
            "log_match": judge.log_evidence(),
            "log_tail": judge.log_tail(),
            "exit_code": judge.exit_code if stopped else None,
            "oom_killed": judge.oom_killed,
            "health": judge.health_evidence(),
            "requested": requested,
            "effective": effective_from(info) if info else None,
            "startup": judge.startup_evidence(requested),
            "server_version": str(info["version"]) if info and info.get("version") is not None else None,
            "timeout_s": self.options.timeout_s,
        }

    def server_info(self) -> dict[str, Any] | None:
        settings = self.stack.settings
        host = "127.0.0.1" if settings.bind_address in ("0.0.0.0", "::") else settings.bind_address  # noqa: S104
        api_key = None
        if settings.api_key:
            with contextlib.suppress(OSError):
                api_key = (
                    (self.stack.root / settings.secrets_dir / "api_key").read_text(encoding="utf-8").strip()
                )
        return fetch_server_info(host, settings.port, api_key or None)

    def row(
        self, name: str, verdict: Verdict, evidence: dict[str, Any], started_at: str, elapsed: float
    ) -> dict[str, Any]:
        profile = self.stack.profile(name)
        return {
            "profile": name,
            "variant": self.stack.variant_name_for(name),
            "model": self.stack.model_path_for(name),
            "expect": profile.expect,
            "verdict": verdict.cls,
            "match": verdict.cls == profile.expect,
            "fast": self.options.fast,
            "standin": self.options.standin,
            "source": source_label(self.stack, self.options),
            "fault": standin_fault(self.stack, name) if self.options.standin else None,
            "decided_by": verdict.decided_by,
            "reason": verdict.reason,
            "started_at": started_at,
            "finished_at": report.utc_now(),
            "elapsed_s": round(elapsed, 2),
            "evidence": evidence,
        }


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def pending_server_info(streams: Streams) -> dict[str, Any] | None:
    """A /server_info answer still waiting in the queue (the verdict came first), or None."""
    while True:
        try:
            kind, payload = streams.queue.get_nowait()
        except queue.Empty:
            return None
        if kind == "server_info" and payload:
            return dict(payload)


def requested_backends(stack: Stack, name: str) -> dict[str, str]:
    """What the profile asks for (semantic fields it sets, and the TP size)."""
    requested = {k: v for k, v in stack.profile(name).backends().items() if v is not None}
    requested["tp_size"] = str(stack.model.tp_size)
    return requested


def status_text(judge: Judge) -> str:
    """One line for the progress display."""
    fatal = judge.fatal_log()
    if fatal is not None:
        return f"{fatal.cls} in the server log (line {fatal.line}); collecting evidence"
    if judge.exited:
        return f"exited with status {judge.exit_code}; reading the rest of the log"
    if not judge.probes:
        return "container started, waiting for the first healthcheck"
    return f"last healthcheck: {last_line(judge.probes[-1].output)}"


# --- the sweep ----------------------------------------------------------------------------------------------


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; the running container is removed before the sweep exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signal_handlers(handler: Any) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def default_out(stack: Stack) -> Path:
    """``reports/<UTC timestamp>/`` next to profiles.yaml."""
    return stack.root / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def default_timeout(stack: Stack, standin: bool) -> float:
    """Per-profile budget: the stand-in's short one, else start period + a few healthcheck rounds."""
    return STANDIN_TIMEOUT_S if standin else operate.default_wait_seconds(stack)


def document_for(plan: Plan, options: Options, variant: str | None) -> report.Document:
    from bwstack import __version__

    stack = plan.stack
    settings = stack.settings
    return report.new_document(
        stack={
            "file": stack.path.name,
            "project": settings.project,
            "model": stack.model.path,
            "revision": stack.model.revision,
            "served_name": stack.model.served_name,
            "gpu_arch": "cpu" if stack.is_cpu else settings.gpu_arch,
            "tp_size": stack.model.tp_size,
        },
        mode={
            "kind": "stand-in" if options.standin else "real",
            "source": source_label(stack, options),
            "standin": options.standin,
            "fast": options.fast,
            "variant": variant,
            "timeout_s": options.timeout_s,
        },
        variants=variant_manifests(stack, plan.names),
        plan=plan.names,
        generated_by=f"bwstack {__version__}",
    )


def source_label(stack: Stack, options: Options) -> str:
    """Where a row's verdict came from, in words the report prints next to it."""
    if options.standin:
        return "stand-in (CPU imitation of SGLang; not a GPU result)"
    if stack.is_cpu:
        return "real SGLang on the CPU (tiny model; no GPU kernels)"
    return "real SGLang on this host's GPUs"


def variant_manifests(stack: Stack, names: Sequence[str]) -> dict[str, Any]:
    used = sorted({stack.variant_name_for(name) for name in names})
    return {name: stack.variant(name).manifest() for name in used}


def open_document(
    stack: Stack, names: Sequence[str], options: Options, out: Path, *, resume: bool, variant: str | None
) -> tuple[Plan, report.Document]:
    """The plan and the report: a fresh one, or the one in ``out`` when resuming (checked to match)."""
    results = out / report.RESULTS_FILE
    if not resume:
        if results.exists():
            raise UserError(
                "this folder already holds a sweep report; pass --resume to continue it or choose "
                "another --out",
                file=results,
            )
        plan = make_plan(stack, names, variant=variant, standin=options.standin)
        return plan, document_for(plan, options, variant)
    doc = report.load_document(results)
    plan = make_plan(stack, list(names) or list(doc["plan"]), variant=variant, standin=options.standin)
    fresh = document_for(plan, options, variant)
    for key in ("standin", "fast", "variant"):
        if doc["mode"].get(key) != fresh["mode"][key]:
            raise UserError(
                f"the report was made with {key}={doc['mode'].get(key)!r}, this run has "
                f"{key}={fresh['mode'][key]!r}",
                file=results,
                field=f"mode.{key}",
            )
    for key in ("project", "model", "gpu_arch", "tp_size"):
        if doc["stack"].get(key) != fresh["stack"][key]:
            raise UserError(
                f"the report was made for {key}={doc['stack'].get(key)!r}, this stack has "
                f"{key}={fresh['stack'][key]!r}",
                file=results,
                field=f"stack.{key}",
            )
    for name, manifest in fresh["variants"].items():
        if name in doc["variants"] and doc["variants"][name] != manifest:
            raise UserError(
                f"the pins of variant {name} changed since this report was started; start a new report",
                file=results,
                field=f"variants.{name}",
            )
        doc["variants"][name] = manifest
    for name in plan.names:
        if name not in doc["plan"]:
            doc["plan"].append(name)
    return plan, doc


def compose_project(
    plan: Plan, options: Options, out: Path, client: Any, console: Any
) -> tuple[Project, list[str]]:
    """Write the compose file(s) this sweep runs into the report folder; the project using them and the host
    adjustments made (stand-in only: see :func:`memlock_reset`). The stand-in runs the rendered GPU services
    with their GPU reservation removed by its own override (:func:`gpu_reservation_reset`), so any Docker
    engine runs it: no NVIDIA runtime, no hook on the host."""
    stack = plan.stack
    overrides = render.Overrides()
    env: dict[str, str] | None = None
    name = stack.settings.project
    adjustments: list[str] = []
    files = [out / "compose.sweep.yaml"]
    if options.standin:
        from bwstack.standin_image import ensure_standin_image

        images = {
            variant: ensure_standin_image(stack, variant=variant, echo=console.print)
            for variant in sorted({stack.variant_name_for(n) for n in plan.names})
        }
        overrides = render.Overrides(
            image_by_variant=images, env_by_profile=standin_env(stack, plan.names, options)
        )
        env = {**STANDIN_HC_ENV, "BWSTACK_HC_START_PERIOD": f"{math.ceil(options.timeout_s)}s"}
        name = f"{stack.settings.project}-standin"
        files.append(out / STANDIN_OVERRIDE)
        atomic_write(files[-1], gpu_reservation_reset(plan.names))
        if not engine_allows_unlimited_memlock(client, next(iter(images.values()))):
            files.append(out / "compose.host.yaml")
            atomic_write(files[-1], memlock_reset(plan.names))
            adjustments.append(MEMLOCK_NOTE)
    else:
        env = model_env(stack, options)
        if stack.is_cpu:
            prepare_real_cpu(plan, console)
    atomic_write(files[0], render.render_compose(stack, overrides))
    if options.fast:
        files.append(out / "compose.fast.yaml")
        atomic_write(files[-1], fast_override(stack, plan.names))
    return Project(files=tuple(files), name=name, workdir=stack.root, env=env), adjustments


def prepare_real_cpu(plan: Plan, console: Any) -> None:
    """A CPU stack's real sweep: its tiny models in the model cache and its image (built once)."""
    from bwstack import standin_image, tinymodel

    stack = plan.stack
    tinymodel.ensure_for_stack(stack, echo=lambda m: console.print(m, markup=False))
    for variant in sorted({stack.variant_name_for(n) for n in plan.names}):
        ref = render.image_ref(stack, variant)
        if standin_image.image_exists(ref):
            continue
        console.print(f"sweep: building {ref} (real SGLang on the CPU; once)", markup=False)
        status = operate.build(stack, variant, tag=ref, base_image=None, dry_run=False, quiet=True)
        if status != 0:
            raise ExternalError(f"docker build of {ref} failed (exit status {status})")


def model_env(stack: Stack, options: Options) -> dict[str, str]:
    """Compose variables from the model cache for a GPU sweep: a full sweep refuses (ExternalError) until
    `bwstack fetch` verified the model, so no profile's start period covers a download; a --fast sweep (dummy
    weights, only config and tokenizer read) runs either way, offline when the model is fetched."""
    from bwstack import modelcache

    if not options.fast:
        return modelcache.service_env(stack)
    try:
        return modelcache.service_env(stack)
    except ExternalError:
        return {}


MEMLOCK_NOTE = (
    "this Docker engine cannot raise RLIMIT_MEMLOCK (rootless or nested Docker), so the stand-in services "
    "run without 'ulimits: memlock: -1' (compose.host.yaml); the CPU stand-in pins no memory"
)


def engine_allows_unlimited_memlock(client: Any, image: str) -> bool:
    """Whether the engine can start a container with ``memlock: -1`` (the rendered services ask for it)."""
    import docker

    container = client.containers.create(
        image,
        ["-c", ""],
        entrypoint=["python3"],
        ulimits=[docker.types.Ulimit(name="memlock", soft=-1, hard=-1)],
        network_mode="none",
        labels={"io.bwstack.sweep": "memlock-probe"},
    )
    try:
        container.start()
    except docker.errors.APIError as exc:
        return "rlimit" not in str(exc).lower()
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
    return True


#: the stand-in's own compose override file (in the report folder), next to the rendered compose file
STANDIN_OVERRIDE = "compose.nogpu.yaml"


def gpu_reservation_reset(names: Sequence[str]) -> str:
    """A compose override that removes each service's GPU reservation with Compose's ``!reset`` tag
    (``deploy.resources.reservations.devices``): the CPU stand-in runs the rendered GPU services on any
    engine."""
    lines = [
        "# GENERATED by `bwstack sweep --standin`: the CPU stand-in runs these services without GPUs",
        "services:",
    ]
    for name in names:
        lines += [
            f"  {json.dumps(name)}:",
            "    deploy:",
            "      resources:",
            "        reservations:",
            "          devices: !reset []",
        ]
    return "\n".join(lines) + "\n"


def memlock_reset(names: Sequence[str]) -> str:
    """A compose override that drops ``ulimits.memlock`` (Compose's ``!reset`` tag) for each service."""
    lines = ["# GENERATED by `bwstack sweep --standin`: " + MEMLOCK_NOTE, "services:"]
    for name in names:
        lines += [f"  {json.dumps(name)}:", "    ulimits:", "      memlock: !reset null"]
    return "\n".join(lines) + "\n"


def standin_env(stack: Stack, names: Sequence[str], options: Options) -> dict[str, dict[str, str]]:
    """Per profile: the fault its expectation needs, the arch it targets, the simulated load time."""
    env = {}
    for name in names:
        values = {
            "BWSTACK_STANDIN_FAULT": standin_fault(stack, name),
            "BWSTACK_STANDIN_ARCH": stack.arch_for(name),
        }
        if options.load_seconds is not None:
            values["BWSTACK_STANDIN_LOAD_SECONDS"] = f"{options.load_seconds:g}"
        env[name] = values
    return env


def run_sweep(
    stack: Stack,
    profiles: Sequence[str],
    *,
    variant: str | None,
    fast: bool,
    standin: bool,
    out: Path | None,
    resume: bool,
    timeout: float | None,
    keep: bool = False,
    standin_load_seconds: float | None = None,
    console: Any = None,
) -> int:
    """Sweep ``profiles`` (all when empty): 0 when every verdict matches, 1 otherwise, 128+N on a signal.

    Bad input (unknown profile, --resume without a matching report, a class the stand-in cannot imitate)
    raises UserError; Docker/Compose failures raise ExternalError.
    """
    from rich.console import Console

    console = console or Console(highlight=False, soft_wrap=True)
    options = Options(
        fast=fast,
        standin=standin,
        timeout_s=float(timeout) if timeout else default_timeout(stack, standin),
        keep=keep,
        load_seconds=standin_load_seconds,
    )
    out_dir = out if out is not None else default_out(stack)
    plan, doc = open_document(stack, profiles, options, out_dir, resume=resume, variant=variant)
    if not standin:
        model_env(stack, options)  # refuse before any report or container when the model is not fetched
    for skipped in plan.skipped:
        console.print(f"bwstack: warning: skipped {skipped}", markup=False)
    todo = [name for name in plan.names if name not in doc["results"]]
    report.write_report(out_dir, doc)
    where = (
        "the CPU stand-in" if standin else ("real SGLang on the CPU" if stack.is_cpu else "this host's GPUs")
    )
    console.print(
        f"sweep: {len(todo)} profile(s) to run on {where}, {len(report.decided(doc))} already decided; "
        f"report in {out_dir}",
        markup=False,
    )
    code = execute(plan, options, doc, out_dir, todo=todo, console=console) if todo else 0
    print_summary(doc, out_dir, console)
    if code:
        return code
    return 0 if report.all_match(doc) else 1


def execute(
    plan: Plan, options: Options, doc: report.Document, out: Path, *, todo: Sequence[str], console: Any
) -> int:
    """Run ``todo`` one by one, recording each verdict; returns 128+N when a signal stopped the sweep."""
    client = docker_client()
    for path in operate.ensure_secrets(plan.stack):
        console.print(f"created empty secret file {path} (mode 0600)", markup=False)
    runner: Runner | None = None
    with signal_handlers(_raise_interrupted):
        try:
            project, adjustments = compose_project(plan, options, out, client, console)
            for note in adjustments:
                console.print(f"bwstack: warning: {note}", markup=False)
            if adjustments:
                doc["host_adjustments"] = adjustments
            with Display(console, len(todo)) as display:
                runner = Runner(plan.stack, project, client, options, display)
                runner.remove_leftovers()
                for index, name in enumerate(todo, 1):
                    display.begin(index, name, profile_detail(plan.stack, name, options))
                    row = runner.run_profile(name)
                    add_next_try(plan.stack, doc, row)
                    report.record(doc, row)
                    report.write_report(out, doc)
                    display.end(row)
        except Interrupted as exc:
            console.print(
                f"bwstack: interrupted by {signal.Signals(exc.signum).name}; removing the running container",
                markup=False,
            )
            return 128 + exc.signum
        finally:
            with signal_handlers(signal.SIG_IGN):
                if runner is not None:
                    runner.finish()
    return 0


def add_next_try(stack: Stack, doc: report.Document, row: dict[str, Any]) -> None:
    """A failed row gets ``next_try`` ({profile, why}): the nearest profile worth trying, never one that is
    known, predicted or (in this sweep) seen to fail on the row's arch (:mod:`bwstack.nextstep`)."""
    from bwstack import nextstep

    if row["verdict"] == "healthy":
        return
    seen = {name: str(r["verdict"]) for name, r in doc["results"].items()}
    seen[row["profile"]] = str(row["verdict"])
    try:
        hint = nextstep.suggest(stack, row["profile"], str(row["verdict"]), verdicts=seen).to_json()
    except (UserError, ExternalError, OSError, ValueError) as exc:  # a hint never stops the sweep
        hint = {"profile": None, "why": f"no hint: {' '.join(str(exc).split())}"}
    row["next_try"] = hint


def profile_detail(stack: Stack, name: str, options: Options) -> str:
    detail = f"expect {stack.profile(name).expect}, {stack.variant_name_for(name)}"
    if options.standin:
        detail += f", fault {standin_fault(stack, name)}"
    return detail + (", fast" if options.fast else "")


def print_summary(doc: report.Document, out: Path, console: Any) -> None:
    """The matrix as plain rows (names whole at any width), where the report is, whether all matched."""
    from bwstack import textlayout

    rows = []
    for name in doc["plan"]:
        row = doc["results"].get(name)
        if row is None:
            rows.append([name, "", "not decided", "", ""])
            continue
        mode = " (fast)" if row.get("fast") else ""
        match = "yes" if row["match"] else "NO"
        rows.append([name, row["expect"], f"{row['verdict']}{mode}", match, f"{row['elapsed_s']:.1f} s"])
    console.print("bwstack sweep", markup=False)
    header = ["profile", "expect", "verdict", "matches", "time"]
    for line in textlayout.table(rows, textlayout.terminal_width(), header=header):
        console.print(line, markup=False)
    summary = report.summarize(doc)
    console.print(
        f"report: {out / report.HTML_FILE} (also {report.RESULTS_FILE}, {report.MARKDOWN_FILE})", markup=False
    )
    if report.all_match(doc):
        console.print(f"all {summary['planned']} profile(s) match their expectation", markup=False)
    else:
        bad = [n for n in report.decided(doc) if not doc["results"][n]["match"]]
        pending = summary["planned"] - summary["decided"]
        parts = [f"{len(bad)} do not match their expectation" + (f" ({', '.join(bad)})" if bad else "")]
        if pending:
            parts.append(f"{pending} not decided")
        console.print("; ".join(parts), markup=False)


DEMO_INTRO = (
    "bwstack demo, part 1 of 2: every profile of {cpu_file} runs on REAL SGLang on the CPU (tiny models made "
    "here; no GPU kernels). Part 2: every profile of {file} runs on the CPU stand-in of the SGLang server, "
    "which parses the pinned SGLang's arguments and injects the failure each profile is expected to hit. The "
    "real healthcheck, failure catalog, sweep and report do the rest; one report tells the two apart."
)
DEMO_INTRO_STANDIN_ONLY = (
    "bwstack demo: every profile of {file} runs on a CPU stand-in of the SGLang server (no GPU needed; "
    "no {cpu_file} beside it, so no real-SGLang part). The stand-in injects the failure each profile is "
    "expected to hit; the real healthcheck, failure catalog, sweep and report do the rest."
)
#: the CPU stack the demo runs for real before the stand-in part, looked up beside the stack file
CPU_STACK_FILE = "profiles.cpu.yaml"
REAL_PART = "real-cpu"
#: the CPU profiles the demo runs (tagged in profiles.cpu.yaml); `bwstack -f profiles.cpu.yaml sweep` runs all
DEMO_TAG = "demo"
STANDIN_PART = "stand-in"


def run_demo(
    stack: Stack,
    *,
    out: Path | None = None,
    keep: bool = False,
    standin_load_seconds: float | None = None,
    console: Any = None,
) -> int:
    """``bwstack demo``: the real CPU sweep (profiles.cpu.yaml), then the stand-in sweep of ``stack``, then
    one combined report (``real-cpu/`` and ``stand-in/`` hold each part's own report)."""
    from rich.console import Console

    from bwstack import model

    console = console or Console(highlight=False, soft_wrap=True)
    out_dir = out if out is not None else default_out(stack)
    cpu_path = stack.path.parent / CPU_STACK_FILE
    cpu_stack = model.load_stack(cpu_path) if cpu_path.is_file() and not stack.is_cpu else None
    words = {"file": stack.path.name, "cpu_file": CPU_STACK_FILE}
    console.print((DEMO_INTRO if cpu_stack else DEMO_INTRO_STANDIN_ONLY).format(**words), markup=False)
    parts: list[tuple[str, Path]] = []
    codes = []
    if cpu_stack is not None:
        demo = [n for n, p in cpu_stack.profiles.items() if DEMO_TAG in p.tags]  # all when none is tagged
        console.print(f"demo part 1: real SGLang on the CPU ({cpu_path.name})", markup=False)
        codes.append(
            run_sweep(
                cpu_stack,
                demo,
                variant=None,
                fast=False,
                standin=False,
                out=out_dir / REAL_PART,
                resume=False,
                timeout=None,
                keep=keep,
                console=console,
            )
        )
        parts.append((REAL_PART, out_dir / REAL_PART))
        console.print(f"demo part 2: the stand-in for the GPU profiles ({stack.path.name})", markup=False)
    standin_out = out_dir / STANDIN_PART if cpu_stack is not None else out_dir
    codes.append(
        run_sweep(stack, [], variant=None, fast=False, standin=True, out=standin_out, resume=False,
                  timeout=None, keep=keep, standin_load_seconds=standin_load_seconds, console=console)
    )  # fmt: skip
    parts.append((STANDIN_PART, standin_out))
    docs = [report.load_document(folder / report.RESULTS_FILE) for _, folder in parts]
    if len(docs) > 1:
        report.write_report(out_dir, report.combine(docs, labels=[label for label, _ in parts]))
    verdicts = sorted({str(row["verdict"]) for doc in docs for row in doc["results"].values()})
    for verdict in verdicts:
        console.print(f"  {verdict}: {signatures.DESCRIPTIONS.get(verdict, '')}", markup=False)
    console.print(
        f"open {out_dir / report.HTML_FILE} in a browser for the evidence of each profile "
        "(rows say 'real SGLang' or 'stand-in')",
        markup=False,
    )
    return next((code for code in codes if code), 0)
