"""How fast a fault is detected, and what one probe costs: bwstack's healthcheck versus SGLang's own compose
healthcheck, on the same CPU stand-in (no asserts on speed; every figure comes from this run).

(a) Detection latency. One profile's service, rendered by bwstack with the stand-in image and a fault injected
    at start (``BWSTACK_STANDIN_FAULT``), runs in two flavours side by side:

    - bwstack: the service exactly as rendered (``serve.py`` entrypoint, deep healthcheck, the rendered
      timings: interval 30 s, start period 45 min, fail-fast and linger);
    - sglang: the same service the way SGLang's ``docker/compose.yaml`` runs it: entrypoint
      ``python3 -m sglang.launch_server`` and ``healthcheck: test: curl -f http://localhost:30000/health ||
      exit 1`` with Docker's default timing (interval 30 s, timeout 30 s, retries 3, no start period). The
      stand-in image has no curl, so the probe is an exec-form ``python3 -c`` one-liner with curl -f's
      semantics (no answer or HTTP status >= 400 -> exit 1).

    Both run with ``restart: "no"`` (a restart policy only repeats the cycle) and without a published port.
    Measured from the start of ``docker compose up --wait``: when Docker first reports the container
    ``unhealthy`` (or exited), and when ``up --wait`` exits and with which status. A flavour that has not
    noticed the fault within ``--window`` seconds is reported as "not detected".

(b) Probe cost. In one healthy bwstack container: the wall time of ``docker exec`` of the rendered healthcheck
    in light mode (after its first pass: liveness + log scan) and in full mode (every check, sampled decode
    included), against the curl-equivalent one-liner, ``--runs`` times each; median and 90th percentile. A
    ``python3 -c pass`` exec is the floor every exec-form Python probe pays (docker exec + interpreter start).

Run from the repository root (Docker and Compose v2 needed; builds the stand-in image if missing):

    .venv/bin/python benchmarks/detection.py [-f profiles.yaml] [--profile NAME]
        [--faults nan,device_assert,assertion] [--window 120] [--runs 20] [--load-seconds 2]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import add_smoke, require_docker
from ruamel.yaml import YAML

from bwstack import classify, launch
from bwstack.build.standin_image import ensure_standin_image
from bwstack.files import atomic_write
from bwstack.host.dockercompose import Project
from bwstack.render import compose
from bwstack.stack import loader, schema
from bwstack.sweep.judge import last_line
from bwstack.sweep.run import (
    STANDIN_HC_ENV,
    STANDIN_OVERRIDE,
    engine_allows_unlimited_memlock,
    gpu_reservation_reset,
    memlock_reset,
)
from bwstack.sweep.streams import docker_client

POLL_S = 0.25
SGLANG_ENTRYPOINT = ["python3", "-m", "sglang.launch_server"]


def curl_equivalent(port: int) -> list[str]:
    """``curl -f http://localhost:PORT/health`` as an exec-form probe: exit 1 on >= 400 or no answer."""
    code = f"import urllib.request; urllib.request.urlopen('http://localhost:{port}/health', timeout=30)"
    return ["python3", "-c", code]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-f", "--file", type=Path, default=Path("profiles.yaml"), help="the profiles file")
    parser.add_argument(
        "--profile", default=None, help="profile to run (default: the first expected healthy)"
    )
    parser.add_argument(
        "--faults", default="nan,device_assert,assertion", help="stand-in faults to inject, comma-separated"
    )
    parser.add_argument("--window", type=float, default=120.0, help="seconds to wait for a detection")
    parser.add_argument("--runs", type=int, default=20, help="probe-cost runs per probe kind")
    parser.add_argument("--load-seconds", type=float, default=2.0, help="simulated weight-load time")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one fault, the stand-in sweep's short probe timings, a short window, 2 runs per probe
        args.faults, args.window, args.runs, args.load_seconds = "nan", min(args.window, 15.0), 2, 1.0
    return args


# --- compose files ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What every scenario shares: the stack, the profile, the rendered document and host facts."""

    stack: schema.Stack
    profile: str
    rendered: dict[str, Any]
    memlock_refused: bool
    load_seconds: float
    env: dict[str, str] | None  # compose variables: None = the rendered healthcheck timings


def make_setup(args: argparse.Namespace) -> Setup:
    stack = loader.load_stack(args.file)
    profile = args.profile or next(n for n, p in stack.profiles.items() if not p.known_bad)
    variant = stack.variant_name_for(profile)
    image = ensure_standin_image(stack, variant=variant, echo=lambda m: print(m, file=sys.stderr))
    overrides = compose.Overrides(image_by_variant={variant: image})
    rendered: dict[str, Any] = YAML(typ="safe").load(compose.render_compose(stack, overrides))
    refused = not engine_allows_unlimited_memlock(docker_client(), image)
    env = dict(STANDIN_HC_ENV) if args.smoke else None
    return Setup(stack, profile, rendered, refused, args.load_seconds, env)


def service_for(setup: Setup, flavour: str, fault: str) -> dict[str, Any]:
    """The profile's rendered service for one flavour (bwstack | sglang) with ``fault`` injected."""
    service: dict[str, Any] = copy.deepcopy(setup.rendered["services"][setup.profile])
    service.pop("ports", None)  # nothing from the host needs it; parallel scenarios never collide
    service.pop("build", None)
    service.pop("profiles", None)  # the project holds this one service
    service["restart"] = "no"
    service["environment"].update(
        {"BWSTACK_STANDIN_FAULT": fault, "BWSTACK_STANDIN_LOAD_SECONDS": f"{setup.load_seconds:g}"}
    )
    if flavour == "sglang":
        service["entrypoint"] = SGLANG_ENTRYPOINT
        service["healthcheck"] = {"test": ["CMD", *curl_equivalent(setup.stack.settings.port)]}
    return service


def write_project(setup: Setup, flavour: str, fault: str, root: Path) -> Project:
    """A one-service compose project in its own folder (JSON is YAML); returns it."""
    folder = root / f"{flavour}-{fault}"
    (folder / "secrets").mkdir(parents=True)
    for secret in launch.SECRETS:
        (folder / "secrets" / secret).write_text("", encoding="utf-8")
    doc = {key: value for key, value in setup.rendered.items() if key != "services"}
    doc["name"] = f"bwbench{uuid.uuid4().hex[:8]}"
    doc["services"] = {flavour: service_for(setup, flavour, fault)}
    files = [folder / "compose.json", folder / STANDIN_OVERRIDE]
    atomic_write(files[0], json.dumps(doc, indent=1))
    atomic_write(files[1], gpu_reservation_reset([flavour]))  # the stand-in sweep's own override
    if setup.memlock_refused:  # rootless or nested Docker: the same adjustment as the stand-in sweep
        files.append(folder / "compose.host.yaml")
        atomic_write(files[-1], memlock_reset([flavour]))
    return Project(files=tuple(files), name=str(doc["name"]), workdir=folder, env=setup.env)


# --- (a) detection ------------------------------------------------------------------------------------------


@dataclass
class Detection:
    """What one scenario saw, in seconds from the start of ``up --wait``."""

    flavour: str
    fault: str
    unhealthy_s: float | None = None
    exited_s: float | None = None
    healthy_s: float | None = None
    up_exit_s: float | None = None
    up_status: int | None = None
    last_probe: str = ""
    exit_code: int | None = None
    ran: bool = False  # the container reached "running" at least once
    up_said: str = ""  # the last line `up` wrote to stderr


def container_id(project: Project) -> str | None:
    """The project's container (any state), by the compose project label."""
    result = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", f"label=com.docker.compose.project={project.name}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ids = result.stdout.split()
    return ids[0] if ids else None


def tear_down(project: Project) -> None:
    """``down -v``, then anything a failure left (containers, network, volumes of the project)."""
    project.run(["down", "--volumes", "--remove-orphans", "--timeout", "5"], capture=True, timeout=300)
    label = f"label=com.docker.compose.project={project.name}"
    for kind, remove in (
        ("container", ["rm", "-f"]),
        ("network", ["network", "rm"]),
        ("volume", ["volume", "rm"]),
    ):
        listing = ["ps", "-aq"] if kind == "container" else [kind, "ls", "-q"]
        ids = subprocess.run(
            ["docker", *listing, "--filter", label], capture_output=True, text=True, check=False
        )
        if ids.stdout.split():
            subprocess.run(["docker", *remove, *ids.stdout.split()], capture_output=True, check=False)


def container_state(cid: str) -> dict[str, Any] | None:
    result = subprocess.run(
        ["docker", "inspect", cid], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        return None
    state: dict[str, Any] = json.loads(result.stdout)[0]["State"]
    return state


def observe(detection: Detection, state: dict[str, Any], elapsed: float) -> None:
    health = (state.get("Health") or {}).get("Status")
    if health == "unhealthy" and detection.unhealthy_s is None:
        detection.unhealthy_s = elapsed
    if health == "healthy" and detection.healthy_s is None:
        detection.healthy_s = elapsed
    detection.ran = detection.ran or bool(state.get("Running")) or state.get("Status") in ("exited", "dead")
    if state.get("Status") in ("exited", "dead") and detection.exited_s is None:
        detection.exited_s = elapsed
        detection.exit_code = int(state.get("ExitCode", -1))
    entries = (state.get("Health") or {}).get("Log") or []
    said = [probe_said(entry) for entry in entries]
    decided = [line for line in said if classify.probe_class(line) != "starting"]
    if decided:
        detection.last_probe = decided[-1]


def probe_said(entry: dict[str, Any]) -> str:
    """A health-log entry as one line: the probe's last output line, else its exit status."""
    return last_line(str(entry.get("Output") or "")) or f"(no output, probe exit {entry.get('ExitCode')})"


def run_up(project: Project, window: float, detection: Detection, started: float) -> None:
    wait = str(int(window))
    result = project.run(
        ["up", "--detach", "--wait", "--wait-timeout", wait, "--pull", "never"],
        capture=True,
        timeout=window + 120,
    )
    detection.up_exit_s = time.monotonic() - started
    detection.up_status = result.returncode
    detection.up_said = last_line(result.stderr or "")


def detect(setup: Setup, flavour: str, fault: str, root: Path, window: float) -> Detection:
    project = write_project(setup, flavour, fault, root)
    detection = Detection(flavour, fault)
    started = time.monotonic()
    waiter = threading.Thread(target=run_up, args=(project, window, detection, started), daemon=True)
    waiter.start()
    cid = None
    try:
        while time.monotonic() - started < window:
            cid = cid or container_id(project)
            state = container_state(cid) if cid else None
            if state is not None:
                observe(detection, state, time.monotonic() - started)
            if detection.unhealthy_s is not None and detection.up_exit_s is not None:
                break
            if detection.up_status not in (None, 0) and not detection.ran:
                break  # `up` failed before the container ran: nothing to wait for
            time.sleep(POLL_S)
    finally:
        waiter.join(timeout=window + 120)  # `up` ends at its own --wait-timeout: never race it with `down`
        tear_down(project)
    if not detection.ran:  # a measurement of nothing: say why instead of printing "not within"
        raise SystemExit(
            f"detection: the {flavour} container for fault {fault} never ran: docker compose up exited "
            f"{detection.up_status}: {detection.up_said or 'no message'}"
        )
    return detection


def seconds(value: float | None, window: float) -> str:
    return f"{value:.1f}" if value is not None else f"not within {window:.0f}"


def print_detections(found: list[Detection], window: float, setup: Setup) -> None:
    print(
        f"\n(a) detection latency: fault injected at container start, stand-in load {setup.load_seconds:g} s"
    )
    if setup.env:
        timings = ", ".join(f"{key}={value}" for key, value in setup.env.items())
        print(f"    bwstack's probe timings: the stand-in sweep's ({timings}), not the rendered ones")
    print("    seconds from the start of `docker compose up --wait`")
    header = f"{'fault':14} {'probe':8} {'-> unhealthy':>14} {'up --wait exit':>18}"
    print(f"{header}  what the health log says")
    for d in found:
        up = f"{seconds(d.up_exit_s, window)} (status {d.up_status})" if d.up_exit_s is not None else "-"
        said = d.last_probe or (f"container exited {d.exit_code}, no verdict" if d.exited_s else "nothing")
        if d.healthy_s is not None and d.unhealthy_s is None:
            said = f"HEALTHY at {d.healthy_s:.1f} s: {said}"
        print(f"{d.fault:14} {d.flavour:8} {seconds(d.unhealthy_s, window):>14} {up:>18}  {said[:90]}")
    for fault in dict.fromkeys(d.fault for d in found):
        pair = {d.flavour: d for d in found if d.fault == fault}
        ours, theirs = pair["bwstack"].unhealthy_s, pair["sglang"].unhealthy_s
        if ours is not None and theirs is not None:
            print(f"ratio {fault}: bwstack / sglang time to unhealthy = {ours / theirs:.2f}")
        elif ours is not None:
            print(
                f"ratio {fault}: sglang's healthcheck did not detect it within {window:.0f} s "
                f"(bwstack: {ours:.1f} s)"
            )


# --- (b) probe cost -----------------------------------------------------------------------------------------


def rendered_probe(setup: Setup, mode: str) -> list[str]:
    """The rendered healthcheck command (compose defaults filled in), in ``mode``, with its own state file."""
    test = setup.rendered["services"][setup.profile]["healthcheck"]["test"][1:]
    argv = [re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", part) for part in test]
    argv[argv.index("--mode") + 1] = mode
    argv[argv.index("--state") + 1] = f"/tmp/bwstack-bench-{mode}.json"
    return argv


def timed_exec(cid: str, argv: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    result = subprocess.run(["docker", "exec", cid, *argv], capture_output=True, timeout=300, check=False)
    return time.perf_counter() - started, result.returncode


def probe_costs(setup: Setup, root: Path, runs: int) -> dict[str, list[float]]:
    project = write_project(setup, "bwstack", "none", root)
    try:
        up = project.run(["up", "--detach", "--pull", "never"], capture=True, timeout=300)
        if up.returncode != 0:
            raise SystemExit(f"probe cost: docker compose up exited {up.returncode}: {last_line(up.stderr)}")
        cid = container_id(project)
        if cid is None:
            raise SystemExit("probe cost: the container did not start")
        curl = curl_equivalent(setup.stack.settings.port)
        deadline = time.monotonic() + 120
        while timed_exec(cid, curl)[1] != 0:
            if time.monotonic() > deadline:
                raise SystemExit("probe cost: the stand-in never answered /health")
            time.sleep(POLL_S)
        probes = {
            "light": rendered_probe(setup, "light"),
            "full": rendered_probe(setup, "full"),
            "curl": curl,
            "floor": ["python3", "-c", "pass"],
        }
        timed_exec(cid, probes["light"])  # the first light pass is a full one (nothing healthy seen yet)
        costs: dict[str, list[float]] = {name: [] for name in probes}
        for _ in range(runs):
            for name, argv in probes.items():
                wall, status = timed_exec(cid, argv)
                if status != 0:
                    raise SystemExit(f"probe cost: the {name} probe failed (exit {status})")
                costs[name].append(wall)
        return costs
    finally:
        tear_down(project)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def print_costs(costs: dict[str, list[float]], runs: int) -> None:
    print(f"\n(b) probe cost: wall time of `docker exec <probe>` in one healthy container, {runs} runs each")
    labels = {
        "light": "bwstack light",
        "full": "bwstack full",
        "curl": "curl -f /health (one-liner)",
        "floor": "python3 -c pass (exec floor)",
    }
    base = statistics.median(costs["curl"])
    print(f"{'probe':30} {'median ms':>10} {'p90 ms':>8} {'x curl':>7}")
    for name, values in costs.items():
        median = statistics.median(values)
        print(f"{labels[name]:30} {median * 1000:10.0f} {p90(values) * 1000:8.0f} {median / base:7.2f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_docker()
    setup = make_setup(args)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    root = Path(tempfile.mkdtemp(prefix="bwstack-detection-"))
    service = setup.rendered["services"][setup.profile]
    print(
        f"every row below is the CPU STAND-IN of SGLang (image {service['image']}, fault injected by "
        f"BWSTACK_STANDIN_FAULT), not a GPU server: profile {setup.profile}'s rendered service with its GPU "
        f"reservation removed by {STANDIN_OVERRIDE}, as `bwstack sweep --standin` runs it"
    )
    try:
        scenarios = [(flavour, fault) for fault in faults for flavour in ("bwstack", "sglang")]
        with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
            found = list(pool.map(lambda s: detect(setup, s[0], s[1], root, args.window), scenarios))
        print_detections(found, args.window, setup)
        print_costs(probe_costs(setup, root, args.runs), args.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
