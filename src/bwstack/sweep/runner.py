"""One profile's run: start its service, feed the three streams to the :class:`Judge`, stop it again."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bwstack import record
from bwstack.errors import ExternalError
from bwstack.host import stackproject
from bwstack.host.dockercompose import Project
from bwstack.launch import launch_spec
from bwstack.record.types import Evidence, Quality, Row
from bwstack.stack.schema import Stack
from bwstack.sweep import bench, soak
from bwstack.sweep.display import Display, status_text
from bwstack.sweep.judge import Exited, HealthChange, Judge, LogEnd, LogLine, Outcome, Probe
from bwstack.sweep.plan import STANDIN_IMITATES, Options, source_label, standin_fault
from bwstack.sweep.quality import Step as QualityStep
from bwstack.sweep.quality import words as quality_words
from bwstack.sweep.streams import (
    Streams,
    effective_from,
    fetch_server_info,
    health_probes,
    int_or_none,
    pending_server_info,
)
from healthchecks import imagelayout, longprobe, verdict


def probe_scores(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """The short and long-context scores of the last healthy probe that reported them: the serve wrapper's
    readiness probe (a full pass, in the server log: it reports both), then Docker's health probes (a later
    full pass, or the periodic long probe); None each when no probe did."""
    found: dict[str, Any] = {"short": None, "long": None, "long_tokens": None}
    lines = [str(evidence.get("readiness") or "")]
    lines += [str(probe.get("output") or "") for probe in (evidence.get("health") or {}).get("last") or []]
    for line in lines:
        said = verdict.Verdict.parse(line)
        if said is not None and said.healthy:
            seen = longprobe.scores_in(line)
            found.update({k: v for k, v in seen.items() if v is not None})
    return found


#: log lines read back for the readiness verdict (it comes within seconds of the server's ready line)
READINESS_TAIL = 5000

#: seconds a stand-in container gets to stop before SIGKILL (the real stack keeps stop_grace_period)
STANDIN_STOP_S = 5


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
        self,
        stack: Stack,
        project: Project,
        client: Any,
        options: Options,
        display: Display,
        *,
        quality: QualityStep | None = None,
    ) -> None:
        self.stack = stack
        self.project = project
        self.client = client
        self.options = options
        self.display = display
        self.current: str | None = None
        self.bench = bench.Bench(stack, options.standin) if options.bench else None
        self.quality = quality

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
        for service in stackproject.stop_other_profiles(self.project, keep=""):
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

    def run_profile(self, name: str) -> Row:
        """Start, watch until decisive, gather evidence, tear down; returns the report row."""
        started_at = record.utc_now()
        t0 = time.monotonic()
        judge = Judge(self.options.timeout_s, now=t0, confirm=self.stack.settings.healthcheck.retries)
        watch = Watch(name, judge, Streams(self.client))
        speed: dict[str, Any] | None = None
        soaked: dict[str, Any] | None = None
        measured: Quality | None = None
        try:
            self.start(watch)
            self.follow(watch)
            evidence = self.evidence(watch)
            outcome = watch.judge.verdict()
            if self.bench is not None and outcome.cls == "healthy":
                speed = self.measure(watch)
            if self.quality is not None and outcome.cls == "healthy":
                measured = self.measure_quality(watch)
            if self.options.soak_s > 0 and outcome.cls == "healthy":
                soaked = self.soak(watch)
                outcome = soak.row_verdict(outcome, soaked)
        finally:
            watch.streams.close()
            self.remove_service(name)
            self.current = None
        elapsed = (watch.judge.decided_at or time.monotonic()) - t0
        row = self.row(name, outcome, evidence, started_at, elapsed)
        if watch.judge.phases.starts:  # seconds per start-up phase, from the server's own log
            row["start"] = watch.judge.phases.progress().record()
        if speed is not None:
            row["speed"] = speed
        if soaked is not None:
            row["soak"] = soaked
        if measured is not None:
            row["quality"] = measured
        if self.options.standin:
            row["imitated"] = STANDIN_IMITATES
        if outcome.cls == "healthy":
            row["scores"] = probe_scores(evidence)
        return row

    def soak(self, watch: Watch) -> dict[str, Any]:
        """The soak step (``--soak``) against the healthy, still running container."""
        seconds = self.options.soak_s
        self.display.status(
            f"healthy; soaking for {seconds:g} s ({self.stack.settings.soak.concurrency} streams)"
        )
        key = f"{imagelayout.SECRETS_DIR}/api_key" if self.stack.settings.api_key else None
        try:
            return soak.measure(
                soak.for_profile(self.stack, watch.name), watch.container.id,
                port=self.stack.settings.port, seconds=seconds, api_key_file=key,
            )  # fmt: skip
        except (OSError, ValueError) as exc:
            return {"verdict": "error", "reason": f"soak step failed: {' '.join(str(exc).split())[:300]}"}

    def measure_quality(self, watch: Watch) -> Quality:
        """The quality step (``--compare-to``, ``--retrieval``) against the healthy, still running server."""
        assert self.quality is not None
        self.display.status("healthy; recording answers on the seeded prompts and the needle task")
        url, key = self.server_address()
        measured = self.quality.measure(watch.name, url, key)
        self.display.note(f"{watch.name}: {quality_words(measured)}")
        return measured

    def measure(self, watch: Watch) -> dict[str, Any]:
        """The bench step (``--bench``) against the healthy, still running container."""
        assert self.bench is not None
        self.display.status(f"healthy; measuring speed ({self.stack.settings.bench.num_prompts} requests)")
        image = str((watch.container.attrs or {}).get("Image") or self.stack.variant_name_for(watch.name))
        try:
            return self.bench.measure(watch.name, watch.container.id, image)
        except (OSError, ValueError) as exc:  # a failed measurement never costs the verdict
            return {"error": f"bench step failed: {' '.join(str(exc).split())[:300]}"}

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
            self.display.status(status_text(judge, now))

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
            watch.judge.feed(Exited(int_or_none(code)), now)
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

    def evidence(self, watch: Watch) -> Evidence:
        """Everything worth keeping about the decided profile, read before the container is removed."""
        judge = watch.judge
        try:
            inspected = self.client.api.inspect_container(watch.container.id) or {}
        except Exception:
            inspected = {}
        state = inspected.get("State") or {}
        judge.oom_killed = judge.oom_killed or bool(state.get("OOMKilled"))
        judge.health = (state.get("Health") or {}).get("Status") or judge.health
        judge.add_probes(self.new_probes(watch))
        stopped = judge.exited or state.get("Status") in ("exited", "dead")
        if judge.exit_code is None and stopped:
            judge.exit_code = int_or_none(state.get("ExitCode"))
        watch.info = watch.info or pending_server_info(watch.streams)
        if watch.info is None and state.get("Running"):
            watch.info = self.server_info()
        info = watch.info
        requested = launch_spec(self.stack, watch.name).requested()
        return {
            "readiness": judge.readiness or self.readiness_in_log(watch),
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
            "image_id": inspected.get("Image"),
        }

    def readiness_in_log(self, watch: Watch) -> str | None:
        """The serve wrapper's readiness verdict read from the container's log (the judge stops reading the
        stream once it has decided, and the line may still have been on its way)."""
        try:
            raw = self.client.api.logs(watch.container.id, stdout=True, stderr=True, tail=READINESS_TAIL)
        except Exception:
            return None
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        for line in reversed(text.splitlines()):
            found = verdict.parse_readiness(line)
            if found is not None:
                return found
        return None

    def host_and_key(self) -> tuple[str, str | None]:
        """The running profile's address on this host and the API key (None without one)."""
        settings = self.stack.settings
        host = "127.0.0.1" if settings.bind_address in ("0.0.0.0", "::") else settings.bind_address  # noqa: S104
        api_key = None
        if settings.api_key:
            with contextlib.suppress(OSError):
                api_key = (
                    (self.stack.root / settings.secrets_dir / "api_key").read_text(encoding="utf-8").strip()
                )
        return host, api_key or None

    def server_address(self) -> tuple[str, str | None]:
        """The running profile's base URL and the API key."""
        host, api_key = self.host_and_key()
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.stack.settings.port}", api_key

    def server_info(self) -> dict[str, Any] | None:
        host, api_key = self.host_and_key()
        return fetch_server_info(host, self.stack.settings.port, api_key)

    def row(self, name: str, outcome: Outcome, evidence: Evidence, started_at: str, elapsed: float) -> Row:
        profile = self.stack.profile(name)
        return {
            "profile": name,
            "variant": self.stack.variant_name_for(name),
            "model": self.stack.model_path_for(name),
            "expect": profile.expect,
            "verdict": outcome.cls,
            "match": outcome.cls == profile.expect,
            "fast": self.options.fast,
            "standin": self.options.standin,
            "source": source_label(self.stack, self.options),
            "fault": standin_fault(self.stack, name) if self.options.standin else None,
            "decided_by": outcome.decided_by,
            "reason": outcome.reason,
            "started_at": started_at,
            "finished_at": record.utc_now(),
            "elapsed_s": round(elapsed, 2),
            "evidence": evidence,
        }
