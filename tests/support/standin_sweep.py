"""Real sweep reports without Docker, for tests of what reads results.json (``report diff``, the grid).

Each profile runs on the real CPU stand-in server (``python -m bwstack.standin`` with the profile's rendered
SGLang argv, its variant's parser snapshot and the fault its ``expect`` needs, or one the test imposes), is probed
by the real deep healthcheck (``healthchecks/warmup.py``), judged by the sweep's own :class:`bwstack.sweep.judge.Judge`
and recorded by the sweep's own row, document and report code. Only Docker's part is played here: a local
process instead of a container, and health events derived from the probes the way Docker derives them
(``healthy`` on the first pass; ``unhealthy`` after ``retries`` failures in a row once the server answers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bwstack import launch, record
from bwstack.stack import loader, schema
from bwstack.sweep import report
from bwstack.sweep.judge import Exited, HealthChange, Judge, LogEnd, LogLine, Probe
from bwstack.sweep.plan import Options, standin_fault
from bwstack.sweep.run import add_next_try, open_document
from bwstack.sweep.runner import Runner
from bwstack.sweep.streams import effective_from, fetch_server_info
from support.stack import ROOT

PROBE_EVERY_S = 0.3
PROBE_TIMEOUT_S = 15


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _argv(stack: schema.Stack, name: str, port: int) -> list[str]:
    argv = launch.launch_spec(stack, name).argv
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    return argv


def _probe(stack: schema.Stack, name: str, port: int, log: Path, state: Path) -> Probe:
    argv = [sys.executable, str(ROOT / "healthchecks" / "warmup.py"), "--url", f"http://127.0.0.1:{port}"]
    argv += ["--timeout", str(PROBE_TIMEOUT_S), "--mode", "full", "--log", str(log), "--state", str(state)]
    for pair in launch.launch_spec(stack, name).expectations:
        argv += ["--expect", pair]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S + 30, check=False)
    output = (done.stdout + done.stderr).strip()
    return Probe(done.returncode, output, time.strftime("%Y-%m-%d %H:%M:%S"))


def run_profile(stack: schema.Stack, name: str, options: Options, fault: str, work: Path) -> dict[str, Any]:
    """One profile on the stand-in, decided by the sweep's Judge; returns the sweep's report row."""
    port = _free_port()
    log = work / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_STANDIN_")}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        BWSTACK_STANDIN_ARGS=str(stack.images_dir / stack.variant_name_for(name) / "sglang-args.json"),
        BWSTACK_STANDIN_FAULT=fault,
        BWSTACK_STANDIN_ARCH=stack.arch_for(name),
        BWSTACK_STANDIN_LOAD_SECONDS=f"{options.load_seconds or 0:g}",
    )
    started_at = record.utc_now()
    t0 = time.monotonic()
    retries = stack.settings.healthcheck.retries
    judge = Judge(options.timeout_s, now=t0, confirm=retries)
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bwstack.standin", *_argv(stack, name, port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
        )
    seen = 0
    failures = 0
    next_probe = t0
    info: dict[str, Any] | None = None
    exited = False
    try:
        while not judge.poll(time.monotonic()):
            text = log.read_text(encoding="utf-8", errors="replace")
            complete = text[: text.rfind("\n") + 1]
            for line in complete.splitlines()[seen:]:
                judge.feed(LogLine(line), time.monotonic())
                seen += 1
            if not exited and proc.poll() is not None:
                exited = True
                rest = log.read_text(encoding="utf-8", errors="replace").splitlines()[seen:]
                for line in rest:
                    judge.feed(LogLine(line), time.monotonic())
                judge.feed(Exited(proc.returncode), time.monotonic())
                judge.feed(LogEnd(), time.monotonic())
                continue
            if not exited and time.monotonic() >= next_probe:
                probe = _probe(stack, name, port, log, work / f"{name}.hc-state")
                now = time.monotonic()
                judge.feed(probe, now)
                if probe.exit_code == 0:
                    failures = 0
                    info = info or fetch_server_info("127.0.0.1", port, None)
                    judge.feed(HealthChange("healthy"), now)
                elif probe.verdict_class not in (None, "starting"):
                    failures += 1
                    info = info or fetch_server_info("127.0.0.1", port, None)
                    if failures >= retries:
                        judge.feed(HealthChange("unhealthy"), now)
                next_probe = time.monotonic() + PROBE_EVERY_S
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    evidence = {
        "log_match": judge.log_evidence(),
        "log_tail": judge.log_tail(),
        "exit_code": judge.exit_code if exited else None,
        "oom_killed": False,
        "health": judge.health_evidence(),
        "requested": launch.launch_spec(stack, name).requested(),
        "effective": effective_from(info) if info else None,
        "server_version": str(info["version"]) if info and info.get("version") is not None else None,
        "timeout_s": options.timeout_s,
    }
    runner = Runner(stack, None, None, options, None)  # type: ignore[arg-type]
    elapsed = (judge.decided_at or time.monotonic()) - t0
    row = runner.row(name, judge.verdict(), evidence, started_at, elapsed)
    row["fault"] = fault
    return row


def sweep_without_docker(
    profiles: Path,
    out: Path,
    names: Sequence[str] = (),
    *,
    faults: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> report.Document:
    """A stand-in sweep of ``names`` (all when empty) written to ``out`` exactly as ``bwstack sweep`` writes it."""
    stack = loader.load_stack(profiles)
    options = Options(fast=False, standin=True, timeout_s=timeout_s, keep=False, load_seconds=0.0)
    plan, doc = open_document(stack, list(names), options, out, resume=False, variant=None)
    work = out.parent / f"{out.name}-work"
    work.mkdir(parents=True, exist_ok=True)
    for name in plan.names:
        fault = (faults or {}).get(name) or standin_fault(plan.stack, name)
        row = run_profile(plan.stack, name, options, fault, work)
        add_next_try(plan.stack, doc, row)  # as execute does
        report.record(doc, row)
        report.write_report(out, doc)
    return doc
