"""Measure the sweep's own overhead per profile on the CPU stand-in (no asserts on speed).

For each profile, two ways to bring it up and down with the same compose files, image and environment:

- baseline: ``docker compose up -d --wait <service>`` then ``docker compose rm -sf <service>``;
- sweep: the sweep's own per-profile step (``Runner.run_profile``: up, watch events/logs/health until the
  verdict, gather evidence, tear down).

The stand-in simulates a weight load of a known length (``--load-seconds``), so "overhead" is wall time minus
that load time. Printed: both overheads, their ratio (sweep / baseline) and the sweep's decision latency (from
``up`` to the verdict). Run it from the repository root:

    .venv/bin/python benchmarks/sweep_overhead.py [-f profiles.yaml] [--profile NAME ...] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import add_smoke, require_docker
from rich.console import Console

from bwstack.host import secretfiles
from bwstack.host.dockercompose import Project
from bwstack.stack import loader
from bwstack.sweep.display import Display
from bwstack.sweep.plan import Options, make_plan
from bwstack.sweep.run import compose_project
from bwstack.sweep.runner import Runner
from bwstack.sweep.streams import docker_client


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-f", "--file", type=Path, default=Path("profiles.yaml"), help="the profiles file")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        help="profile to measure (default: the first two expected healthy)",
    )
    parser.add_argument("--load-seconds", type=float, default=2.0, help="simulated weight-load time")
    parser.add_argument("--repeat", type=int, default=3, help="runs per profile and method")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-profile budget")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one profile, one run each way
        args.repeat, args.profile = 1, args.profile[:1]
    return args


def baseline(project: Project, name: str, timeout: float) -> float:
    """Wall seconds of ``up -d --wait`` + ``rm -sf`` of one service."""
    started = time.perf_counter()
    up = project.run(
        ["up", "--detach", "--wait", "--wait-timeout", str(int(timeout)), "--no-deps", "--no-build", name],
        profiles=[name],
        capture=True,
        timeout=timeout + 60,
    )
    project.run(["rm", "--stop", "--force", name], profiles=[name], capture=True, timeout=300)
    if up.returncode != 0:
        raise SystemExit(f"baseline: compose up --wait {name} failed: {(up.stderr or '').strip()[-300:]}")
    return time.perf_counter() - started


def measured(runner: Runner, name: str) -> tuple[float, float, str]:
    """Wall seconds of the sweep's step for one profile, its decision latency and the verdict."""
    started = time.perf_counter()
    row = runner.run_profile(name)
    return time.perf_counter() - started, float(row["elapsed_s"]), str(row["verdict"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_docker()
    stack = loader.load_stack(args.file)
    names = (
        args.profile
        or [n for n, p in stack.profiles.items() if p.expect == "healthy"][: 1 if args.smoke else 2]
    )
    out = Path(tempfile.mkdtemp(prefix="bwstack-sweep-bench-"))
    console = Console(stderr=True, highlight=False)
    options = Options(
        fast=False, standin=True, timeout_s=args.timeout, keep=False, load_seconds=args.load_seconds
    )
    plan = make_plan(stack, names, variant=None, standin=True)
    client = docker_client()
    secretfiles.ensure_secrets(plan.stack)
    project, _ = compose_project(plan, options, out, client, console)
    display = Display(Console(file=io.StringIO()), total=len(names) * args.repeat)
    runner = Runner(plan.stack, project, client, options, display)
    load = args.load_seconds
    print(f"stand-in load time {load:g} s, {args.repeat} run(s) per profile and method (median shown)")
    print(
        f"{'profile':24} {'baseline s':>10} {'overhead':>9} {'sweep s':>8} {'overhead':>9} {'ratio':>6} "
        f"{'decided after s':>15}  verdict"
    )
    try:
        runner.remove_leftovers()
        for name in names:
            base = [baseline(project, name, args.timeout) for _ in range(args.repeat)]
            runs = [measured(runner, name) for _ in range(args.repeat)]
            base_over = statistics.median(base) - load
            sweep_over = statistics.median(r[0] for r in runs) - load
            ratio = sweep_over / base_over if base_over > 0 else float("nan")
            decided = statistics.median(r[1] for r in runs)
            print(
                f"{name:24} {statistics.median(base):10.2f} {base_over:9.2f} {sweep_over + load:8.2f} "
                f"{sweep_over:9.2f} {ratio:6.2f} {decided:15.2f}  {runs[-1][2]}"
            )
    finally:
        runner.finish()
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
